package session

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/artifact"
)

// A fork is a new session whose past is another session's, up to a step: the source's
// events through StepEndSeq(source, step_index) (StateAt's step index) are copied with
// the fork's session id (same seqs, times and payloads, but for the source's artifact
// paths, moved to the fork's workspace wherever a step reads them: forkArtifactPaths),
// session_forked follows, and
// the fork goes on from there on its own, in the same append: the step after
// step_index starts (a step that ended failed runs again, as a new attempt; after the
// last step the fork completes). Recorded LLM answers and tool results are in the
// copied events and are never made again. The source is only read.

// Fork makes this (new) session a fork of req.source_session_id at req.step_index. It is
// idempotent by command id; an existing session is refused with FAILED_PRECONDITION.
func (g *Grain) Fork(req *messages.ForkRequest, ctx cluster.GrainContext) (*messages.StartResponse, error) {
	defer g.guard(ctx, "Fork")
	defer g.updateIdle(ctx)
	if err := g.ready(ctx); err != nil {
		return nil, err
	}
	if dup, ok := forkDuplicate(g.state, req); ok {
		return dup, nil
	}
	if err := checkFork(g.state, req); err != nil {
		return nil, grainError(err)
	}
	src, err := g.readSource(req)
	if err != nil {
		return nil, err
	}
	evs, err := decideFork(g.state, req, src, g.deps.Config, g.deps.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if err := g.copyArtifacts(req.GetSourceSessionId(), src); err != nil {
		return nil, err
	}
	if err := g.commit(ctx, evs); err != nil {
		return nil, err
	}
	g.kick(ctx)
	return &messages.StartResponse{SessionId: g.id, Seq: g.state.GetSeq()}, nil
}

// forkDuplicate answers a retried Fork: this session is a fork of the same source made
// by the same command.
func forkDuplicate(s *messages.SessionState, req *messages.ForkRequest) (*messages.StartResponse, bool) {
	f := s.GetForkedFrom()
	seq, ok := s.GetCommands()[req.GetCommandId()]
	if f == nil || !ok || req.GetCommandId() == "" || seq <= f.GetSourceSeq() ||
		f.GetSourceSessionId() != req.GetSourceSessionId() || f.GetStepIndex() != req.GetStepIndex() {
		return nil, false
	}
	return &messages.StartResponse{SessionId: s.GetSessionId(), Seq: seq, Duplicate: true}, true
}

func checkFork(s *messages.SessionState, req *messages.ForkRequest) error {
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

// errStopRead ends a journal read early.
var errStopRead = errors.New("stop reading")

// readSource reads the source's events through the fork point. It reads the journal
// (bounded by JournalTimeout), as StateAt does: a fork is a rare operator action.
func (g *Grain) readSource(req *messages.ForkRequest) ([]*messages.Event, error) {
	id := req.GetSourceSessionId()
	jctx, cancel := context.WithTimeout(context.Background(), g.deps.Config.JournalTimeout)
	defer cancel()
	cur, _, err := Load(jctx, g.deps.Journal, id, 0)
	if err != nil {
		return nil, messages.ErrUnavailable("fork %s: load source session %s: %v", g.id, id, err)
	}
	if cur.GetSeq() == 0 {
		return nil, messages.ErrNotFound("fork %s: source session %q not found", g.id, id)
	}
	seq, err := StepEndSeq(cur, req.GetStepIndex())
	if err != nil {
		return nil, messages.ErrFailedPrecondition("fork %s: source session %s: %v", g.id, id, err)
	}
	evs := make([]*messages.Event, 0, seq)
	err = Events(jctx, g.deps.Journal, id, 0, func(ev *messages.Event) error {
		if ev.GetSeq() > seq {
			return errStopRead
		}
		evs = append(evs, ev)
		return nil
	})
	if err != nil && !errors.Is(err, errStopRead) {
		return nil, messages.ErrUnavailable("fork %s: read source session %s: %v", g.id, id, err)
	}
	if uint64(len(evs)) != seq {
		return nil, messages.ErrInternal("fork %s: source session %s has %d events through seq %d", g.id, id, len(evs), seq)
	}
	return evs, nil
}

// decideFork returns the fork's first append: src (the source's events through the fork
// point, in order from seq 1) re-stamped with the fork's id, session_forked, and what
// follows. s is the fork's empty state.
func decideFork(s *messages.SessionState, req *messages.ForkRequest, src []*messages.Event, cfg Config, now time.Time) ([]*messages.Event, error) {
	if len(src) == 0 {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "source session %s has no events to fork", req.GetSourceSessionId())
	}
	b := newEvents(s, req.GetCommandId(), now)
	for _, ev := range src {
		c := proto.Clone(ev).(*messages.Event)
		c.SessionId = s.GetSessionId()
		forkArtifactPaths(c, req.GetSourceSessionId(), s.GetSessionId())
		b.evs = append(b.evs, c)
	}
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_SessionForked{SessionForked: &messages.SessionForked{
			SourceSessionId: req.GetSourceSessionId(), SourceSeq: src[len(src)-1].GetSeq(), StepIndex: req.GetStepIndex(),
		}}
	})
	if err := then(b, func(f *messages.SessionState) []*messages.Event {
		return decideForkContinue(f, req.GetStepIndex(), cfg, now)
	}); err != nil {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "source session %s cannot be forked: %v", req.GetSourceSessionId(), err)
	}
	return b.evs, nil
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
	b := newEvents(s, "", now)
	if n == 0 {
		advance(b, cfg)
		return b.evs
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
		return b.evs
	}
	afterStep(b, cfg, idx)
	return b.evs
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

// copyArtifacts writes the artifacts the source had recorded by the fork point (src, its
// events through it) into this session's workspace, before the fork records anything:
// the fork's steps read them under their own id. The store keeps an artifact's newest
// content only, so one the source rewrote after the fork point is copied as it is now
// (logged); one no longer in the store is left out (logged). Any other failed copy
// refuses the fork with UNAVAILABLE; a retry copies again.
func (g *Grain) copyArtifacts(source string, src []*messages.Event) error {
	if g.deps.Artifacts == nil {
		return nil
	}
	latest := map[string]*messages.ArtifactWritten{}
	var paths []string
	for _, ev := range src {
		if a := ev.GetArtifactWritten(); a != nil {
			if _, seen := latest[a.GetPath()]; !seen {
				paths = append(paths, a.GetPath())
			}
			latest[a.GetPath()] = a
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.deps.Config.JournalTimeout)
	defer cancel()
	for _, p := range paths {
		a := latest[p]
		content, info, err := g.deps.Artifacts.Read(ctx, p)
		if errors.Is(err, artifact.ErrNotFound) {
			// Deleted from the store since (by an operator): there is nothing to copy, and
			// refusing would refuse every retry too.
			g.log.Warn("fork: an artifact of the source is no longer in the store; not copied", "path", p, "source", source)
			continue
		}
		if err != nil {
			return messages.ErrUnavailable("fork %s: copy artifact %s of session %s: %v", g.id, p, source, err)
		}
		if a.GetSha256() != "" && info.SHA256 != a.GetSha256() {
			g.log.Warn("fork: the source rewrote an artifact after the fork point; copying its current content", "path", p, "source", source)
		}
		ref := artifact.Ref{SessionID: g.id, Type: a.GetArtifactType(), Filename: a.GetFilename()}
		if _, err := g.deps.Artifacts.Write(ctx, ref, content, a.GetContentType()); err != nil {
			return messages.ErrUnavailable("fork %s: copy artifact %s of session %s: %v", g.id, p, source, err)
		}
	}
	return nil
}
