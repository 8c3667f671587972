package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fathom-agents/fathom/tools"
)

// AskHumanName is the name of the ask_human tool.
const AskHumanName = "ask_human"

// Bounds of ask_human's arguments (the schema's; checked again by ParseAskHuman).
const (
	// MaxQuestionBytes bounds the question.
	MaxQuestionBytes = 4000
	// MaxAskOptions bounds the offered answers.
	MaxAskOptions = 20
)

// AskHumanArgs are ask_human's arguments.
type AskHumanArgs struct {
	// Question is what the model asks the human.
	Question string `json:"question" jsonschema:"minLength=1,maxLength=4000" jsonschema_description:"The question for the human: self-contained, with the context they need to answer."`
	// Options, when set, are the only answers the human may give.
	Options []string `json:"options,omitempty" jsonschema:"maxItems=20" jsonschema_description:"Optional: the answers to choose from. When given, the human must answer with exactly one of them."`
}

// AskHuman returns the ask_human tool: the model asks a human a question and gets the
// answer as the tool's result. The session answers it, never the executor: the call's
// tool_called is followed by a hitl_requested, the session waits in awaiting_human, and
// the human's input (or the request's timeout) becomes the call's tool_result. Executed
// outside a session it fails with a clear error.
func AskHuman() tools.Tool {
	return tools.MustNew(AskHumanName,
		"Ask a human a question and wait for the answer. Use it when you need a decision, an approval or "+
			"information only a person can give; do not use it for things you can find out yourself. "+
			"Offer options when the answer is a choice. The answer comes back as this tool's result.",
		tools.SandboxNone, func(_ context.Context, a AskHumanArgs) (any, error) {
			if _, err := checkAskHuman(a); err != nil {
				return nil, err
			}
			return nil, tools.ExecutionError(AskHumanName, "ask_human is answered by a human through the session; it cannot run here", false)
		})
}

// ParseAskHuman decodes and checks an ask_human arguments payload, as recorded in a
// tool_called event. Errors are validation ToolErrors the model can act on.
func ParseAskHuman(args json.RawMessage) (AskHumanArgs, *tools.ToolError) {
	var a AskHumanArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return a, tools.ValidationError(AskHumanName, "arguments are not a JSON object {question, options}: "+err.Error(), tools.Field{Key: "params", Value: string(args)})
	}
	return checkAskHuman(a)
}

func checkAskHuman(a AskHumanArgs) (AskHumanArgs, *tools.ToolError) {
	a.Question = strings.TrimSpace(a.Question)
	switch {
	case a.Question == "":
		return a, tools.ValidationError(AskHumanName, "question is empty: say what you want the human to answer")
	case len(a.Question) > MaxQuestionBytes:
		return a, tools.ValidationError(AskHumanName, fmt.Sprintf("question is %d bytes; keep it under %d", len(a.Question), MaxQuestionBytes))
	case len(a.Options) > MaxAskOptions:
		return a, tools.ValidationError(AskHumanName, fmt.Sprintf("%d options; offer at most %d", len(a.Options), MaxAskOptions))
	}
	seen := map[string]bool{}
	for i, o := range a.Options {
		if strings.TrimSpace(o) == "" {
			return a, tools.ValidationError(AskHumanName, fmt.Sprintf("option %d is empty", i+1))
		}
		if seen[o] {
			return a, tools.ValidationError(AskHumanName, fmt.Sprintf("option %q is offered twice", o))
		}
		seen[o] = true
	}
	return a, nil
}
