package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fathom-agents/fathom/auth"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/messages"
)

// MaxGoalBytes bounds the goal of a session.
const MaxGoalBytes = 64 << 10

// MaxCommandIDBytes bounds a command id.
const MaxCommandIDBytes = 256

// stepTypes are the step types a plan may use; anything else becomes "custom".
var stepTypes = map[string]bool{"research": true, "code": true, "write": true, "review": true, "human_input": true, "custom": true}

// CommandError is a refused command: its reason maps to a grain error code.
type CommandError struct {
	// Reason is the refusal's reason; Msg says why, for the caller.
	Reason messages.ErrorReason
	Msg    string
}

// Error returns Msg.
func (e *CommandError) Error() string { return e.Msg }

func refuse(reason messages.ErrorReason, format string, args ...any) error {
	return &CommandError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// EventBuilder stamps events with consecutive sequence numbers after the state's.
type EventBuilder struct {
	s     *messages.SessionState
	cmdID string
	at    int64
	// Evs are the events built so far, in order.
	Evs []*messages.Event
	// proj is s with evs applied, kept up to date by add once state() made it.
	proj *messages.SessionState
	// projBroken is set when an event did not apply to proj: it is not s with evs applied.
	projBroken bool
	// tenantBudget is Config.TenantBudget of the decision (nil: none).
	tenantBudget func(tenant string, tokens uint64, cost float64) string
}

// state returns the state the decision has reached: s with the events added so far
// applied (a copy; s is never mutated). Decisions that depend on their own earlier events
// (which steps are ready after a step completed) read it. An event that does not apply
// leaves the projection where it stopped; commit refuses such a decision anyway.
func (b *EventBuilder) state() *messages.SessionState {
	if b.proj == nil {
		b.proj = CloneState(b.s)
		for _, ev := range b.Evs {
			if Apply(b.proj, ev) != nil {
				b.projBroken = true
				break
			}
		}
	}
	return b.proj
}

// NewEvents starts the events of one decision on s (never mutated): each event gets
// the next seq after s's and the time now; cmdID, when set, is the command they answer.
func NewEvents(s *messages.SessionState, cmdID string, now time.Time) *EventBuilder {
	return &EventBuilder{s: s, cmdID: cmdID, at: now.UnixNano()}
}

// newEvents is NewEvents for a decision under cfg: its LLM calls also ask the tenant's
// budgets (Config.TenantBudget).
func newEvents(s *messages.SessionState, cmdID string, now time.Time, cfg Config) *EventBuilder {
	b := NewEvents(s, cmdID, now)
	b.tenantBudget = cfg.TenantBudget
	return b
}

// Add appends one event, set filling its payload, and keeps the projection (state) up
// to date.
func (b *EventBuilder) Add(set func(*messages.Event)) {
	ev := &messages.Event{
		Seq:        b.s.GetSeq() + uint64(len(b.Evs)) + 1,
		SessionId:  b.s.GetSessionId(),
		AtUnixNano: b.at,
		CommandId:  b.cmdID,
	}
	set(ev)
	b.Evs = append(b.Evs, ev)
	if b.proj != nil && !b.projBroken && Apply(b.proj, ev) != nil {
		b.projBroken = true
	}
}

// final returns the state the decision's events lead to, when state() built it and
// every event applied; nil otherwise. The caller takes it over: the builder must not be
// used after.
func (b *EventBuilder) final() *messages.SessionState {
	if b.proj == nil || b.projBroken {
		return nil
	}
	return b.proj
}

// DecideStart validates a start command and returns the events it produces.
func DecideStart(s *messages.SessionState, req *messages.StartRequest, defaults Config, now time.Time) ([]*messages.Event, error) {
	if err := validateCommandID(req.GetCommandId()); err != nil {
		return nil, err
	}
	goal := strings.TrimSpace(req.GetGoal())
	switch {
	case goal == "":
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "goal is empty: a session needs a goal")
	case len(goal) > MaxGoalBytes:
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "goal is %d bytes, the limit is %d", len(goal), MaxGoalBytes)
	case !utf8.ValidString(goal):
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "goal is not valid UTF-8")
	}
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s is already started (status %s)", s.GetSessionId(), s.GetStatus())
	}
	if err := validBudget(req.GetConfig()); err != nil {
		return nil, err
	}
	if err := (Reasoning{Effort: req.GetConfig().GetReasoningEffort(), ThinkingBudget: int(req.GetConfig().GetThinkingBudget())}).Validate(); err != nil {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "config: %v", err)
	}
	cfg := mergeConfig(req.GetConfig(), defaults)
	if err := validWebhook(cfg.GetWebhookUrl(), defaults); err != nil {
		return nil, err
	}
	b := newEvents(s, req.GetCommandId(), now, defaults)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: goal, Config: cfg, UserId: req.GetUserId(),
			Tenant: tenantOf(req.GetCaller()), Owner: req.GetCaller().GetSubject()}}
	})
	if !callAllowed(b) { // the tenant's daily budget is used up: the session fails at once
		return b.Evs, nil
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
			CallId: planCallID(1), Purpose: PurposePlan, Model: cfg.GetModel(), Iteration: 1,
		}}
	})
	return b.Evs, nil
}

