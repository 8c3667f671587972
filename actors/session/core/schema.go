package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// Structured outputs. The planner's and re-planner's answers and every sub-agent's
// hand-off are JSON objects; their calls send the object's JSON Schema
// (llm.Request.ResponseFormat: OpenAI response_format json_schema, Anthropic a forced
// tool), so a model that supports it answers with exactly that. Servers without the
// feature ignore it and the tolerant parsers (parsePlan, ParseHandoff) read the object
// out of free text as before. A plan answer is checked against PlanSchema before it is
// used: one that does not match is re-prompted once with the validation error
// (unusablePlan), then fails the session.

// PlanSchemaName and HandoffSchemaName name the schemas to the model.
const (
	PlanSchemaName    = "plan"
	HandoffSchemaName = "handoff"
)

// planSchema is the JSON Schema of a plan or revision answer. It is not strict: ids
// and dependencies may be left out or null (filled in by parseSteps, as a missing
// field), an unknown step type becomes "custom", and a step's input_schema is any JSON
// Schema.
const planSchema = `{
  "type": "object",
  "properties": {
    "steps": {
      "type": "array",
      "description": "The plan's steps, in order (at least one).",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": ["string", "null"], "description": "Unique step id, e.g. step-1."},
          "type": {"type": ["string", "null"], "description": "research, code, write, review, human_input or custom."},
          "description": {"type": "string", "minLength": 1, "description": "What the step does."},
          "dependencies": {"type": ["array", "null"], "items": {"type": "string"}, "description": "Ids of the steps that must complete first; omitted: the previous step."},
          "interrupt": {"type": ["string", "null"], "description": "none, before or after: pause the session for a human there."},
          "interrupt_timeout_ms": {"type": ["integer", "null"], "description": "How long the interrupt waits (ms, not negative)."},
          "default_action": {"type": ["string", "null"], "description": "continue or fail, when the interrupt times out."},
          "input_schema": {"type": ["object", "string", "null"]},
          "sub_agent_id": {"type": ["string", "null"], "description": "An earlier sub-agent whose context the step continues."}
        },
        "required": ["description"]
      }
    }
  },
  "required": ["steps"]
}`

// handoffSchema is the JSON Schema of a sub-agent's hand-off, with the type-specific
// fields of every agent type (ParseHandoff reads those of the agent's type).
const handoffSchema = `{
  "type": "object",
  "properties": {
    "status": {"type": "string", "enum": ["completed", "partial", "blocked", "failed"]},
    "summary": {"type": "string", "description": "What was done and found, for the orchestrator."},
    "recommendations": {"type": "array", "items": {"type": "string"}},
    "blockers": {"type": "array", "items": {"type": "string"}},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "sources": {"type": "array", "items": {"type": "string"}},
    "key_findings": {"type": "array", "items": {"type": "string"}},
    "knowledge_gaps": {"type": "array", "items": {"type": "string"}},
    "files_created": {"type": "array", "items": {"type": "string"}},
    "tests_status": {"type": "string"},
    "impl_notes": {"type": "string"},
    "document_type": {"type": "string"},
    "word_count": {"type": "integer", "minimum": 0},
    "sections": {"type": "array", "items": {"type": "string"}},
    "verdict": {"type": "string"},
    "issues": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["status", "summary"]
}`

// PlanSchema is the response format of plan and re-plan calls.
func PlanSchema() *llm.JSONSchema {
	return &llm.JSONSchema{Name: PlanSchemaName, Description: "The plan: its steps as one JSON object.", Schema: json.RawMessage(planSchema)}
}

// HandoffSchema is the response format of sub-agent calls: the final answer is the
// hand-off object (a turn that calls tools is unaffected).
func HandoffSchema() *llm.JSONSchema {
	return &llm.JSONSchema{Name: HandoffSchemaName, Description: "Your final hand-off to the orchestrator, once your work is done.", Schema: json.RawMessage(handoffSchema)}
}

// compiledPlanSchema is planSchema compiled once.
var compiledPlanSchema = sync.OnceValues(func() (*jsv.Schema, error) { return compileInputSchema(planSchema) })

// checkPlanSchema validates a plan object's JSON text against PlanSchema.
func checkPlanSchema(text string) error {
	sch, err := compiledPlanSchema()
	if err != nil {
		return fmt.Errorf("compile plan schema: %w", err)
	}
	inst, err := jsv.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("decode plan JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("plan does not match its schema: %s", tools.DescribeSchemaError(err))
	}
	return nil
}

// SetCallOptions sets what the pending call callID of s asks besides its messages: the
// response format of plan, re-plan and sub-agent calls, and the reasoning of the agent
// making it.
func SetCallOptions(req *llm.Request, s *messages.SessionState, callID string, cfg Config) {
	agent := ""
	if sa := SubAgentByCall(s, callID); sa != nil {
		agent = sa.GetAgentType()
		req.ResponseFormat = HandoffSchema()
	} else {
		switch s.GetPending().GetPurpose() {
		case PurposePlan, PurposeReplan:
			req.ResponseFormat = PlanSchema()
		}
	}
	r := cfg.ReasoningFor(s, agent)
	req.ReasoningEffort, req.ThinkingBudget = r.Effort, r.ThinkingBudget
}
