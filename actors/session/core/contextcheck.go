package core

import (
	"fmt"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/prompts"
)

// CheckContextBudget refuses a context budget that leaves no room beside the system
// prompts of the calls it bounds (a step's executor prompt, each sub-agent's prompt):
// with the largest of them, a goal at its share (1/goalShare of the budget) and the
// summary's tier, the task and the newest turn must still have memory.MinContextRoom.
// Otherwise every such call would fail (memory.ErrBudgetTooSmall) or lose its task, so
// the node refuses to start.
func CheckContextBudget(c Config, p *prompts.Set, tok *memory.Tokenizer) error {
	cc := c.ContextConfig()
	largest, name := 0, ""
	count := func(n, text string) {
		if t := tok.CountMessage(llm.Message{Role: "system", Content: text}); t > largest {
			largest, name = t, n
		}
	}
	for _, typ := range []string{"custom", StepTypeHumanInput} {
		text, err := p.Render(prompts.Executor, prompts.ExecutorData{StepType: typ})
		if err != nil {
			return fmt.Errorf("session config: %w", err)
		}
		count(prompts.Executor, text)
	}
	p, err := c.Registry().PromptSet(p)
	if err != nil {
		return fmt.Errorf("session config: %w", err)
	}
	for _, agent := range c.Registry().All() {
		if agent.Run != nil {
			continue // a Go function: no prompt
		}
		tools := agent.Tools
		if list, ok := c.SubAgentTools[agent.Name]; ok {
			tools = list
		}
		text, err := p.Render(agent.Template(), prompts.AgentData{AgentType: agent.Name, Tools: tools, Workspace: "s/", MaxIterations: c.subAgentMaxIterations(),
			Step: prompts.Step{ID: "step-1", Type: agent.StepType(), Description: "a step"}})
		if err != nil {
			return fmt.Errorf("session config: %w", err)
		}
		count(agent.Name, text)
	}
	room := func(budget int) int {
		avail := budget - budget/GoalShare - largest - cc.Costs.Reply
		return int(float64(avail) * (1 - cc.Ratios.Summary))
	}
	if room(cc.Budget) >= memory.MinContextRoom {
		return nil
	}
	need := cc.Budget
	for room(need) < memory.MinContextRoom {
		need += 100
	}
	return fmt.Errorf("session config: context budget %d (--context-budget) leaves no room beside the system prompts: the %s prompt is %d tokens, "+
		"a goal may add %d (1/%d of the budget) and the summary tier %.0f%% of the rest, leaving %d tokens for the task and the newest turn (at least %d are needed): "+
		"raise --context-budget to %d or more", cc.Budget, name, largest, cc.Budget/GoalShare, GoalShare, 100*cc.Ratios.Summary, max(room(cc.Budget), 0), memory.MinContextRoom, need)
}