// tenantOf is the tenant a session started by caller belongs to: the caller's, or
// auth.DefaultTenant for a start from inside the node.
func tenantOf(caller *messages.Principal) string {
	if t := caller.GetTenant(); t != "" {
		return t
	}
	return auth.DefaultTenant
}

func validateCommandID(id string) error {
	switch {
	case id == "":
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "command_id is required (it makes retries safe)")
	case len(id) > MaxCommandIDBytes:
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "command_id is %d bytes, the limit is %d", len(id), MaxCommandIDBytes)
	}
	return nil
}

func mergeConfig(req *messages.SessionConfig, d Config) *messages.SessionConfig {
	cfg := &messages.SessionConfig{Model: d.Model, MaxIterations: d.MaxIterations, MaxSteps: d.MaxSteps,
		MaxLlmCalls: d.MaxLLMCalls, MaxCostUsd: d.MaxCostUSD, MaxTokens: d.MaxTokens,
		ReasoningEffort: d.Reasoning.Effort, ThinkingBudget: uint32(max(d.Reasoning.ThinkingBudget, 0)),
		// The endpoint is this node's, whatever the request says: it is where the calls go.
		Provider: d.Endpoint.Provider, BaseUrl: d.Endpoint.BaseURL}
	if req.GetModel() != "" {
		cfg.Model = req.GetModel()
	}
	if req.GetMaxIterations() > 0 {
		cfg.MaxIterations = req.GetMaxIterations()
	}
	if req.GetMaxSteps() > 0 {
		cfg.MaxSteps = req.GetMaxSteps()
	}
	if req.GetMaxLlmCalls() > 0 {
		cfg.MaxLlmCalls = req.GetMaxLlmCalls()
	}
	if req.GetMaxCostUsd() > 0 {
		cfg.MaxCostUsd = req.GetMaxCostUsd()
	}
	if req.GetMaxTokens() > 0 {
		cfg.MaxTokens = req.GetMaxTokens()
	}
	if req.GetReasoningEffort() != "" {
		cfg.ReasoningEffort = req.GetReasoningEffort()
	}
	if req.GetThinkingBudget() > 0 {
		cfg.ThinkingBudget = req.GetThinkingBudget()
	}
	cfg.WebhookUrl = d.WebhookURL
	if req.GetWebhookUrl() != "" {
		cfg.WebhookUrl = req.GetWebhookUrl()
	}
	return cfg
}

func planSteps(s *messages.SessionState) []*messages.PlanStep {
	out := make([]*messages.PlanStep, len(s.GetSteps()))
	for i, st := range s.GetSteps() {
		out[i] = st.GetStep()
	}
	return out
}

// errEmptyPlan is returned for a plan without steps.
var errEmptyPlan = errors.New("plan has no steps")

// parsePlan extracts the JSON plan from the planner's answer. It tolerates prose or code
// fences around the object, fills missing ids and maps unknown types to "custom".
func parsePlan(content string, maxSteps uint32) ([]*messages.PlanStep, error) {
	return parseSteps(content, maxSteps, nil, nil)
}

// parsePlanFor is parsePlan with agents' step types: with agents of the node's own, a
// type that names no agent is refused (Agents.strictTypes).
func parsePlanFor(agents *Agents, content string, maxSteps uint32) ([]*messages.PlanStep, error) {
	return parseSteps(content, maxSteps, nil, agents)
}

// planRules are what the steps of a revised plan are checked against besides
// parsePlan's rules (nil for the first plan).
type planRules struct {
	// taken are the ids a new step may not use, each with what it names.
	taken map[string]string
	// dependable are the kept steps a new step may depend on (completed or running).
	dependable map[string]bool
	// kept is the number of steps the revision keeps: max_steps counts them too.
	kept int
}

