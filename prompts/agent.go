package prompts

// AgentData is the data of the sub-agent templates (researcher, coder, writer,
// reviewer).
type AgentData struct {
	// AgentType is researcher | coder | writer | reviewer.
	AgentType string
	// Goal is the session's goal.
	Goal string
	// Tools are the names of the tools the agent may call.
	Tools []string
	// Workspace is the session's artifact prefix ("{session_id}/").
	Workspace string
	// StepID and StepDescription name the plan step the agent works on.
	StepID, StepDescription string
}
