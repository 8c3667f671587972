// Package a2a serves Fathom's sessions over the Agent2Agent protocol (A2A v1.0, the
// JSON-RPC binding): an adapter over the gateway's seam (gateway.Handler's Mount, Do and
// Follow), so an A2A task is a session and its updates come from the session's
// journal-backed live feed.
//
// Mount adds two routes to a gateway:
//
//   - GET /.well-known/agent-card.json, public: the agent card (name, description,
//     version, capabilities.streaming, a skill per configured agent, the input and output
//     modes, the JSON-RPC interface and its protocol version, an HTTP bearer scheme).
//   - POST /a2a (Config.Path), behind the gateway's authentication: the JSON-RPC methods
//     SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask and
//     ListTasks (the caller's sessions from the session index, list.go), and on a node
//     with a webhook secret (Config.PushNotifications) the push-config methods (push.go:
//     a task's push configs are journaled in its session and pushed by its webhook
//     delivery).
//
// The mapping: a task's id (and context id) is the session id. A message without a task
// starts a session whose goal is the message's text; a message to a task waiting for a
// human (TASK_STATE_INPUT_REQUIRED) is the human's answer; a message to a completed task
// is a follow-up turn. Every journaled event of the session is one stream response (a
// status update whose metadata carries the event's seq and type, and for
// session_completed also the result as the "result" artifact); SSE frames carry the seq
// as their id, and SubscribeToTask honours Last-Event-ID, so a client that lost its
// stream (or whose node died) resumes from the journal with every event exactly once.
// A2A 0.3's methods (message/send, ...) are served too, translated (compat.go).
// docs/a2a.md is the reference.
package a2a