// parseSteps is parsePlan for a first plan (rules nil) or a revision's new steps, with
// the step types of agents (nil: the built-in agents).
func parseSteps(content string, maxSteps uint32, rules *planRules, agents *Agents) ([]*messages.PlanStep, error) {
	if agents == nil {
		agents = builtinRegistry
	}
	start, end := strings.Index(content, "{"), strings.LastIndex(content, "}")
	if start < 0 || end < start {
		return nil, errors.New("no JSON object in the answer")
	}
	var raw struct {
		Steps []struct {
			ID           string    `json:"id"`
			Type         string    `json:"type"`
			Description  string    `json:"description"`
			Dependencies *[]string `json:"dependencies"`
			// Human-in-the-loop fields (see planStepHITL).
			Interrupt          string          `json:"interrupt"`
			InterruptTimeoutMS int64           `json:"interrupt_timeout_ms"`
			DefaultAction      string          `json:"default_action"`
			InputSchema        json.RawMessage `json:"input_schema"`
			// SubAgentID continues an earlier sub-agent's context (see planSubAgent).
			SubAgentID string `json:"sub_agent_id"`
		} `json:"steps"`
	}
	if err := checkPlanSchema(content[start : end+1]); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(content[start:end+1]), &raw); err != nil {
		return nil, fmt.Errorf("decode plan JSON: %w", err)
	}
	if len(raw.Steps) == 0 {
		return nil, errEmptyPlan
	}
	switch {
	case maxSteps > 0 && rules == nil && len(raw.Steps) > int(maxSteps):
		return nil, fmt.Errorf("plan has %d steps, the limit is %d", len(raw.Steps), maxSteps)
	case maxSteps > 0 && rules != nil && rules.kept+len(raw.Steps) > int(maxSteps):
		return nil, fmt.Errorf("plan has %d new steps and %d kept ones, more than max_steps %d", len(raw.Steps), rules.kept, maxSteps)
	}
	seen := map[string]bool{}
	steps := make([]*messages.PlanStep, 0, len(raw.Steps))
	for i, r := range raw.Steps {
		id := strings.TrimSpace(r.ID)
		if what, ok := rules.isTaken(id); ok {
			return nil, fmt.Errorf("step id %q is taken: it names %s; new steps need new ids", id, what)
		}
		if id == "" || seen[id] {
			id = rules.fillID(i+1, seen)
		}
		if seen[id] {
			return nil, fmt.Errorf("duplicate step id %q", id)
		}
		seen[id] = true
		desc := strings.TrimSpace(r.Description)
		if desc == "" {
			return nil, fmt.Errorf("step %s has no description", id)
		}
		typ, known := agents.stepType(r.Type)
		switch {
		case !known && agents.strictTypes():
			return nil, fmt.Errorf("step %s: type %q names no agent (step types: %s)", id, r.Type, strings.Join(agents.StepTypes(), ", "))
		case !known:
			typ = "custom"
		}
		// A step without a dependencies field follows the previous one (a sequential
		// plan); an explicit list, even empty, is taken as given.
		var deps []string
		if r.Dependencies != nil {
			deps = *r.Dependencies
		} else if i > 0 {
			deps = []string{steps[i-1].GetId()}
		}
		step := &messages.PlanStep{Id: id, Type: typ, Description: desc, Dependencies: deps,
			Interrupt: r.Interrupt, InterruptTimeoutMs: r.InterruptTimeoutMS, DefaultAction: r.DefaultAction}
		if err := planStepHITL(step, r.InputSchema); err != nil {
			return nil, fmt.Errorf("step %s: %w", id, err)
		}
		if err := planSubAgent(step, r.SubAgentID); err != nil {
			return nil, fmt.Errorf("step %s: %w", id, err)
		}
		steps = append(steps, step)
	}
	if err := checkDependencies(steps, rules); err != nil {
		return nil, err
	}
	return steps, nil
}

// isTaken reports whether a new step may not use id, and what id names.
func (r *planRules) isTaken(id string) (string, bool) {
	if r == nil || id == "" {
		return "", false
	}
	what, ok := r.taken[id]
	return what, ok
}

// fillID is the id of the n-th step when the planner gave none (or a duplicate):
// "step-n", or for a revision the first "step-k" (k >= n) no step uses.
func (r *planRules) fillID(n int, seen map[string]bool) string {
	id := fmt.Sprintf("step-%d", n)
	for k := n + 1; r != nil; k++ {
		if _, taken := r.taken[id]; !taken && !seen[id] {
			break
		}
		id = fmt.Sprintf("step-%d", k)
	}
	return id
}

