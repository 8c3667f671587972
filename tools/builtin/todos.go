package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fathom-agents/fathom/tools"
)

// TodoStatus is the state of one todo item.
type TodoStatus string

// The todo statuses write_todos accepts.
const (
	// TodoPending: not started.
	TodoPending TodoStatus = "pending"
	// TodoInProgress: being worked on now (at most one item).
	TodoInProgress TodoStatus = "in_progress"
	// TodoCompleted: done.
	TodoCompleted TodoStatus = "completed"
)

// Todo is one item of the plan the model keeps with write_todos.
type Todo struct {
	// Content says what to do.
	Content string `json:"content" jsonschema:"minLength=1,maxLength=1000" jsonschema_description:"What to do, as an imperative sentence."`
	// Status is pending, in_progress or completed.
	Status TodoStatus `json:"status" jsonschema:"enum=pending,enum=in_progress,enum=completed" jsonschema_description:"pending, in_progress (at most one item) or completed."`
}

// TodosArgs are write_todos' arguments.
type TodosArgs struct {
	// Todos is the whole list, replacing the previous one.
	Todos []Todo `json:"todos" jsonschema:"maxItems=50" jsonschema_description:"The complete todo list. It replaces the previous list: include every item, done or not."`
}

// MaxTodos bounds the list (the schema's maxItems; checked again by ParseTodos).
const MaxTodos = 50

// WriteTodos returns the write_todos tool. Its list is the session's own state (projected
// from its tool_called events), so it has no effects outside the session
// (tools.NoEffects).
func WriteTodos() tools.Tool {
	return tools.WithoutEffects(tools.MustNew("write_todos",
		"Create or update your todo list for the current task. Use it for work with three or more steps: "+
			"write the plan as todos, mark the one you are working on in_progress (only one at a time) and "+
			"mark items completed as soon as they are done. Send the complete list every time; it replaces the previous one.",
		tools.SandboxNone, func(_ context.Context, a TodosArgs) (any, error) {
			if err := checkTodos(a.Todos); err != nil {
				return nil, err
			}
			return renderTodos(a.Todos), nil
		}))
}

// ParseTodos decodes and checks a write_todos arguments payload, as recorded in a
// tool_called event, so the current list can be projected from a session's events.
func ParseTodos(args json.RawMessage) ([]Todo, error) {
	var a TodosArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("write_todos arguments: %w", err)
	}
	if err := checkTodos(a.Todos); err != nil {
		return nil, err
	}
	return a.Todos, nil
}

// checkTodos enforces what the schema cannot: one item in progress at most.
func checkTodos(ts []Todo) error {
	if len(ts) > MaxTodos {
		return tools.ValidationError("write_todos", fmt.Sprintf("the list has %d items; keep it to %d or fewer by merging small items", len(ts), MaxTodos))
	}
	var inProgress []int
	for i, t := range ts {
		if strings.TrimSpace(t.Content) == "" {
			return tools.ValidationError("write_todos", fmt.Sprintf("item %d has no content", i+1))
		}
		switch t.Status {
		case TodoPending, TodoCompleted:
		case TodoInProgress:
			inProgress = append(inProgress, i+1)
		default:
			return tools.ValidationError("write_todos", fmt.Sprintf("item %d has status %q; use pending, in_progress or completed", i+1, t.Status))
		}
	}
	if len(inProgress) > 1 {
		return tools.ValidationError("write_todos", fmt.Sprintf("items %v are all in_progress; mark only the one you are working on now as in_progress and the others pending", inProgress))
	}
	return nil
}

func renderTodos(ts []Todo) string {
	if len(ts) == 0 {
		return "Todo list cleared."
	}
	var done, doing, pending int
	var b strings.Builder
	for i, t := range ts {
		mark := "[ ]"
		switch t.Status {
		case TodoCompleted:
			mark = "[x]"
			done++
		case TodoInProgress:
			mark = "[~]"
			doing++
		default:
			pending++
		}
		fmt.Fprintf(&b, "\n%d. %s %s", i+1, mark, t.Content)
	}
	return fmt.Sprintf("Updated todo list (%d items: %d completed, %d in progress, %d pending):%s", len(ts), done, doing, pending, b.String())
}
