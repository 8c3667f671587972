package core

import (
	"slices"

	"github.com/fathom-agents/fathom/tools/builtin"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// The memory settings of an agent (AgentSpec.Memory, the agents entry's memory key).
const (
	// MemoryNone: no long-term memory (the default of sub-agents).
	MemoryNone = "none"
	// MemoryRead: the user's most relevant memories in the context, and recall.
	MemoryRead = "read"
	// MemoryReadWrite: MemoryRead, and remember and forget.
	MemoryReadWrite = "readwrite"
)

// MemoryTools are the memory tools a memory setting gives an agent.
func MemoryTools(setting string) []string {
	switch setting {
	case MemoryRead:
		return []string{builtin.RecallTool}
	case MemoryReadWrite:
		return []string{builtin.RecallTool, builtin.RememberTool, builtin.ForgetTool}
	}
	return nil
}

// applyMemorySaved upserts m by memory id: the projection keeps the newest record of
// each item the session saved, in the order ids were first saved.
func applyMemorySaved(s *messages.SessionState, m *messages.MemorySaved) {
	for i, old := range s.Memories {
		if old.GetMemoryId() == m.GetMemoryId() {
			s.Memories[i] = m
			return
		}
	}
	s.Memories = append(s.Memories, m)
}

// applyMemoryDeleted drops the item from the projection (an item of another session,
// not in it, leaves it as it is).
func applyMemoryDeleted(s *messages.SessionState, m *messages.MemoryDeleted) {
	s.Memories = slices.DeleteFunc(s.Memories, func(old *messages.MemorySaved) bool { return old.GetMemoryId() == m.GetMemoryId() })
}

// recordMemories appends a memory_saved or memory_deleted event for each long-term
// memory write a tool call made (tools.RecordMemory), before the call's tool_result.
func recordMemories(b *EventBuilder, stepID, subAgentID, callID, key string, writes []tools.MemoryWrite) {
	for _, w := range writes {
		b.Add(func(e *messages.Event) {
			if w.Deleted {
				e.Payload = &messages.Event_MemoryDeleted{MemoryDeleted: &messages.MemoryDeleted{
					MemoryId: w.ID, Tenant: w.Tenant, UserId: w.User,
					StepId: stepID, SubAgentId: subAgentID, CallId: callID, IdempotencyKey: key,
				}}
				return
			}
			ms := &messages.MemorySaved{
				MemoryId: w.ID, Tenant: w.Tenant, UserId: w.User, Agent: w.Agent, Text: w.Text, Metadata: w.Metadata,
				CreatedAtUnixNano: w.CreatedAt.UnixNano(), UpdatedAtUnixNano: w.UpdatedAt.UnixNano(), Replaced: w.Replaced,
				StepId: stepID, SubAgentId: subAgentID, CallId: callID, IdempotencyKey: key,
			}
			if !w.ExpiresAt.IsZero() {
				ms.ExpiresAtUnixNano = w.ExpiresAt.UnixNano()
			}
			e.Payload = &messages.Event_MemorySaved{MemorySaved: ms}
		})
	}
}
