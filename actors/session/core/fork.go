package core

import (
	"errors"
	"fmt"
	"github.com/fathom-agents/fathom/auth"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fathom-agents/fathom/messages"
)

// ForkDuplicate answers a retried Fork: this session is a fork of the same source made
// by the same command.
func ForkDuplicate(s *messages.SessionState, req *messages.ForkRequest) (*messages.StartResponse, bool) {
	f := s.GetForkedFrom()
	seq, ok := s.GetCommands()[req.GetCommandId()]
	if f == nil || !ok || req.GetCommandId() == "" || seq <= f.GetSourceSeq() ||
		f.GetSourceSessionId() != req.GetSourceSessionId() || f.GetStepIndex() != req.GetStepIndex() ||
		(req.GetSeq() != 0 && f.GetSourceSeq() != req.GetSeq()) {
		return nil, false
	}
	return &messages.StartResponse{SessionId: s.GetSessionId(), Seq: seq, Duplicate: true}, true
}

// CheckFork refuses a fork of s that req may not make: a bad command id or an
// unusable source.
func CheckFork(s *messages.SessionState, req *messages.ForkRequest) error {
	if err := validateCommandID(req.GetCommandId()); err != nil {
		return err
	}
	switch {
	case req.GetSourceSessionId() == "":
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "source_session_id is required")
	case req.GetSourceSessionId() == s.GetSessionId():
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "a session cannot be forked into itself")
	case s.GetSeq() != 0:
		return refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s already exists (%s): a fork needs a new session id", s.GetSessionId(), s.GetStatus())
	}
	return nil
}

// DecideFork returns the fork's first append: src (the source's events through the fork
// point, in order from seq 1) re-stamped with the fork's id, session_forked, and what
// follows. s is the fork's empty state.
func DecideFork(s *messages.SessionState, req *messages.ForkRequest, src []*messages.Event, cfg Config, now time.Time) ([]*messages.Event, error) {
	if len(src) == 0 {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "source session %s has no events to fork", req.GetSourceSessionId())
	}
	b := newEvents(s, req.GetCommandId(), now, cfg)
	for _, ev := range src {
		c := proto.Clone(ev).(*messages.Event)
		c.SessionId = s.GetSessionId()
		forkArtifactPaths(c, req.GetSourceSessionId(), s.GetSessionId())
		b.Evs = append(b.Evs, c)
	}
	tenant, owner := sourceOwner(src)
	if c := req.GetCaller(); c != nil {
		owner = c.GetSubject()
	}
	modified, err := forkModifiedStep(s, b.Evs, req.GetModifiedStep(), cfg)
	if err != nil {
		return nil, err
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionForked{SessionForked: &messages.SessionForked{
			SourceSessionId: req.GetSourceSessionId(), SourceSeq: src[len(src)-1].GetSeq(), StepIndex: req.GetStepIndex(),
			Tenant: tenant, Owner: owner, ModifiedStep: modified,
		}}
	})
	var boundary error
	if err := then(b, func(f *messages.SessionState) []*messages.Event {
		if req.GetSeq() != 0 {
			if boundary = forkBoundary(f, req.GetSeq()); boundary != nil {
				return nil
			}
			return decideForkContinueAt(f, cfg, now)
		}
		return decideForkContinue(f, req.GetStepIndex(), cfg, now)
	}); err != nil || boundary != nil {
		err = errors.Join(err, boundary)
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "source session %s cannot be forked: %v", req.GetSourceSessionId(), err)
	}
	return b.Evs, nil
}

// forkModifiedStep merges a fork request's modified step m (nil: none) into the step
// with its id of the fork's plan at the fork point (s, the fork's empty state, folded
// with the copied events evs): a step that has yet to run there, pending or failed (a
// failed step runs again). The merged step is checked as resume checks one.
func forkModifiedStep(s *messages.SessionState, evs []*messages.Event, m *messages.PlanStep, cfg Config) (*messages.PlanStep, error) {
	if m == nil {
		return nil, nil
	}
	f := CloneState(s)
	for _, ev := range evs {
		if err := Apply(f, ev); err != nil {
			return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "fold the fork's copied events: %v", err)
		}
	}
	for i, st := range f.GetSteps() {
		if st.GetStep().GetId() != m.GetId() {
			continue
		}
		if st.GetStatus() != messages.StepStatus_STEP_STATUS_PENDING && st.GetStatus() != messages.StepStatus_STEP_STATUS_FAILED {
			return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "modified_step %q has already run at the fork point (%s): only a step that has yet to run can be modified", m.GetId(), st.GetStatus())
		}
		return mergeModifiedStep(planSteps(f), uint32(i), m, cfg.Registry())
	}
	return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step %q is not a step of the plan at the fork point", m.GetId())
}

// sourceOwner is the tenant and owner of a fork's source, from its events: its
// session_started's, or its own session_forked's when it is a fork itself. A fork keeps
// its source's tenant.
func sourceOwner(src []*messages.Event) (tenant, owner string) {
	for _, ev := range src {
		switch p := ev.GetPayload().(type) {
		case *messages.Event_SessionStarted:
			tenant, owner = p.SessionStarted.GetTenant(), p.SessionStarted.GetOwner()
		case *messages.Event_SessionForked:
			if p.SessionForked.GetTenant() != "" {
				tenant, owner = p.SessionForked.GetTenant(), p.SessionForked.GetOwner()
			}
		}
	}
	if tenant == "" {
		tenant = auth.DefaultTenant
	}
	return tenant, owner
}

