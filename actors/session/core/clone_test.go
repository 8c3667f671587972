package core_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// fill sets every field of m (recursively, to depth) to a non-zero value, so a copy that
// forgets a field, including one added to the schema later, differs from m.
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && m.WhichOneof(fd.ContainingOneof()) != nil {
			continue // one member of each oneof
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := 0; j < 2; j++ {
				if v, ok := value(l.NewElement, fd, depth); ok {
					l.Append(v)
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			k := protoreflect.ValueOfString("k").MapKey()
			if fd.MapKey().Kind() != protoreflect.StringKind {
				continue
			}
			if v, ok := value(mp.NewValue, fd.MapValue(), depth); ok {
				mp.Set(k, v)
			}
		default:
			if v, ok := value(func() protoreflect.Value { return m.NewField(fd) }, fd, depth); ok {
				m.Set(fd, v)
			}
		}
	}
}

func value(newMsg func() protoreflect.Value, fd protoreflect.FieldDescriptor, depth int) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if depth == 0 {
			return protoreflect.Value{}, false
		}
		v := newMsg()
		fill(v.Message(), depth-1)
		return v, true
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x-" + string(fd.Name())), true
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fd.Name())), true
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true), true
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7), true
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(7), true
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(7), true
	}
	return protoreflect.Value{}, false
}

// TestCloneStateCopiesEveryField: CloneState equals proto.Clone on a state with every
// field set (so a field added to the schema is copied too), and mutating the copy, its
// step list and sub-agent map, or remembering a command in it, leaves the original as it
// was. The steps and sub-agents
// themselves are shared until Apply changes one in a copy, which is checked here to have
// every field (and FuzzApply checks that no event applied to a clone changes the original).
func TestCloneStateCopiesEveryField(t *testing.T) {
	s := &messages.SessionState{}
	fill(s.ProtoReflect(), 4)
	if len(s.GetSteps()) == 0 || len(s.GetSteps()[0].GetTranscript()) == 0 || len(s.GetSubAgents()) == 0 {
		t.Fatal("fill left the steps, their transcripts or the sub-agents empty")
	}
	want := proto.Clone(s).(*messages.SessionState)
	c := core.CloneState(s)
	if !proto.Equal(c, want) {
		t.Fatal("CloneState differs from proto.Clone")
	}
	c.Steps[0] = &messages.StepState{Status: messages.StepStatus_STEP_STATUS_FAILED}
	for id := range c.SubAgents {
		c.SubAgents[id] = &messages.SubagentState{AgentType: "changed"}
	}
	core.RememberCommand(c, "k", 99) // the commands map is shared: Apply replaces it
	if c.GetCommands()["k"] != 99 {
		t.Fatal("the copy did not remember its command")
	}
	c.Steps = append(c.Steps, &messages.StepState{})
	if !proto.Equal(s, want) {
		t.Fatal("mutating the copy changed the original")
	}
	if core.CloneState(nil) != nil {
		t.Fatal("CloneState(nil) is not nil")
	}
	// The copy Apply makes of a step before changing it has every field too, and its own
	// transcript slice.
	st := s.GetSteps()[0]
	want0 := proto.Clone(st).(*messages.StepState)
	cs := core.CloneStep(st)
	if !proto.Equal(cs, want0) {
		t.Fatal("the step copy differs from proto.Clone")
	}
	cs.Transcript = append(cs.Transcript, &messages.TranscriptEntry{Content: "new"})
	cs.Status = messages.StepStatus_STEP_STATUS_COMPLETED
	if !proto.Equal(st, want0) {
		t.Fatal("mutating the step copy changed the original")
	}
	for _, sa := range s.GetSubAgents() {
		want := proto.Clone(sa).(*messages.SubagentState)
		cs := core.CloneSubAgent(sa)
		if !proto.Equal(cs, want) {
			t.Fatal("the sub-agent copy differs from proto.Clone")
		}
		cs.Transcript = append(cs.Transcript, &messages.TranscriptEntry{Content: "new"})
		cs.AgentType = "changed"
		if !proto.Equal(sa, want) {
			t.Fatal("mutating the sub-agent copy changed the original")
		}
	}
}

// TestCloneStateCopiesScalarsWithoutReflection: copying a state's scalar fields costs no
// allocation of its own: the copy's allocations are the state, its map and its list of
// strings (a reflective copy converted each field to and from a protoreflect.Value).
func TestCloneStateCopiesScalarsWithoutReflection(t *testing.T) {
	s := &messages.SessionState{}
	fill(s.ProtoReflect(), 0) // scalars, lists of strings, maps of scalars; no messages
	allocs := testing.AllocsPerRun(100, func() { core.CloneState(s) })
	if allocs > 2 {
		t.Fatalf("CloneState of a state of scalars: %.0f allocations, want at most 2 (the state, its retired step ids; the commands map is shared)", allocs)
	}
}
