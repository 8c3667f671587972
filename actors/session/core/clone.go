package core

import (
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fathom-agents/fathom/messages"
)

// CloneState returns a copy of s that Apply may mutate without touching s.
//
// It is proto.Clone except for the steps, the sub-agents, the transcripts and the steps'
// plan steps. The new state gets its own list of steps and map of sub-agents, but the
// steps and sub-agents are shared with s until Apply changes one, which it does in a copy
// (ownStep, ownSubAgent). Transcripts
// get their own slices with shared entries: Apply only ever appends to a transcript or
// replaces it; it never modifies an entry once appended (a
// TranscriptEntry is immutable, like an event). A transcript holds a session's whole
// history, so copying it on every decision made a step cost grow with the session's
// length; sharing the entries keeps a decision's copy proportional to the state's
// shape (its steps and sub-agents), not to everything ever said.
func CloneState(s *messages.SessionState) *messages.SessionState {
	if s == nil {
		return nil
	}
	// The config, the pending call, the usage, the summary, the interrupt and the fork's
	// origin are shared, not copied: Apply never changes one in place, it replaces it
	// (a new message, or nil), so a shared one is never written (FuzzApply checks that
	// no event applied to a clone changes the original). So is the map of remembered
	// commands: Apply writes a copy of it (rememberCommand), and only for the events of a
	// command, while every decision clones the state (each retained state, such as an
	// append in flight's, kept a copy of its own).
	//
	// Field by field, not through reflection (a generic copy spent most of its time
	// converting each scalar to and from a protoreflect.Value): a message field is
	// proto.Clone's, a list gets its own elements. TestCloneStateCopiesEveryField fails
	// when a field added to SessionState is missing here.
	out := &messages.SessionState{
		SessionId: s.SessionId, Seq: s.Seq, Status: s.Status, Goal: s.Goal,
		Config: s.Config, PlanId: s.PlanId,
		CurrentStepIndex: s.CurrentStepIndex, Iterations: s.Iterations,
		Pending: s.Pending, Usage: s.Usage,
		Result: s.Result, Error: s.Error,
		StartedAtUnixNano: s.StartedAtUnixNano, UpdatedAtUnixNano: s.UpdatedAtUnixNano,
		Commands: s.Commands, UserId: s.UserId,
		PendingTools:    cloneMsgs(s.PendingTools),
		RetryAtUnixNano: s.RetryAtUnixNano, PlanAttempt: s.PlanAttempt, CostUsd: s.CostUsd, PlanSeq: s.PlanSeq,
		Summary:     s.Summary,
		Breakpoints: cloneMsgs(s.Breakpoints), Interrupt: s.Interrupt, Awaiting: cloneMsgs(s.Awaiting),
		Artifacts: cloneMsgs(s.Artifacts), Memories: cloneMsgs(s.Memories), ForkedFrom: s.ForkedFrom,
		Replans: s.Replans, ReplanCalls: s.ReplanCalls, ReplanAttempt: s.ReplanAttempt, PlanRevision: s.PlanRevision,
		RetiredStepIds: slices.Clone(s.RetiredStepIds), LlmCalls: s.LlmCalls, Turn: s.Turn,
		Thread: cloneMsgs(s.Thread), Tenant: s.Tenant, Owner: s.Owner, Audit: cloneMsgs(s.Audit),
		RunStartedSeq: s.RunStartedSeq, RunStartedAtUnixNano: s.RunStartedAtUnixNano,
		Webhooks: cloneMsgs(s.Webhooks), QueuedMessages: cloneMsgs(s.QueuedMessages), PushConfigs: cloneMsgs(s.PushConfigs),
	}
	if u := s.ProtoReflect().GetUnknown(); len(u) > 0 {
		out.ProtoReflect().SetUnknown(append(protoreflect.RawFields(nil), u...))
	}
	if len(s.GetSteps()) > 0 {
		// The steps themselves are shared: Apply copies a step before changing it (ownStep).
		out.Steps = slices.Clone(s.GetSteps())
	}
	if len(s.GetSubAgents()) > 0 {
		// Shared too: Apply copies a sub-agent before changing it (ownSubAgent).
		out.SubAgents = maps.Clone(s.GetSubAgents())
	}
	return out
}

// cloneMsg is proto.Clone of m (nil stays nil).
func cloneMsg[M proto.Message](m M) M { return proto.Clone(m).(M) }

// cloneMsgs is a list of messages with a copy of each.
func cloneMsgs[M proto.Message](l []M) []M {
	if l == nil {
		return nil
	}
	out := make([]M, len(l))
	for i, m := range l {
		out[i] = cloneMsg(m)
	}
	return out
}

// The field cloneSubAgent copies by hand.
var saTranscript = fieldOf(&messages.SubagentState{}, "transcript")

func fieldOf(m proto.Message, name protoreflect.Name) protoreflect.FieldDescriptor {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if fd == nil {
		panic("core: no field " + string(name) + " in " + string(m.ProtoReflect().Descriptor().FullName()))
	}
	return fd
}

// cloneStep copies a step by hand (Apply's ownStep, for the one step an event changes;
// copying every step on every decision was a tenth of a step's CPU): the plan step and
// the transcript's entries are shared, being immutable (Apply replaces a step's plan step,
// never edits it).
// TestCloneStateCopiesEveryField fails when a field added to StepState is missing here.
func cloneStep(st *messages.StepState) *messages.StepState {
	if st == nil {
		return nil
	}
	out := &messages.StepState{
		Step:              st.Step,
		Status:            st.Status,
		Output:            st.Output,
		Error:             st.Error,
		Attempt:           st.Attempt,
		LlmCalls:          st.LlmCalls,
		ToolCalls:         st.ToolCalls,
		StartedSeq:        st.StartedSeq,
		EndedSeq:          st.EndedSeq,
		StartedAtUnixNano: st.StartedAtUnixNano,
		EndedAtUnixNano:   st.EndedAtUnixNano,
		OpeningTokens:     st.OpeningTokens,
	}
	if len(st.GetTranscript()) > 0 {
		out.Transcript = append(make([]*messages.TranscriptEntry, 0, len(st.GetTranscript())+4), st.GetTranscript()...)
	}
	return out
}

func cloneSubAgent(sa *messages.SubagentState) *messages.SubagentState {
	if sa == nil {
		return nil
	}
	out := &messages.SubagentState{}
	cloneExcept(sa.ProtoReflect(), out.ProtoReflect(), saTranscript)
	if len(sa.GetTranscript()) > 0 {
		out.Transcript = append(make([]*messages.TranscriptEntry, 0, len(sa.GetTranscript())+4), sa.GetTranscript()...)
	}
	return out
}

// cloneExcept deep-copies every populated field of src into dst (empty) but skip.
// Unknown fields are copied too, as proto.Clone would.
func cloneExcept(src, dst protoreflect.Message, skip ...protoreflect.FieldDescriptor) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		for _, s := range skip {
			if fd == s {
				return true
			}
		}
		switch {
		case fd.IsList():
			from, to := v.List(), dst.Mutable(fd).List()
			for i := 0; i < from.Len(); i++ {
				to.Append(cloneValue(fd, from.Get(i)))
			}
		case fd.IsMap():
			to := dst.Mutable(fd).Map()
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				to.Set(k, cloneValue(fd.MapValue(), mv))
				return true
			})
		default:
			dst.Set(fd, cloneValue(fd, v))
		}
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(append(protoreflect.RawFields(nil), u...))
	}
}

// cloneValue copies one singular value (a list element, a map value or a field) of fd.
func cloneValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(append([]byte(nil), v.Bytes()...))
	default:
		return v
	}
}
