// Package builtin holds the tools every Fathom session gets:
//
//   - write_todos: the plan/todo list of deep agents. The model sends the whole list
//     each time (replacement semantics); the session's events keep every version.
//   - web_search: web search through a SearchProvider; SearXNG (self-hostable, JSON
//     API) is the adapter shipped here, configured with FATHOM_SEARXNG_URL.
//   - code_execute: runs code in the external sandbox (sandbox mode "external"); the
//     executor routes it to the sandbox pool and never runs it in-process.
//   - write_artifact, read_artifact, list_artifacts: the session's workspace of files
//     (persistence/artifact), when a store is configured. A call works in the calling
//     session's workspace only; each write is reported with tools.RecordArtifact, which
//     the session records as an artifact_written event.
//   - ask_human: the model asks a person (question, options). The session answers it
//     with the human's input (hitl_requested, hitl_received); the executor never runs it.
//   - remember, recall, forget: the long-term memory of the session's user
//     (persistence/ltm), when the node has it (MemoryTools). Each write is reported with
//     tools.RecordMemory, which the session records as memory_saved or memory_deleted.
//
// Registry builds a tools.Registry with them.
package builtin
