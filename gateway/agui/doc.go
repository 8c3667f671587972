// Package agui serves the AG-UI protocol (1.0, https://docs.ag-ui.com) on the gateway:
// POST /v1/agui takes a RunAgentInput and answers the run's AG-UI events as server-sent
// events. It is an adapter over the gateway's seam (gateway.Handler's Mount, Do and
// Follow): the principal's sessions, operations and journal-backed live feed, nothing
// of its own.
//
// A thread is a session: the thread id of a principal's tenant maps to one session id
// ("agui-" and a hash of the tenant and the thread id), so another tenant's thread is
// an unknown one. The first run on a thread starts the session with the last user
// message as its goal; a later run sends that message as a follow-up turn. A run that
// reaches a human-input request or an approval ends with RUN_FINISHED's interrupt
// outcome, one interrupt per open request (its id is the request id); the next run's
// resume answers them. The run's events come from the session's journal and its token
// deltas: RUN_STARTED, STATE_SNAPSHOT / STATE_DELTA of the plan, STEP_STARTED /
// STEP_FINISHED per plan step, TEXT_MESSAGE_START / CONTENT / END with the model's
// text, TOOL_CALL_START / ARGS / END / RESULT, then RUN_FINISHED or RUN_ERROR. Posting
// the same RunAgentInput again (same runId) replays that run from the journal and
// follows it live to its end; with the last SSE id the client received as Last-Event-ID
// (a Position) it resumes right after that event, so no event comes twice.
// docs/agui.md is the reference.
package agui
