package messages

// RetryAfterKey is the metadata key of a RESOURCE_EXHAUSTED grain error
// (cluster.GrainErrorResponse.Metadata) holding how many seconds the caller should wait
// before it retries: the gateway's Retry-After header.
const RetryAfterKey = "retry_after_seconds"
