package builtin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

func TestAskHuman(t *testing.T) {
	e := executor(t, builtin.Options{})
	tool, ok := e.Registry.Get(builtin.AskHumanName)
	if !ok {
		t.Fatal("ask_human not registered")
	}
	for _, p := range []string{`"question"`, `"options"`, `"required":["question"]`} {
		if !strings.Contains(string(tool.Schema()), p) {
			t.Errorf("ask_human schema lacks %s: %s", p, tool.Schema())
		}
	}
	// The executor never answers it: a human does, through the session.
	if r := run(e, builtin.AskHumanName, `{"question":"ok?"}`); r.Err == nil || r.Err.Type != tools.ErrExecution || !strings.Contains(r.Err.Message, "answered by a human") {
		t.Fatalf("executed ask_human: %+v", r)
	}
	if r := run(e, builtin.AskHumanName, `{"options":["a"]}`); r.Err == nil || r.Err.Type != tools.ErrValidation {
		t.Fatalf("ask_human without a question: %+v", r)
	}
	cases := []struct{ args, wantErr string }{
		{`{"question":"  Ship it?  ","options":["yes","no"]}`, ""},
		{`{"question":""}`, "question is empty"},
		{`{"question":"q","options":["a","a"]}`, "offered twice"},
		{`{"question":"q","options":[" "]}`, "option 1 is empty"},
		{`{"question":"q","options":[` + strings.Repeat(`"x",`, 20) + `"y"]}`, "at most 20"},
		{`[1]`, "not a JSON object"},
	}
	for _, c := range cases {
		a, terr := builtin.ParseAskHuman(json.RawMessage(c.args))
		switch {
		case c.wantErr == "" && terr != nil:
			t.Errorf("%s: %v", c.args, terr)
		case c.wantErr == "" && (a.Question != "Ship it?" || len(a.Options) != 2):
			t.Errorf("%s: parsed %+v", c.args, a)
		case c.wantErr != "" && (terr == nil || !strings.Contains(terr.Message, c.wantErr) || terr.Type != tools.ErrValidation):
			t.Errorf("%s: error %v, want one containing %q", c.args, terr, c.wantErr)
		}
	}
}
