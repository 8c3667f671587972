package fathom_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/tools"
)

// A program embeds a node with its own typed tool and agent, starts a session on the
// built-in demo model and follows its events to the end.
func Example() {
	dir, _ := os.MkdirTemp("", "fathom-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type wordsArgs struct {
		Text string `json:"text" jsonschema:"the text to count the words of"`
	}
	cfg := fathom.DefaultConfig()
	cfg.DataDir = dir
	cfg.Tools = []tools.Tool{tools.MustNew("count_words", "Counts the words of a text.", tools.SandboxNone,
		func(_ context.Context, a wordsArgs) (any, error) { return len(strings.Fields(a.Text)), nil })}
	// An agent of the program's own: a Go function the planner may delegate a step to (a
	// step of type "word_checker"; the demo model plans with the built-in agents only).
	cfg.Agents = []fathom.Agent{{Name: "word_checker", Description: "Counts the words of the goal again, in Go",
		Run: func(_ context.Context, b fathom.Brief) (*fathom.Handoff, error) {
			return &fathom.Handoff{Status: "completed", Summary: fmt.Sprintf("the goal has %d words", len(strings.Fields(b.Goal))), Confidence: 1}, nil
		}}}
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close(context.Background())

	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "example-1", Goal: "Explain event sourcing in two sentences"})
	if err != nil {
		fmt.Println(err)
		return
	}
	sub := n.Follow(id, 0)
	defer sub.Close()
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		switch u.Event.Type() {
		case "session_started", "plan_created", "session_completed":
			fmt.Println(u.Event.GetSeq() > 0, u.Event.Type())
		}
		if u.Event.GetSessionCompleted() != nil {
			st, _ := n.State(ctx, id)
			fmt.Println(st.GetStatus())
			return
		}
	}
	// Output:
	// true session_started
	// true plan_created
	// true session_completed
	// SESSION_STATUS_COMPLETED
}
