package core

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/messages"
)

// Hand-off statuses.
const (
	StatusCompleted = "completed"
	StatusPartial   = "partial"
	StatusBlocked   = "blocked"
	StatusFailed    = "failed"
)

// Orchestrator actions after a hand-off.
const (
	ActionContinue = "continue"
	ActionRetry    = "retry"
	ActionAskHuman = "ask_human"
	// ActionReplan drops the failed step and the pending ones and asks the orchestrator
	// for a new plan of the remaining work (plan_revised).
	ActionReplan = "replan"
	ActionFail   = "fail"
)

// MaxSummaryBytes bounds a hand-off's summary (a raw answer used as summary is cut).
const MaxSummaryBytes = 4000

// maxListItems and maxItemBytes bound the hand-off's lists.
const (
	maxListItems = 32
	maxItemBytes = 1000
)

// ParseHandoff reads the model's hand-off from a sub-agent's final answer: one JSON
// object, preferably in a ```json fence, else the outermost {...} of the answer. It
// never fails: an answer without a readable object yields status partial, the raw text
// as summary (bounded) and parse_error saying why. Unknown statuses become partial,
// confidence is clamped to [0, 1], lists accept a single string, and fields of the wrong
// type are ignored. The type-specific fields are read for agentType.
func ParseHandoff(agentType, content string) *messages.SubagentResult {
	raw, err := handoffObject(content)
	if err != nil {
		return &messages.SubagentResult{Status: StatusPartial, Summary: bound(strings.TrimSpace(content), MaxSummaryBytes), ParseError: err.Error()}
	}
	r := &messages.SubagentResult{
		Status:          strings.ToLower(str(raw["status"])),
		Summary:         bound(str(raw["summary"]), MaxSummaryBytes),
		Recommendations: list(raw["recommendations"]),
		Blockers:        list(raw["blockers"]),
		Confidence:      confidence(raw["confidence"]),
	}
	switch r.Status {
	case StatusCompleted, StatusPartial, StatusBlocked, StatusFailed:
	default:
		r.ParseError = fmt.Sprintf("status %q is not completed, partial, blocked or failed", r.Status)
		r.Status = StatusPartial
	}
	if r.Summary == "" {
		// The object carried no summary: the prose around it is the best account.
		r.Summary = bound(strings.TrimSpace(stripObject(content)), MaxSummaryBytes)
	}
	switch agentType {
	case Researcher:
		r.Researcher = &messages.ResearcherReport{Sources: list(raw["sources"]), KeyFindings: list(raw["key_findings"]), KnowledgeGaps: list(raw["knowledge_gaps"])}
	case Coder:
		r.Coder = &messages.CoderReport{FilesCreated: list(raw["files_created"]), TestsStatus: str(raw["tests_status"]), ImplNotes: bound(str(raw["impl_notes"]), MaxSummaryBytes)}
	case Writer:
		r.Writer = &messages.WriterReport{DocumentType: str(raw["document_type"]), WordCount: uint32(max(0, min(number(raw["word_count"]), math.MaxUint32))), Sections: list(raw["sections"])}
	case Reviewer:
		r.Reviewer = &messages.ReviewerReport{Verdict: strings.ToLower(str(raw["verdict"])), Issues: list(raw["issues"])}
	}
	return r
}

// handoffObject finds and decodes the hand-off object.
func handoffObject(content string) (map[string]any, error) {
	if strings.TrimSpace(content) == "" {
		return nil, fmt.Errorf("the final answer is empty")
	}
	candidates := fenced(content)
	if s, e := strings.Index(content, "{"), strings.LastIndex(content, "}"); s >= 0 && e > s {
		candidates = append(candidates, content[s:e+1])
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("no JSON object in the final answer")
	}
	var firstErr error
	for _, c := range candidates {
		var m map[string]any
		err := json.Unmarshal([]byte(c), &m)
		if err == nil && m != nil {
			return m, nil
		}
		if firstErr == nil {
			if err == nil {
				err = fmt.Errorf("not an object")
			}
			firstErr = fmt.Errorf("hand-off JSON: %w", err)
		}
	}
	return nil, firstErr
}

// fenced returns the bodies of ```json (or bare ```) fences, last first: the hand-off
// closes the answer.
func fenced(content string) []string {
	var out []string
	rest := content
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		body := rest[i+3:]
		if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.Contains(body[:nl], "{") {
			body = body[nl+1:]
		}
		j := strings.Index(body, "```")
		if j < 0 {
			break
		}
		if b := strings.TrimSpace(body[:j]); strings.HasPrefix(b, "{") {
			out = append([]string{b}, out...)
		}
		rest = body[j+3:]
	}
	return out
}

