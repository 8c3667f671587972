package session_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session/core"
)

// sentRequest is one chat request the scripted model received, decoded.
type sentRequest struct {
	System         string
	Messages       []map[string]any
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	ReasoningEffort string
}

// sentRequests decodes the chat requests h's model received whose system prompt
// contains marker, oldest first.
func sentRequests(t *testing.T, h *harness, marker string) []sentRequest {
	t.Helper()
	var out []sentRequest
	for _, r := range h.model.Recorded() {
		var body struct {
			Messages        []map[string]any `json:"messages"`
			ResponseFormat  json.RawMessage  `json:"response_format"`
			ReasoningEffort string           `json:"reasoning_effort"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("recorded request %s: %v", r.Path, err)
		}
		sr := sentRequest{Messages: body.Messages, ReasoningEffort: body.ReasoningEffort}
		for _, m := range body.Messages {
			if m["role"] == "system" {
				s, _ := m["content"].(string)
				sr.System += s
			}
		}
		if !strings.Contains(sr.System, marker) {
			continue
		}
		if len(body.ResponseFormat) > 0 {
			if err := json.Unmarshal(body.ResponseFormat, &sr.ResponseFormat); err != nil {
				t.Fatalf("response_format %s: %v", body.ResponseFormat, err)
			}
		}
		out = append(out, sr)
	}
	return out
}

// schemaRequires reports whether schema (a JSON Schema object) requires property.
func schemaRequires(t *testing.T, schema json.RawMessage, property string) bool {
	t.Helper()
	var s struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	for _, r := range s.Required {
		if r == property {
			return true
		}
	}
	return false
}

// TestStructuredCallsCarryTheirSchema: the plan call and every sub-agent call send
// their JSON Schema as response_format (json_schema "plan" requiring steps, "handoff"
// requiring status and summary); the closing summary sends none.
func TestStructuredCallsCarryTheirSchema(t *testing.T) {
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"find the facts in the archive"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","response":`+quote(`{"status":"completed","summary":"found in the archive"}`)+`}`,
		`{"system_match":"FATHOM-PHASE: synthesize","response":"Closing."}`,
	)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "s1", 20*time.Second))

	plans := sentRequests(t, h, "FATHOM-PHASE: plan")
	if len(plans) != 1 || plans[0].ResponseFormat == nil || plans[0].ResponseFormat.Type != "json_schema" ||
		plans[0].ResponseFormat.JSONSchema.Name != core.PlanSchemaName || !schemaRequires(t, plans[0].ResponseFormat.JSONSchema.Schema, "steps") {
		t.Fatalf("plan requests %+v: want one with response_format json_schema %q requiring steps", plans, core.PlanSchemaName)
	}
	hand := sentRequests(t, h, "FATHOM-ROLE: researcher")
	if len(hand) == 0 {
		t.Fatal("no researcher request recorded")
	}
	for _, r := range hand {
		if r.ResponseFormat == nil || r.ResponseFormat.JSONSchema.Name != core.HandoffSchemaName ||
			!schemaRequires(t, r.ResponseFormat.JSONSchema.Schema, "status") || !schemaRequires(t, r.ResponseFormat.JSONSchema.Schema, "summary") {
			t.Fatalf("researcher request response_format %+v: want json_schema %q requiring status and summary", r.ResponseFormat, core.HandoffSchemaName)
		}
	}
	syn := sentRequests(t, h, "FATHOM-PHASE: synthesize")
	if len(syn) != 1 || syn[0].ResponseFormat != nil {
		t.Fatalf("synthesize requests %+v: want one without response_format", syn)
	}
}

// TestSchemaFailingPlanIsRepromptedOnce: a plan whose step has no description fails the
// plan schema; the planner is asked again once (the re-prompt is an LLM call with the
// schema, its answer and the validation error) and the session goes on with the second
// answer. Failing twice fails the session, naming both validation errors.
func TestSchemaFailingPlanIsRepromptedOnce(t *testing.T) {
	const bad = `{"steps":[{"id":"a","type":"custom","summary":"do it"}]}`
	const wantErr = "plan does not match its schema: /steps/0: missing property 'description'"
	sc := rules(t,
		`{"system_match":"FATHOM-PHASE: plan","context_match":"cannot be used as a plan: `+wantErr+`","response":`+
			quote(`{"steps":[{"id":"a","type":"custom","description":"do it"}]}`)+`}`,
		`{"system_match":"FATHOM-PHASE: plan","response":`+quote(bad)+`}`,
		`{"system_match":"FATHOM-ROLE: executor","response":"done"}`,
	)
	h := startHarness(t, harnessOpts{script: sc})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	mustComplete(t, evs)
	if got := strings.Join(eventTypes(evs[:7]), ","); got != "session_started,llm_requested,llm_responded,plan_failed,llm_requested,llm_responded,plan_created" {
		t.Fatalf("events %s", got)
	}
	if f := evs[3].GetPlanFailed(); f.GetError() != "unusable plan: "+wantErr {
		t.Fatalf("plan_failed %q, want the schema's validation error", f.GetError())
	}
	if r := evs[4].GetLlmRequested(); r.GetCallId() != "plan-2" || r.GetRepromptError() != wantErr || r.GetRepromptAnswer() != bad {
		t.Fatalf("re-prompt %v", r)
	}
	plans := sentRequests(t, h, "FATHOM-PHASE: plan")
	if len(plans) != 2 {
		t.Fatalf("%d plan requests, want 2", len(plans))
	}
	for i, p := range plans {
		if p.ResponseFormat == nil || p.ResponseFormat.JSONSchema.Name != core.PlanSchemaName {
			t.Fatalf("plan request %d without the plan schema: %+v", i+1, p.ResponseFormat)
		}
	}
	last, _ := plans[1].Messages[len(plans[1].Messages)-1]["content"].(string)
	if !strings.Contains(last, wantErr) {
		t.Fatalf("the re-prompt does not show the validation error: %q", last)
	}

	stopNode(t, h)
	h2 := startHarness(t, harnessOpts{script: rules(t, `{"system_match":"FATHOM-PHASE: plan","response":`+quote(bad)+`}`)})
	if _, err := h2.start("s2", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs = waitTerminal(t, h2.j, "s2", 20*time.Second)
	f := evs[len(evs)-1].GetSessionFailed()
	want := "planner returned an unusable plan: " + wantErr + " (it was asked again once, with the error of its first answer: " + wantErr + ")"
	if f == nil || f.GetError() != want || count(evs, "llm_requested") != 2 || count(evs, "plan_failed") != 1 {
		t.Fatalf("failing twice: last event %v, want session_failed %q after 2 plan calls", evs[len(evs)-1], want)
	}
}
