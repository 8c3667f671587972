package session

import (
	"context"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// admitTimeout bounds the quota check of a start (it may read the session index).
const admitTimeout = 3 * time.Second

// admitStart asks the node's quotas q whether the session evs start (session_started, or
// a fork's session_forked) may run: a tenant running its max_running_sessions is
// refused with RESOURCE_EXHAUSTED and a retry delay, and, when the tenant has a
// start_queue_timeout, how long the caller may keep retrying (messages.StartQueueKey).
func admitStart(q Quotas, st *messages.SessionState, evs []*messages.Event) error {
	if q == nil {
		return nil
	}
	tenant := ""
	for _, ev := range evs {
		if s := ev.GetSessionStarted(); s != nil {
			tenant = s.GetTenant()
		}
		if f := ev.GetSessionForked(); f != nil && f.GetTenant() != "" {
			tenant = f.GetTenant()
		}
	}
	if tenant == "" {
		tenant = st.GetTenant()
	}
	ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
	defer cancel()
	refusal, after := q.AdmitStart(ctx, tenant)
	if refusal == "" {
		return nil
	}
	e := ErrResourceExhausted(refusal, after)
	if q := q.StartQueue(tenant); q > 0 {
		if e.Metadata == nil {
			e.Metadata = map[string]string{}
		}
		e.Metadata[messages.StartQueueKey] = strconv.FormatInt(q.Milliseconds(), 10)
	}
	return e
}

// ErrResourceExhausted is the grain error of a refusal by a tenant's quota: reason
// RESOURCE_EXHAUSTED, msg, and the seconds to wait under messages.RetryAfterKey.
func ErrResourceExhausted(msg string, retryAfter time.Duration) *cluster.GrainErrorResponse {
	e := sessiongrain.ErrResourceExhausted("%s", msg)
	if secs := int64((retryAfter + time.Second - 1) / time.Second); secs > 0 {
		e.Metadata = map[string]string{messages.RetryAfterKey: strconv.FormatInt(secs, 10)}
	}
	return e
}
