package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fathom-agents/fathom/auth"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
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
	if err := authorizeNew(g.deps, g.state, g.id, req.GetCaller()); err != nil {
		return nil, err
	}
	if dup, ok := core.ForkDuplicate(g.state, req); ok {
		return dup, nil
	}
	if err := messages.ValidateSessionID(g.id); err != nil {
		return nil, sessiongrain.ErrInvalidArgument("%v", err)
	}
	if err := core.CheckFork(g.state, req); err != nil {
		return nil, grainError(err)
	}
	src, err := readSource(g.deps, g.id, req)
	if err != nil {
		return nil, err
	}
	evs, next, err := core.Decide(g.state, core.ForkInput{Req: req, Source: src}, g.deps.Config.Core, g.deps.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if err := admitStart(g.deps.Quotas, g.state, evs); err != nil {
		return nil, err
	}
	if err := copyArtifacts(g.deps, g.id, g.log, req.GetSourceSessionId(), src, tenantIn(evs)); err != nil {
		return nil, err
	}
	if err := g.commit(ctx, evs, next); err != nil {
		return nil, err
	}
	g.kick(ctx)
	return &messages.StartResponse{SessionId: g.id, Seq: g.state.GetSeq()}, nil
}

// errStopRead ends a journal read early.
var errStopRead = errors.New("stop reading")

// readSource reads the source's events through the fork point. It reads the journal
// (bounded by JournalTimeout), as StateAt does: a fork is a rare operator action.
func readSource(d *Deps, fork string, req *messages.ForkRequest) ([]*messages.Event, error) {
	id := req.GetSourceSessionId()
	jctx, cancel := context.WithTimeout(context.Background(), d.Config.JournalTimeout)
	defer cancel()
	cur, _, err := replay.Load(jctx, d.Journal, id, 0)
	if err != nil {
		return nil, readError(err, fmt.Sprintf("fork %s: load source session %s", fork, id))
	}
	if cur.GetSeq() == 0 || (req.GetCaller() != nil &&
		d.Config.Tenancy.Allowed(auth.FromMessage(req.GetCaller()), auth.Read, cur.GetTenant(), cur.GetOwner()) != auth.Allow) {
		return nil, sessiongrain.ErrNotFound("fork %s: source session %q not found", fork, id)
	}
	seq, err := core.ForkSeq(cur, req)
	if err != nil {
		return nil, sessiongrain.ErrFailedPrecondition("fork %s: source session %s: %v", fork, id, err)
	}
	evs := make([]*messages.Event, 0, seq)
	err = replay.Events(jctx, d.Journal, id, 0, func(ev *messages.Event) error {
		if ev.GetSeq() > seq {
			return errStopRead
		}
		evs = append(evs, ev)
		return nil
	})
	if err != nil && !errors.Is(err, errStopRead) {
		return nil, readError(err, fmt.Sprintf("fork %s: read source session %s", fork, id))
	}
	if uint64(len(evs)) != seq {
		return nil, sessiongrain.ErrInternal("fork %s: source session %s has %d events through seq %d", fork, id, len(evs), seq)
	}
	return evs, nil
}

// copyArtifacts writes the artifacts the source had recorded by the fork point (src, its
// events through it) into this session's workspace, before the fork records anything:
// the fork's steps read them under their own id. The store keeps an artifact's newest
// content only, so one the source rewrote after the fork point is copied as it is now
// (logged); one no longer in the store is left out (logged). Any other failed copy
// refuses the fork with UNAVAILABLE; a retry copies again. The copies are read from the
// source's tenant and written to the fork's, tenant.
func copyArtifacts(d *Deps, fork string, log *slog.Logger, source string, src []*messages.Event, tenant string) error {
	if d.Artifacts == nil {
		return nil
	}
	srcTenant := tenantIn(src)
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
	ctx, cancel := context.WithTimeout(context.Background(), d.Config.JournalTimeout)
	defer cancel()
	for _, p := range paths {
		a := latest[p]
		content, info, err := d.Artifacts.Read(ctx, srcTenant, p)
		if errors.Is(err, artifact.ErrNotFound) {
			// Deleted from the store since (by an operator): there is nothing to copy, and
			// refusing would refuse every retry too.
			log.Warn("fork: an artifact of the source is no longer in the store; not copied", "path", p, "source", source)
			continue
		}
		if err != nil {
			return sessiongrain.ErrUnavailable("fork %s: copy artifact %s of session %s: %v", fork, p, source, err)
		}
		if a.GetSha256() != "" && info.SHA256 != a.GetSha256() {
			log.Warn("fork: the source rewrote an artifact after the fork point; copying its current content", "path", p, "source", source)
		}
		ref := artifact.Ref{Tenant: tenant, SessionID: fork, Type: a.GetArtifactType(), Filename: a.GetFilename()}
		_, err = d.Artifacts.Write(ctx, ref, content, a.GetContentType())
		var qe *artifact.QuotaError
		if errors.As(err, &qe) { // the tenant's max_artifact_bytes: retrying today is no use
			return ErrResourceExhausted(fmt.Sprintf("fork %s: copy artifact %s of session %s: %v", fork, p, source, err), 0)
		}
		if err != nil {
			return sessiongrain.ErrUnavailable("fork %s: copy artifact %s of session %s: %v", fork, p, source, err)
		}
	}
	return nil
}

// tenantIn returns the tenant a session's events name: session_started's, or a later
// session_forked's (a fork's own); auth.DefaultTenant when they name none (sessions from
// before tenancy).
func tenantIn(evs []*messages.Event) string {
	tenant := ""
	for _, ev := range evs {
		if s := ev.GetSessionStarted(); s != nil {
			tenant = s.GetTenant()
		}
		if f := ev.GetSessionForked(); f != nil && f.GetTenant() != "" {
			tenant = f.GetTenant()
		}
	}
	if tenant == "" {
		return auth.DefaultTenant
	}
	return tenant
}

// tenantOf returns session s's tenant, auth.DefaultTenant for a session from before
// tenancy: the stores keep its artifacts and vectors under it.
func tenantOf(s *messages.SessionState) string {
	if t := s.GetTenant(); t != "" {
		return t
	}
	return auth.DefaultTenant
}
