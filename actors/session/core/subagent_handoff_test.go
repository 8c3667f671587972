package core

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

func TestParseHandoff(t *testing.T) {
	cases := []struct {
		name, agent, in string
		check           func(*messages.SubagentResult) bool
	}{
		{"fenced", Researcher, "I looked.\n```json\n{\"status\":\"completed\",\"summary\":\"found\",\"key_findings\":[\"a\",\"b\"],\"sources\":\"one\",\"confidence\":0.7}\n```",
			func(r *messages.SubagentResult) bool {
				return r.Status == "completed" && r.Summary == "found" && len(r.GetResearcher().GetKeyFindings()) == 2 &&
					r.GetResearcher().GetSources()[0] == "one" && r.Confidence == 0.7 && r.ParseError == ""
			}},
		{"bare object", Coder, `{"status":"partial","summary":"half","tests_status":"failing","files_created":["x.go"]}`,
			func(r *messages.SubagentResult) bool {
				return r.Status == "partial" && r.GetCoder().GetTestsStatus() == "failing" && r.GetCoder().GetFilesCreated()[0] == "x.go"
			}},
		{"prose only", Writer, "I wrote the draft.",
			func(r *messages.SubagentResult) bool {
				return r.Status == "partial" && r.Summary == "I wrote the draft." && strings.Contains(r.ParseError, "no JSON")
			}},
		{"malformed JSON", Writer, "```json\n{\"status\": \"completed\", \"summary\": \n```",
			func(r *messages.SubagentResult) bool { return r.Status == "partial" && r.ParseError != "" }},
		{"unknown status", Reviewer, `{"status":"great","summary":"ok","verdict":"APPROVE","issues":["typo"]}`,
			func(r *messages.SubagentResult) bool {
				return r.Status == "partial" && strings.Contains(r.ParseError, "great") && r.GetReviewer().GetVerdict() == "approve"
			}},
		{"percent confidence", Writer, `{"status":"completed","summary":"s","confidence":"85%","word_count":"120"}`,
			func(r *messages.SubagentResult) bool {
				return r.Confidence == 0.85 && r.GetWriter().GetWordCount() == 120
			}},
		{"confidence out of range", Writer, `{"status":"blocked","summary":"s","confidence":250,"blockers":["no access"]}`,
			func(r *messages.SubagentResult) bool {
				return r.Confidence == 1 && r.Status == "blocked" && r.Blockers[0] == "no access"
			}},
		{"summary from prose", Researcher, "Everything checks out.\n```json\n{\"status\":\"completed\"}\n```",
			func(r *messages.SubagentResult) bool { return r.Summary == "Everything checks out." }},
		{"empty", Researcher, "  ",
			func(r *messages.SubagentResult) bool {
				return r.Status == "partial" && strings.Contains(r.ParseError, "empty")
			}},
		{"last fence wins", Researcher, "```json\n{\"status\":\"failed\"}\n```\nthen\n```json\n{\"status\":\"completed\",\"summary\":\"final\"}\n```",
			func(r *messages.SubagentResult) bool { return r.Status == "completed" && r.Summary == "final" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := ParseHandoff(c.agent, c.in); !c.check(r) {
				t.Fatalf("ParseHandoff(%q) = %v", c.in, r)
			}
		})
	}
}

func TestParseHandoffBoundsTheRawSummary(t *testing.T) {
	r := ParseHandoff(Writer, strings.Repeat("é", 5000))
	if len(r.Summary) > MaxSummaryBytes || !strings.HasSuffix(r.Summary, "[cut]") {
		t.Fatalf("summary of %d bytes", len(r.Summary))
	}
}

func TestDecideHandoff(t *testing.T) {
	for _, c := range []struct {
		status            string
		attempt, max      uint32
		canAsk, canReplan bool
		want              string
	}{
		{StatusCompleted, 1, 3, false, false, ActionContinue},
		{StatusPartial, 3, 3, false, true, ActionContinue},
		{StatusFailed, 1, 3, false, true, ActionRetry},
		{StatusFailed, 3, 3, false, false, ActionFail},
		{StatusFailed, 3, 3, false, true, ActionReplan},
		{StatusFailed, 3, 3, true, true, ActionReplan},
		{"", 1, 1, true, true, ActionReplan}, // no status: a failure
		{StatusBlocked, 1, 3, true, false, ActionAskHuman},
		{StatusBlocked, 1, 3, true, true, ActionAskHuman},
		{StatusBlocked, 1, 3, false, true, ActionReplan},
		{StatusBlocked, 1, 3, false, false, ActionFail},
	} {
		if got := DecideHandoff(&messages.SubagentResult{Status: c.status}, c.attempt, c.max, c.canAsk, c.canReplan); got != c.want {
			t.Errorf("DecideHandoff(%q, %d/%d, ask=%v, replan=%v) = %s, want %s", c.status, c.attempt, c.max, c.canAsk, c.canReplan, got, c.want)
		}
	}
}

func TestHandoffTextNamesArtifactsNotContents(t *testing.T) {
	r := &messages.SubagentResult{Status: "completed", Summary: "done", Confidence: 0.5, ArtifactsCreated: []string{"s/research/notes.md"},
		Researcher: &messages.ResearcherReport{KeyFindings: []string{"k"}}}
	got := HandoffText("researcher-1", Researcher, r)
	for _, want := range []string{"[researcher researcher-1: completed, confidence 0.50] done", "Artifacts created: s/research/notes.md", "Key findings: k"} {
		if !strings.Contains(got, want) {
			t.Fatalf("hand-off text %q lacks %q", got, want)
		}
	}
}

func TestProfiles(t *testing.T) {
	for step, agent := range map[string]string{"research": Researcher, "code": Coder, "write": Writer, "review": Reviewer} {
		p, ok := ProfileFor(step)
		if !ok || p.AgentType != agent || p.MaxIterations != DefaultMaxIterations || len(p.Tools) == 0 {
			t.Fatalf("ProfileFor(%s) = %v, %v", step, p, ok)
		}
	}
	for _, step := range []string{"custom", "human_input", ""} {
		if Delegated(step) {
			t.Fatalf("%q steps must stay the orchestrator's", step)
		}
	}
	p, _ := ProfileFor("code")
	if got := p.AvailableTools(func(n string) bool { return n == "code_execute" }); len(got) != 1 || got[0] != "code_execute" {
		t.Fatalf("available tools %v", got)
	}
}

// FuzzParseHandoff: any model output yields a result with a known status, never a panic.
func FuzzParseHandoff(f *testing.F) {
	for _, s := range []string{"", "{", "```json\n{\"status\":1}\n```", `{"confidence":"NaN%"}`, "```\n```", `{"summary":["a"]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := ParseHandoff(Coder, in)
		switch r.Status {
		case StatusCompleted, StatusPartial, StatusBlocked, StatusFailed:
		default:
			t.Fatalf("status %q", r.Status)
		}
		if r.Confidence < 0 || r.Confidence > 1 || len(r.Summary) > MaxSummaryBytes {
			t.Fatalf("result %v", r)
		}
	})
}
