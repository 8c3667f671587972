package messages

// RetryAfterKey is the metadata key of a RESOURCE_EXHAUSTED grain error
// (cluster.GrainErrorResponse.Metadata) holding how many seconds the caller should wait
// before it retries: the gateway's Retry-After header.
const RetryAfterKey = "retry_after_seconds"

// StartQueueKey is the metadata key of a RESOURCE_EXHAUSTED refusal of a start by the
// tenant's max_running_sessions when the tenant has a start queue: how many
// milliseconds (its start_queue_timeout) the caller may keep retrying the start, the
// same request with the same command id, while it waits for one of the tenant's
// sessions to end (internal/errcode.StartQueue).
const StartQueueKey = "start_queue_ms"
