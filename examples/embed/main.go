// Command embed is a Go program embedding Fathom with a tool and an agent of its own: the
// researcher agent may call count_words, a typed tool whose JSON Schema is derived from
// its argument struct, and the planner may delegate a step to checker, a Go-function
// agent that checks the count an earlier step handed off. It runs one session to its
// end and prints its events.
//
//	go run ./examples/embed -goal "How many words are in 'to be or not to be'?"
//
// The model is the built-in demo model unless OPENAI_BASE_URL (and OPENAI_API_KEY) name
// an OpenAI-compatible endpoint. The demo model knows nothing of count_words and
// checker, so the program scripts their turns for it (fathom.LLM.DemoRules, llm/mock
// rules): on the demo model too, a goal that quotes a text is planned as a count by the
// researcher with count_words, then a check by checker.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/tools"
)

// wordsArgs are count_words' arguments; the tool's JSON Schema is generated from them.
type wordsArgs struct {
	Text string `json:"text" jsonschema:"the text whose words are counted"`
}

// countWords is the program's own tool.
var countWords = tools.MustNew("count_words", "Counts the words (runs of non-space characters) of a text.", tools.SandboxNone,
	func(_ context.Context, a wordsArgs) (any, error) {
		return map[string]int{"words": len(strings.Fields(a.Text))}, nil
	})

// checker is the program's own agent: a Go function, no model. The planner reads its
// description and delegates a step of type "checker" to it; it gets the brief (the goal,
// its step, the hand-offs of the steps it depends on) and returns its hand-off.
var checker = fathom.Agent{
	Name:        "checker",
	Description: "Checks a word count that an earlier step handed off, by counting the quoted text of the goal again in Go",
	Run: func(_ context.Context, b fathom.Brief) (*fathom.Handoff, error) {
		quoted := strings.Split(b.Goal, "'")
		if len(quoted) < 3 {
			return &fathom.Handoff{Status: "blocked", Summary: "the goal quotes no text to count", Blockers: []string{"quote the text in '...'"}}, nil
		}
		want := strconv.Itoa(len(strings.Fields(quoted[1])))
		for _, up := range b.Upstream {
			if strings.Contains(up.Output, want+" words") {
				return &fathom.Handoff{Status: "completed", Summary: fmt.Sprintf("checked: step %s's count of %s words is right", up.StepID, want), Confidence: 1}, nil
			}
		}
		return &fathom.Handoff{Status: "completed", Summary: fmt.Sprintf("checked: the text has %s words; no earlier step says so", want), Confidence: 1,
			Recommendations: []string{"correct the count to " + want}}, nil
	},
}

// demoRules script the demo model's turns for the program's tool and agent, tried
// before its own script: for a goal quoting a text, the plan counts its words (a
// research step) and checks the count (a checker step); the researcher calls
// count_words on the quoted text and hands off the count it returned; the synthesis
// quotes the checker's hand-off. Any other goal gets the demo model's usual answers.
var demoRules = []mock.Rule{
	{SystemMatch: `FATHOM-ROLE: orchestrator\s+FATHOM-PHASE: synthesize`, ContextMatch: "checked: ",
		Response: `(demo model) {{find "(checked: [^\"\n]*)" .Input}}`},
	{SystemMatch: `FATHOM-ROLE: orchestrator\s+FATHOM-PHASE: plan[\s\S]*\| checker \|`, Match: `'[^']+'`,
		Response: `{"steps":[{"id":"count","type":"research","description":{{json (printf "Count the words of: %s" (find "'([^']+)'" .Goal))}}},` +
			`{"id":"check","type":"checker","description":"Check the count","dependencies":["count"]}]}`},
	{SystemMatch: "FATHOM-ROLE: researcher", ContextMatch: "Count the words of: ", ToolMatch: `"words"`,
		Response: "(demo model) Counted.\n\n```json\n" +
			`{"status":"completed","summary":"count_words says {{find "(\\d+)" .Tool}} words","confidence":0.9}` + "\n```\n"},
	{SystemMatch: "FATHOM-ROLE: researcher", ContextMatch: "Count the words of: ",
		ToolCalls: []mock.ToolCallRule{{Name: "count_words", Arguments: `{"text":{{json (find "Count the words of: ([^\n]*)" .Input)}}}`}}},
}

func main() {
	goal := flag.String("goal", "How many words are in 'to be or not to be'?", "the session's goal")
	dir := flag.String("data-dir", ".fathom-embed", "the embedded journal's directory")
	flag.Parse()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = *dir
	cfg.LLM = fathom.LLM{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: os.Getenv("FATHOM_MODEL"),
		DemoRules: demoRules}
	if err := run(context.Background(), cfg, *goal, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// run starts a node with count_words given to the researcher and the checker agent, runs
// one session for goal and prints each event as "seq type" (a tool call with its tool and
// arguments, a sub-agent's hand-off with its agent type and summary).
func run(ctx context.Context, cfg fathom.Config, goal string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cfg.Tools = append(cfg.Tools, countWords)
	cfg.Session.SubAgentTools = map[string][]string{"researcher": {"count_words", "write_artifact"}}
	cfg.Agents = append(cfg.Agents, checker)
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close(context.Background())
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: goal})
	if err != nil {
		return err
	}
	sub := n.Follow(id, 0)
	defer sub.Close()
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			return err
		}
		ev := u.Event
		fmt.Fprintf(out, "%d %s", ev.GetSeq(), ev.Type())
		switch {
		case ev.GetToolCalled() != nil:
			fmt.Fprintf(out, " %s %s", ev.GetToolCalled().GetTool(), ev.GetToolCalled().GetArgs())
		case ev.GetSubagentCompleted() != nil:
			fmt.Fprintf(out, " %s: %s", ev.GetSubagentCompleted().GetAgentType(), ev.GetSubagentCompleted().GetResult().GetSummary())
		}
		fmt.Fprintln(out)
		switch {
		case ev.GetSessionCompleted() != nil:
			fmt.Fprintln(out, "result:", ev.GetSessionCompleted().GetResult())
			return nil
		case ev.GetSessionFailed() != nil:
			return fmt.Errorf("session failed: %s", ev.GetSessionFailed().GetError())
		}
	}
}