// checkDependencies refuses a plan whose dependencies name unknown steps, a step itself,
// or form a cycle (the plan could never finish). Duplicates are dropped. A revision's
// steps (rules set) may also depend on the kept steps that completed or are running.
func checkDependencies(steps []*messages.PlanStep, rules *planRules) error {
	index := make(map[string]int, len(steps))
	for i, st := range steps {
		index[st.GetId()] = i
	}
	for _, st := range steps {
		seen := map[string]bool{}
		deps := st.Dependencies[:0]
		for _, d := range st.GetDependencies() {
			d = strings.TrimSpace(d)
			_, ok := index[d]
			what, exists := rules.isTaken(d)
			switch {
			case d == st.GetId():
				return fmt.Errorf("step %s depends on itself", st.GetId())
			case !ok && rules != nil && rules.dependable[d]:
				// A kept step: done or running, never waiting for a new one.
			case !ok && exists:
				return fmt.Errorf("step %s depends on %q, %s, which it can never wait for", st.GetId(), d, what)
			case !ok:
				return fmt.Errorf("step %s depends on unknown step %q", st.GetId(), d)
			case seen[d]:
				continue
			}
			seen[d] = true
			deps = append(deps, d)
		}
		st.Dependencies = deps
	}
	// Kahn's algorithm: every step must become ready at some point.
	indeg := make([]int, len(steps))
	next := make([][]int, len(steps))
	for i, st := range steps {
		for _, d := range st.GetDependencies() {
			j, ok := index[d]
			if !ok {
				continue // a kept step
			}
			indeg[i]++
			next[j] = append(next[j], i)
		}
	}
	var queue []int
	for i, n := range indeg {
		if n == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		done++
		for _, j := range next[i] {
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if done != len(steps) {
		return errors.New("plan dependencies form a cycle")
	}
	return nil
}

// planStepHITL checks a plan step's human-in-the-loop fields and sets its input schema
// (a JSON object, or a JSON string holding one) as text.
func planStepHITL(step *messages.PlanStep, schema json.RawMessage) error {
	step.Interrupt = strings.ToLower(strings.TrimSpace(step.Interrupt))
	step.DefaultAction = strings.ToLower(strings.TrimSpace(step.DefaultAction))
	switch {
	case step.Interrupt == "none":
		step.Interrupt = ""
	case step.Interrupt != "" && step.Interrupt != positionBefore && step.Interrupt != positionAfter:
		return fmt.Errorf("interrupt must be none, before or after, not %q", step.Interrupt)
	}
	switch {
	case step.DefaultAction != "" && step.DefaultAction != actionContinue && step.DefaultAction != actionFail:
		return fmt.Errorf("default_action must be continue or fail, not %q", step.DefaultAction)
	case step.InterruptTimeoutMs < 0:
		return errors.New("interrupt_timeout_ms must not be negative")
	}
	text := strings.TrimSpace(string(schema))
	if text == "" || text == "null" {
		return nil
	}
	var quoted string
	if json.Unmarshal(schema, &quoted) == nil {
		text = quoted
	}
	if _, err := compileInputSchema(text); err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return fmt.Errorf("input_schema: %w", err)
	}
	step.InputSchema = buf.String()
	return nil
}

// MaxSubAgentIDBytes bounds a plan step's sub_agent_id.
const MaxSubAgentIDBytes = 128

// planSubAgent sets a plan step's sub_agent_id: the earlier sub-agent whose resumable
// context the step continues ("researcher-1" is the first researcher of the session).
// Only a delegated step (research, code, write, review) runs in a sub-agent. A name no
// sub-agent of the step's agent type has when the step starts gets a fresh sub-agent
// (pickSubAgent).
func planSubAgent(step *messages.PlanStep, id string) error {
	id = strings.TrimSpace(id)
	switch {
	case id == "":
		return nil
	case !delegated(step):
		return fmt.Errorf("sub_agent_id %q: a %s step does not run in a sub-agent (research, code, write and review steps do)", id, step.GetType())
	case len(id) > MaxSubAgentIDBytes || !utf8.ValidString(id):
		return fmt.Errorf("sub_agent_id is not a sub-agent id (at most %d bytes of UTF-8)", MaxSubAgentIDBytes)
	}
	step.SubAgentId = id
	return nil
}