// stripObject removes the hand-off object (fenced or not) from content.
func stripObject(content string) string {
	if i := strings.Index(content, "```"); i >= 0 {
		return content[:i]
	}
	if i := strings.Index(content, "{"); i >= 0 {
		return content[:i]
	}
	return content
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

func list(v any) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" && len(out) < maxListItems {
			out = append(out, bound(s, maxItemBytes))
		}
	}
	switch x := v.(type) {
	case string:
		add(x)
	case []any:
		for _, e := range x {
			switch y := e.(type) {
			case string:
				add(y)
			case map[string]any, []any:
				if b, err := json.Marshal(y); err == nil {
					add(string(b))
				}
			default:
				add(str(y))
			}
		}
	}
	return out
}

func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(x), "%"), 64)
		if err == nil {
			if strings.HasSuffix(strings.TrimSpace(x), "%") {
				f /= 100
			}
			return f
		}
	}
	return 0
}

func confidence(v any) float64 {
	f := number(v)
	if math.IsNaN(f) || f < 0 {
		return 0
	}
	if f > 1 && f <= 100 {
		f /= 100 // "85" meant 85%
	}
	return min(f, 1)
}

// bound cuts s to at most n bytes on a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …[cut]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// HandoffFacts merges what code knows about a sub-agent's run into r: the artifacts it
// created and modified, the tools it used, its token usage and cost, and how long it
// ran (durationMs). The model's interpretation in r is kept.
func HandoffFacts(r *messages.SubagentResult, sa *messages.SubagentState, durationMs int64) *messages.SubagentResult {
	r.ArtifactsCreated = append([]string(nil), sa.GetRunArtifactsCreated()...)
	r.ArtifactsModified = append([]string(nil), sa.GetRunArtifactsModified()...)
	r.ToolsUsed = append([]string(nil), sa.GetRunToolsUsed()...)
	r.Usage = sa.GetRunUsage()
	r.CostUsd = sa.GetRunCostUsd()
	r.DurationMs = max(durationMs, 0)
	return r
}

// DecideHandoff is the orchestrator's next action after a hand-off: a completed or partial
// result continues the plan; a failed one retries the step while attempts are left
// (attempt counts the step's runs, from 1), then re-plans the remaining work when
// canReplan (re-plans are left), and fails the session otherwise; a blocked one asks a
// human when canAsk, else re-plans when canReplan, else fails (retrying a blocked agent
// cannot help).
func DecideHandoff(r *messages.SubagentResult, attempt, maxAttempts uint32, canAsk, canReplan bool) string {
	switch r.GetStatus() {
	case StatusCompleted, StatusPartial:
		return ActionContinue
	case StatusBlocked:
		if canAsk {
			return ActionAskHuman
		}
		if canReplan {
			return ActionReplan
		}
		return ActionFail
	default:
		if attempt < maxAttempts {
			return ActionRetry
		}
		if canReplan {
			return ActionReplan
		}
		return ActionFail
	}
}

// HandoffText renders a hand-off as the orchestrator reads it: the step's output in its
// history and in the briefs of the steps that depend on it. It names artifacts by path,
// never their content.
func HandoffText(subAgentID, agentType string, r *messages.SubagentResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s %s: %s, confidence %.2f] %s\n", agentType, subAgentID, r.GetStatus(), r.GetConfidence(), r.GetSummary())
	line := func(label string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(&b, "%s: %s\n", label, strings.Join(items, "; "))
		}
	}
	line("Recommendations", r.GetRecommendations())
	line("Blockers", r.GetBlockers())
	line("Artifacts created", r.GetArtifactsCreated())
	line("Artifacts modified", r.GetArtifactsModified())
	if x := r.GetResearcher(); x != nil {
		line("Key findings", x.GetKeyFindings())
		line("Sources", x.GetSources())
		line("Knowledge gaps", x.GetKnowledgeGaps())
	}
	if x := r.GetCoder(); x != nil {
		line("Files", x.GetFilesCreated())
		if x.GetTestsStatus() != "" {
			fmt.Fprintf(&b, "Tests: %s\n", x.GetTestsStatus())
		}
		if x.GetImplNotes() != "" {
			fmt.Fprintf(&b, "Notes: %s\n", x.GetImplNotes())
		}
	}
	if x := r.GetWriter(); x != nil {
		if x.GetDocumentType() != "" || x.GetWordCount() > 0 {
			fmt.Fprintf(&b, "Document: %s, %d words\n", x.GetDocumentType(), x.GetWordCount())
		}
		line("Sections", x.GetSections())
	}
	if x := r.GetReviewer(); x != nil {
		if x.GetVerdict() != "" {
			fmt.Fprintf(&b, "Verdict: %s\n", x.GetVerdict())
		}
		line("Issues", x.GetIssues())
	}
	return strings.TrimRight(b.String(), "\n")
}
