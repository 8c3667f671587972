package memory_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

// bigText is n bytes of numbered lines: its head and tail are recognisable.
func bigText(n int, tag string) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s line %06d: value=%d\n", tag, i, i*7919%100003)
	}
	return b.String()[:n]
}

// TestBuildContextElidesOversizeMessages: a tool printing ~230 KB (about 119k tokens)
// in a 32,000-token context: the next call still sees its own call and the result,
// elided to its head and tail with a note naming the event that holds it whole, and
// the task (a 60 KB brief); the request costs no more than the budget.
func TestBuildContextElidesOversizeMessages(t *testing.T) {
	tk := tokenizer(t, memory.EncodingO200K)
	cfg := memory.DefaultContextConfig()
	cfg.Budget, cfg.Costs, cfg.Counter = 32000, tk.Costs(), tk
	out := bigText(230<<10, "out")
	brief := "Task: analyse\nGoal: " + bigText(60<<10, "goal")
	mk := func(m memory.Message) memory.Message { m.Tokens = tk.CountMessage(m.LLM()); return m }
	ms := []memory.Message{
		mk(memory.Message{Seq: 3, Role: "user", Content: brief}),
		mk(memory.Message{Seq: 5, Role: "assistant", Content: "looking", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"k":1}`}}}),
		mk(memory.Message{Seq: 6, Role: "tool", ToolCallID: "c1", Content: "small"}),
		mk(memory.Message{Seq: 8, Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c2", Name: "code_execute", Arguments: `{"code":"print(big)"}`}}}),
		mk(memory.Message{Seq: 9, Role: "tool", ToolCallID: "c2", Content: out}),
	}
	if ms[4].Tokens < 80000 {
		t.Fatalf("the output is only %d tokens", ms[4].Tokens)
	}
	sys := "You are an agent."
	c, err := memory.BuildContext(cfg, memory.Input{SystemPrompt: sys, SystemTokens: tk.CountMessage(llm.Message{Role: "system", Content: sys}),
		Messages: ms, Task: 3, Origin: "session s-1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.TotalTokens > cfg.Budget {
		t.Fatalf("%d tokens > budget", c.TotalTokens)
	}
	if real := tk.CountRequest(c.Messages()); real > c.TotalTokens {
		t.Fatalf("the request costs %d tokens, the context says %d", real, c.TotalTokens)
	}
	n := len(c.Recent)
	if n < 2 || c.Recent[n-2].Seq != 8 || c.Recent[n-1].Seq != 9 || c.Metadata.Elided < 1 {
		t.Fatalf("recent %v, metadata %+v", seqs(c.Recent), c.Metadata)
	}
	if got := c.Recent[n-2].ToolCalls; len(got) != 1 || got[0].Arguments != `{"code":"print(big)"}` {
		t.Fatalf("the call was changed: %v", got)
	}
	res := c.Recent[n-1].Content
	if !strings.HasPrefix(res, out[:1000]) || !strings.HasSuffix(res, out[len(out)-500:]) ||
		!strings.Contains(res, fmt.Sprintf("of %d bytes of this tool result elided here to fit the context; the whole text is event seq 9 of session s-1", len(out))) {
		t.Fatalf("elided result: head %q ... tail %q (%d bytes)", res[:min(200, len(res))], res[max(0, len(res)-200):], len(res))
	}
	if len(res) < 20000 {
		t.Fatalf("the elided result keeps only %d bytes of a ~%d-token share", len(res), cfg.Budget/2)
	}
	task := c.Task
	if task == nil {
		for _, m := range c.Recent {
			if m.Seq == 3 {
				task = &m
			}
		}
	}
	if task == nil || !strings.HasPrefix(task.Content, "Task: analyse\nGoal: goal line 000000") || !strings.Contains(task.Content, "event seq 3 of session s-1") {
		t.Fatalf("task %v", task)
	}
}

// TestBuildContextElisionProperties: random well-formed sessions (task, then turns of
// assistant calls and tool results, some of them huge), counted with ByteCounter: the
// context stays within budget, counts what it sends, and always holds the task and the
// newest turn when the budget leaves MinContextRoom.
func TestBuildContextElisionProperties(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	var bc memory.ByteCounter
	for iter := 0; iter < 400; iter++ {
		var ms []memory.Message
		seq := uint64(1)
		add := func(m memory.Message) {
			m.Seq = seq
			seq += 1 + uint64(r.Intn(2))
			m.Tokens = bc.CountMessage(m.LLM())
			ms = append(ms, m)
		}
		size := func() int {
			if r.Intn(6) == 0 {
				return 5000 + r.Intn(300000)
			}
			return r.Intn(600)
		}
		add(memory.Message{Role: "user", Content: bigText(size()+1, "task")})
		task := ms[0].Seq
		for turns := r.Intn(12); turns > 0; turns-- {
			calls := r.Intn(4)
			a := memory.Message{Role: "assistant", Content: bigText(r.Intn(200), "say")}
			for k := 0; k < calls; k++ {
				a.ToolCalls = append(a.ToolCalls, llm.ToolCall{ID: fmt.Sprintf("c%d", k), Name: "run", Arguments: `{"code":"` + bigText(r.Intn(3)*r.Intn(20000), "arg") + `"}`})
			}
			add(a)
			for k := 0; k < calls; k++ {
				add(memory.Message{Role: "tool", ToolCallID: fmt.Sprintf("c%d", k), Content: bigText(size(), "out")})
			}
		}
		cfg := memory.ContextConfig{Budget: 1500 + r.Intn(40000), Ratios: memory.DefaultRatios(), Costs: memory.DefaultCosts()}
		// The summary's framing in bytes: TokensPerMessage, "system" and the prefix.
		cfg.Costs.SummaryOverhead = memory.TokensPerMessage + len("system") + len(memory.SummaryPrefix)
		in := memory.Input{Messages: ms, Task: task, SystemPrompt: "sys", SystemTokens: 12 + r.Intn(cfg.Budget/4+1)}
		if r.Intn(2) == 0 {
			sum := bigText(1+r.Intn(3000), "sum")
			in.Summary = &memory.Summary{Content: sum, Tokens: len(sum), Through: 1}
		}
		c, err := memory.BuildContext(cfg, in)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkContext(t, iter, cfg, in, c)
		sent := memory.ReplyPrimingTokens
		for _, m := range c.Messages() {
			sent += bc.CountMessage(m)
		}
		if sent > c.TotalTokens {
			t.Fatalf("iter %d: sent %d, counted %d", iter, sent, c.TotalTokens)
		}
		room := cfg.Budget - in.SystemTokens - cfg.Costs.Reply - c.Metadata.SummaryTokens
		if room >= 4*memory.MinContextRoom && len(c.Recent) == 0 {
			t.Fatalf("iter %d: empty recent tier with room %d", iter, room)
		}
	}
}