// forkBoundary refuses a fork at source seq seq (f is the fork's folded state) unless a
// fork can go on from there: the turn's plan_created, the end of a step, or a completed
// turn (the fork is completed too, and takes follow-up messages).
func forkBoundary(f *messages.SessionState, seq uint64) error {
	if f.GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED || (f.GetPlanSeq() == seq && f.GetPending() == nil) {
		return nil
	}
	if _, ok := stepEndedAt(f, seq); ok {
		return nil
	}
	return fmt.Errorf("seq %d is not a point a fork can go on from (plan_created, the end of a step, or session_completed of a turn)", seq)
}

// decideForkContinueAt is decideForkContinue for a fork made at a source seq.
func decideForkContinueAt(s *messages.SessionState, cfg Config, now time.Time) []*messages.Event {
	if s.GetForkedFrom().GetSourceSeq() == s.GetPlanSeq() {
		return decideForkContinue(s, 0, cfg, now)
	}
	return decideForkContinue(s, 1, cfg, now) // any n > 0: the step is found by its end seq
}

// stepEndedAt is the index of the step whose current attempt ended at seq.
func stepEndedAt(s *messages.SessionState, seq uint64) (uint32, bool) {
	for i, st := range s.GetSteps() {
		if st.GetEndedSeq() == seq {
			return uint32(i), true
		}
	}
	return 0, false
}

// decideForkContinue is what a fork made after its first n steps does next: the step
// after them starts (a last step that failed runs again), or the session completes
// after the last step. A retry already due is left to its timer.
func decideForkContinue(s *messages.SessionState, n uint32, cfg Config, now time.Time) []*messages.Event {
	if Terminal(s) || s.GetPending() != nil || len(s.GetPendingTools()) > 0 || s.GetRetryAtUnixNano() != 0 ||
		s.GetInterrupt() != nil || len(s.GetAwaiting()) > 0 {
		return nil
	}
	b := newEvents(s, "", now, cfg)
	if n == 0 {
		advance(b, cfg)
		return b.Evs
	}
	// The n-th step of the source's list as it is now ended at the fork point; a later
	// revision may have moved it, so it is found by that seq, not by n.
	idx, ok := stepEndedAt(s, s.GetForkedFrom().GetSourceSeq())
	if !ok {
		return nil
	}
	st := s.GetSteps()[idx]
	if st.GetStatus() == messages.StepStatus_STEP_STATUS_FAILED {
		startAnyStep(b, cfg, st.GetStep(), idx, st.GetAttempt()+1, "")
		return b.Evs
	}
	afterStep(b, cfg, idx)
	return b.Evs
}

// forkArtifactPaths moves every artifact path a copied event holds from the source's
// workspace to the fork's ("{source}/research/notes.md" → "{fork}/research/notes.md"),
// where copyArtifacts put the files: the recorded paths (artifact_written, hand-off
// artifact lists) and the paths inside every text a fork's step reads (model answers and
// tool calls in transcripts, tool results, hand-off summaries and step outputs, task
// briefs, plan steps, questions and answers, the rolling summary, errors). A fork's
// steps see only their own workspace, as if the work had been done there; a path of the
// source's would be refused ("belongs to another session"). Identities are kept as
// recorded (session, call, command and request ids, idempotency keys: the copied
// history's keys stay the source's).
func forkArtifactPaths(ev *messages.Event, source, fork string) {
	forkStrings(ev.ProtoReflect(), func(text string) string { return forkText(text, source, fork) })
}

// forkKeptFields are the string fields forkArtifactPaths leaves as recorded: they
// identify, they are never read as text.
var forkKeptFields = map[protoreflect.Name]bool{
	"session_id": true, "source_session_id": true, "command_id": true, "call_id": true, "tool_call_id": true,
	"idempotency_key": true, "request_id": true, "sha256": true,
}

// forkStrings replaces every string of m (nested messages, lists and map values
// included, forkKeptFields left out) with move's result.
func forkStrings(m protoreflect.Message, move func(string) string) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if forkKeptFields[fd.Name()] {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				switch fd.Kind() {
				case protoreflect.StringKind:
					l.Set(i, protoreflect.ValueOfString(move(l.Get(i).String())))
				case protoreflect.MessageKind, protoreflect.GroupKind:
					forkStrings(l.Get(i).Message(), move)
				}
			}
		case fd.IsMap():
			mp := v.Map()
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				switch fd.MapValue().Kind() {
				case protoreflect.StringKind:
					mp.Set(k, protoreflect.ValueOfString(move(mv.String())))
				case protoreflect.MessageKind, protoreflect.GroupKind:
					forkStrings(mv.Message(), move)
				}
				return true
			})
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(move(v.String())))
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			forkStrings(v.Message(), move)
		}
		return true
	})
}

// forkText rewrites the source's workspace prefix ("{source}/") to the fork's wherever
// it starts a path in text: at the start or after a character that cannot be part of a
// session id (so "{source}/" inside "x{source}/" or "{source}-2/" is left alone).
func forkText(text, source, fork string) string {
	old := source + "/"
	if source == "" || !strings.Contains(text, old) {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, old)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		if i == 0 || !sessionIDByte(text[i-1]) {
			b.WriteString(fork + "/")
		} else {
			b.WriteString(old)
		}
		text = text[i+len(old):]
	}
}

// sessionIDByte reports whether c may be part of a session id (letters, digits, "-",
// "_", ".", and any byte of a multi-byte character).
func sessionIDByte(c byte) bool {
	return c >= 0x80 || c == '-' || c == '_' || c == '.' ||
		(c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
