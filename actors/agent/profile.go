package agent

import "github.com/fathom-agents/fathom/actors/session/core"

// DefaultMaxIterations bounds a sub-agent run's LLM calls when the node sets no bound
// (core.DefaultMaxIterations; the profiles and hand-offs are the session core's).
const DefaultMaxIterations = core.DefaultMaxIterations
