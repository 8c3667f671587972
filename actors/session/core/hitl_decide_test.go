package core

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

func TestParsePlanHumanFields(t *testing.T) {
	ok := `{"steps":[{"id":"a","type":"human_input","description":"q","input_schema":{"type":"integer"},"interrupt":"None"},` +
		`{"id":"b","type":"research","description":"r","interrupt":"after","interrupt_timeout_ms":5,"default_action":"FAIL","input_schema":"{\"type\": \"string\"}"}]}`
	steps, err := parsePlan(ok, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := steps[0], steps[1]; a.GetInputSchema() != `{"type":"integer"}` || a.GetInterrupt() != "" ||
		b.GetInterrupt() != "after" || b.GetInterruptTimeoutMs() != 5 || b.GetDefaultAction() != "fail" || b.GetInputSchema() != `{"type":"string"}` {
		t.Fatalf("steps %v", steps)
	}
	for _, c := range []struct{ step, want string }{
		{`"interrupt":"during"`, "interrupt must be"},
		{`"default_action":"explode"`, "default_action must be"},
		{`"interrupt_timeout_ms":-1`, "must not be negative"},
		{`"input_schema":{"type":"nope"}`, "input_schema"},
		{`"input_schema":{"$ref":"file:///etc/passwd"}`, "input_schema"}, // nothing is loaded
	} {
		_, err := parsePlan(`{"steps":[{"id":"a","type":"human_input","description":"q",`+c.step+`}]}`, 10)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.step, err, c.want)
		}
	}
}

func TestCheckInput(t *testing.T) {
	r := &messages.HitlRequested{RequestId: "r", InputSchema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`}
	if in, err := checkInput(r, " {\"n\": 1} "); err != nil || in != `{"n":1}` {
		t.Fatalf("good input: %q, %v", in, err)
	}
	for _, bad := range []string{`{"n":"x"}`, `{}`, `hello`, "\xff"} {
		if _, err := checkInput(r, bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
	free := &messages.HitlRequested{RequestId: "r"}
	for in, want := range map[string]string{`hello there`: `"hello there"`, `"quoted"`: `"quoted"`, `[1, 2]`: `[1,2]`, ``: `""`, `true`: `true`} {
		if got, err := checkInput(free, in); err != nil || got != want {
			t.Errorf("%q → %q, %v; want %q", in, got, err, want)
		}
	}
	opts := &messages.HitlRequested{RequestId: "r", Options: []string{"yes", "no"}}
	if _, err := checkInput(opts, "yes"); err != nil {
		t.Fatal(err)
	}
	if _, err := checkInput(opts, `{"yes":1}`); err == nil {
		t.Fatal("a non-option was accepted")
	}
	if _, err := checkInput(free, strings.Repeat("x", MaxInputBytes+1)); err == nil {
		t.Fatal("an oversize answer was accepted")
	}
}
