package fathom_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// stepsModel plans two steps the orchestrator runs itself, "do ALPHA" then "do BETA";
// each step answers "did" and the word of its description (slowly: a pause or a
// breakpoint lands between them); the last step's answer is the session's result.
const stepsModel = `{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"do ALPHA\"},{\"id\":\"s2\",\"type\":\"custom\",\"description\":\"do BETA\",\"dependencies\":[\"s1\"]}]}"},
 {"system_match":"FATHOM-ROLE: executor","response":"did {{find \"do ([A-Z]+)\" .Step}}","delay_ms":400}
]}`

// TestGoAPIPauseResumeTimelineStateAt: a session started with its own config runs
// with it; Pause (retried with its command id) stops it at a step boundary, Resume
// lets it finish (a second resume is ErrFailedPrecondition); Timeline lists both steps;
// StateAt at the plan's seq is the past as the journal held it then (no step ended, no
// result), at step 1 only the first step ended, and a seq the session never reached is
// ErrFailedPrecondition.
func TestGoAPIPauseResumeTimelineStateAt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: stepsModel})
	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "pr-1", Goal: "do two things", Config: &fathom.SessionConfig{MaxSteps: 7, MaxLLMCalls: 40}},
		fathom.WithCommandID("start-pr-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := n.StartSession(ctx, fathom.SessionRequest{ID: "pr-1", Goal: "do two things"}, fathom.WithCommandID("start-pr-1")); err != nil || again != id {
		t.Fatalf("retried start: %q, %v", again, err)
	}
	for range 2 {
		if err := n.Pause(ctx, id, fathom.WithCommandID("pause-1")); err != nil {
			t.Fatal(err)
		}
	}
	st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_INTERRUPTED)
	if c := st.GetConfig(); c.GetMaxSteps() != 7 || c.GetMaxLlmCalls() != 40 {
		t.Fatalf("the session's config %v, want max_steps 7 and max_llm_calls 40", c)
	}
	if err := n.Resume(ctx, id, nil, fathom.WithCommandID("resume-1")); err != nil {
		t.Fatal(err)
	}
	st = fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	if st.GetResult() != "did BETA" {
		t.Fatalf("result %q", st.GetResult())
	}
	if err := n.Resume(ctx, id, nil); !errors.Is(err, fathom.ErrFailedPrecondition) {
		t.Fatalf("a resume of a completed session = %v, want ErrFailedPrecondition", err)
	}
	tl, err := n.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.GetEntries()) != 2 || tl.GetEntries()[0].GetStepId() != "s1" || tl.GetEntries()[1].GetStepId() != "s2" || tl.GetPlanSeq() == 0 {
		t.Fatalf("timeline %v", tl)
	}
	past, err := n.StateAt(ctx, id, fathom.At{Seq: tl.GetPlanSeq()})
	if err != nil {
		t.Fatal(err)
	}
	ps := past.GetState()
	if past.GetSeq() != tl.GetPlanSeq() || ps.GetSeq() != tl.GetPlanSeq() || ps.GetResult() != "" || len(ps.GetSteps()) != 2 ||
		ps.GetSteps()[0].GetStatus() == messages.StepStatus_STEP_STATUS_COMPLETED {
		t.Fatalf("state at seq %d: seq %d, result %q, steps %v", tl.GetPlanSeq(), ps.GetSeq(), ps.GetResult(), ps.GetSteps())
	}
	one, err := n.StateAt(ctx, id, fathom.At{StepIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := one.GetState().GetSteps(); one.GetSeq() != tl.GetEntries()[0].GetEndedSeq() || s[0].GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED ||
		s[1].GetStatus() == messages.StepStatus_STEP_STATUS_COMPLETED {
		t.Fatalf("state at step 1: seq %d (step 1 ended at %d), steps %v", one.GetSeq(), tl.GetEntries()[0].GetEndedSeq(), s)
	}
	if _, err := n.StateAt(ctx, id, fathom.At{Seq: st.GetSeq() + 100}); !errors.Is(err, fathom.ErrFailedPrecondition) {
		t.Fatalf("state at a seq never reached = %v, want ErrFailedPrecondition", err)
	}
}

// TestGoAPIBreakpointAndResumeWithAModifiedStep: a breakpoint before step s2 stops the
// session there; Resume with a modified s2 runs the edited step; ClearBreakpoints
// removes the breakpoints.
func TestGoAPIBreakpointAndResumeWithAModifiedStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: stepsModel})
	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "bp-1", Goal: "do two things"})
	if err != nil {
		t.Fatal(err)
	}
	bp, err := n.SetBreakpoint(ctx, id, &fathom.Breakpoint{StepId: "s2"}, fathom.WithCommandID("bp-s2"))
	if err != nil || bp == "" {
		t.Fatalf("set breakpoint: %q, %v", bp, err)
	}
	if _, err := n.SetBreakpoint(ctx, id, &fathom.Breakpoint{Id: "other", StepId: "s9"}); err != nil {
		t.Fatal(err)
	}
	st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_INTERRUPTED)
	if st.GetInterrupt().GetStepId() != "s2" || st.GetInterrupt().GetBreakpointId() != bp {
		t.Fatalf("interrupt %v, want before s2 by %s", st.GetInterrupt(), bp)
	}
	if err := n.ClearBreakpoints(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := n.State(ctx, id); err != nil || len(st.GetBreakpoints()) != 0 {
		t.Fatalf("breakpoints after ClearBreakpoints: %v, %v", st.GetBreakpoints(), err)
	}
	if err := n.Resume(ctx, id, &fathom.PlanStep{Id: "s2", Type: "no-such-type"}); !errors.Is(err, fathom.ErrInvalidArgument) {
		t.Fatalf("resume with an unknown step type = %v, want ErrInvalidArgument", err)
	}
	if err := n.Resume(ctx, id, &fathom.PlanStep{Id: "s2", Description: "do GAMMA"}); err != nil {
		t.Fatal(err)
	}
	if st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED); st.GetResult() != "did GAMMA" {
		t.Fatalf("result %q, want the edited step's", st.GetResult())
	}
}

// TestGoAPIForkWithAModifiedStepRunsTheEditedStep: a fork of a completed session after
// its first step, with s2's description edited, replays s1 and runs the edited s2 (the
// source's s2 never runs in it); session_forked records the merged step; a retry with
// the fork's command id answers the same fork; a step that already ran at the fork point
// is ErrFailedPrecondition, one the plan lacks ErrInvalidArgument.
func TestGoAPIForkWithAModifiedStepRunsTheEditedStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: stepsModel})
	src, err := n.StartSession(ctx, fathom.SessionRequest{ID: "src-1", Goal: "do two things"})
	if err != nil {
		t.Fatal(err)
	}
	if st := fathomtest.WaitStatus(ctx, t, n, src, messages.SessionStatus_SESSION_STATUS_COMPLETED); st.GetResult() != "did BETA" {
		t.Fatalf("source result %q", st.GetResult())
	}
	req := fathom.ForkRequest{NewID: "fork-1", At: fathom.At{StepIndex: 1}, ModifiedStep: &fathom.PlanStep{Id: "s2", Description: "do DELTA"}}
	id, err := n.Fork(ctx, src, req, fathom.WithCommandID("fork-1"))
	if err != nil || id != "fork-1" {
		t.Fatalf("fork: %q, %v", id, err)
	}
	st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	if st.GetResult() != "did DELTA" {
		t.Fatalf("the fork's result %q, want the edited step's", st.GetResult())
	}
	var ran []string // the steps the fork ran itself, after the copied events
	forked := false
	for _, ev := range waitEvent(ctx, t, n, id, 0, "session_completed") {
		switch {
		case ev.GetSessionForked() != nil:
			forked = true
		case forked && ev.GetStepCompleted() != nil:
			ran = append(ran, ev.GetStepCompleted().GetStepId()+": "+ev.GetStepCompleted().GetOutput())
		}
	}
	if strings.Join(ran, ",") != "s2: did DELTA" {
		t.Fatalf("the fork ran %v, want the edited s2 only", ran)
	}
	if m := st.GetForkedFrom().GetModifiedStep(); m.GetId() != "s2" || m.GetDescription() != "do DELTA" || m.GetType() != "custom" {
		t.Fatalf("session_forked's modified step %v", m)
	}
	if again, err := n.Fork(ctx, src, req, fathom.WithCommandID("fork-1")); err != nil || again != id {
		t.Fatalf("retried fork: %q, %v", again, err)
	}
	_, err = n.Fork(ctx, src, fathom.ForkRequest{NewID: "fork-2", At: fathom.At{StepIndex: 1}, ModifiedStep: &fathom.PlanStep{Id: "s1", Description: "do X"}})
	if !errors.Is(err, fathom.ErrFailedPrecondition) {
		t.Fatalf("a fork modifying a step that ran = %v, want ErrFailedPrecondition", err)
	}
	_, err = n.Fork(ctx, src, fathom.ForkRequest{NewID: "fork-3", At: fathom.At{StepIndex: 1}, ModifiedStep: &fathom.PlanStep{Id: "s7", Description: "do X"}})
	if !errors.Is(err, fathom.ErrInvalidArgument) {
		t.Fatalf("a fork modifying a step the plan lacks = %v, want ErrInvalidArgument", err)
	}
	if st, err := n.State(ctx, src); err != nil || st.GetResult() != "did BETA" {
		t.Fatalf("the source changed: %q, %v", st.GetResult(), err)
	}
}

// TestGoAPIErrorsAreTypedValues: every call on an unknown session, and on another
// tenant's session, is errors.Is ErrNotFound (the same answer); a viewer's write is
// ErrPermissionDenied; bad arguments are ErrInvalidArgument; the grain's error is still
// reachable with errors.As.
func TestGoAPIErrorsAreTypedValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: stepsModel})
	alice := auth.WithPrincipal(ctx, auth.Principal{Subject: "alice", Tenant: "acme"})
	bob := auth.WithPrincipal(ctx, auth.Principal{Subject: "bob", Tenant: "globex", Roles: []auth.Role{auth.RoleOperator}})
	viewer := auth.WithPrincipal(ctx, auth.Principal{Subject: "vic", Tenant: "acme", Roles: []auth.Role{auth.RoleViewer}})
	id, err := n.StartSession(alice, fathom.SessionRequest{ID: "acme-1", Goal: "do two things"})
	if err != nil {
		t.Fatal(err)
	}
	fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)

	calls := map[string]func(ctx context.Context, id string) error{
		"State":    func(c context.Context, id string) error { _, err := n.State(c, id); return err },
		"Timeline": func(c context.Context, id string) error { _, err := n.Timeline(c, id); return err },
		"StateAt": func(c context.Context, id string) error {
			_, err := n.StateAt(c, id, fathom.At{StepIndex: 1})
			return err
		},
		"Pause":  func(c context.Context, id string) error { return n.Pause(c, id) },
		"Resume": func(c context.Context, id string) error { return n.Resume(c, id, nil) },
		"SetBreakpoint": func(c context.Context, id string) error {
			_, err := n.SetBreakpoint(c, id, &fathom.Breakpoint{})
			return err
		},
		"ClearBreakpoints": func(c context.Context, id string) error { return n.ClearBreakpoints(c, id) },
		"Fork": func(c context.Context, id string) error {
			_, err := n.Fork(c, id, fathom.ForkRequest{At: fathom.At{StepIndex: 1}})
			return err
		},
		"Send":      func(c context.Context, id string) error { _, err := n.Send(c, id, "and?"); return err },
		"Answer":    func(c context.Context, id string) error { return n.Answer(c, id, "s1", `"yes"`) },
		"Approve":   func(c context.Context, id string) error { return n.Approve(c, id, "s1") },
		"Edit":      func(c context.Context, id string) error { return n.Edit(c, id, "s1", map[string]any{"a": 1}) },
		"Reject":    func(c context.Context, id string) error { return n.Reject(c, id, "s1", "no") },
		"Cancel":    func(c context.Context, id string) error { return n.Cancel(c, id, "stop") },
		"Delete":    func(c context.Context, id string) error { return n.Delete(c, id) },
		"Artifacts": func(c context.Context, id string) error { _, err := n.Artifacts(c, id); return err },
		"ReadArtifact": func(c context.Context, id string) error {
			_, err := n.ReadArtifact(c, id, id+"/research/notes.md")
			return err
		},
	}
	for name, call := range calls {
		if err := call(ctx, "no-such-session"); !errors.Is(err, fathom.ErrNotFound) {
			t.Errorf("%s of an unknown session = %v, want ErrNotFound", name, err)
		}
		if err := call(bob, id); !errors.Is(err, fathom.ErrNotFound) {
			t.Errorf("%s of another tenant's session = %v, want ErrNotFound", name, err)
		}
	}
	var ge *cluster.GrainErrorResponse
	if err := n.Pause(bob, id); !errors.As(err, &ge) || ge.Reason != messages.ErrorReason_NOT_FOUND.String() {
		t.Errorf("the grain's error is not reachable with errors.As: %v", err)
	}
	if err := n.Pause(viewer, id); !errors.Is(err, fathom.ErrPermissionDenied) {
		t.Errorf("a viewer's pause = %v, want ErrPermissionDenied", err)
	}
	if _, err := n.State(viewer, id); err != nil {
		t.Errorf("a viewer's read: %v", err)
	}
	for what, err := range map[string]error{
		"an empty goal":        second(n.StartSession(ctx, fathom.SessionRequest{})),
		"a bidi session id":    second(n.StartSession(ctx, fathom.SessionRequest{ID: "\u202eevil", Goal: "x"})),
		"an unknown status":    second(n.List(ctx, fathom.ListOptions{Status: "sleeping"})),
		"a limit over 1,000":   second(n.List(ctx, fathom.ListOptions{Limit: 5000})),
		"a forged cursor":      second(n.List(ctx, fathom.ListOptions{Cursor: "bm9wZQ"})),
		"another's artifact":   second(n.ReadArtifact(ctx, id, "other/research/notes.md")),
		"a nil breakpoint":     second(n.SetBreakpoint(ctx, id, nil)),
		"a bad answer to Edit": n.Edit(ctx, id, "s1", func() {}),
	} {
		if !errors.Is(err, fathom.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		}
	}
	if err := n.Delete(ctx, "no-such-session"); !errors.Is(err, fathom.ErrNotFound) {
		t.Errorf("Delete of an unknown session as the program = %v, want ErrNotFound", err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestGoAPIListFiltersAndPages: List pages a principal's own tenant's sessions with
// cursors, filters by status and goal, and never shows another tenant's; the program
// sees every tenant's and may pick one.
func TestGoAPIListFiltersAndPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: stepsModel})
	alice := auth.WithPrincipal(ctx, auth.Principal{Subject: "alice", Tenant: "acme"})
	bob := auth.WithPrincipal(ctx, auth.Principal{Subject: "bob", Tenant: "globex"})
	for _, s := range []struct {
		ctx      context.Context
		id, goal string
	}{{alice, "a-1", "first alpha"}, {alice, "a-2", "second beta"}, {alice, "a-3", "third alpha"}, {bob, "b-1", "bob's alpha"}} {
		if _, err := n.StartSession(s.ctx, fathom.SessionRequest{ID: s.id, Goal: s.goal}); err != nil {
			t.Fatal(err)
		}
		fathomtest.WaitStatus(ctx, t, n, s.id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	}
	ids := func(l fathom.SessionList) string {
		var out []string
		for _, s := range l.Sessions {
			out = append(out, s.SessionID)
		}
		return strings.Join(out, ",")
	}
	first, err := n.List(alice, fathom.ListOptions{Limit: 2})
	if err != nil || ids(first) != "a-3,a-2" || first.NextCursor == "" {
		t.Fatalf("alice's first page: %s (cursor %q), %v", ids(first), first.NextCursor, err)
	}
	next, err := n.List(alice, fathom.ListOptions{Limit: 2, Cursor: first.NextCursor})
	if err != nil || ids(next) != "a-1" || next.NextCursor != "" {
		t.Fatalf("alice's second page: %s (cursor %q), %v", ids(next), next.NextCursor, err)
	}
	if l, err := n.List(alice, fathom.ListOptions{GoalContains: "ALPHA", Status: "completed"}); err != nil || ids(l) != "a-3,a-1" {
		t.Fatalf("alice's alpha sessions: %s, %v", ids(l), err)
	}
	if l, err := n.List(alice, fathom.ListOptions{Tenant: "globex"}); err != nil || ids(l) != "a-3,a-2,a-1" {
		t.Fatalf("alice picking another tenant: %s, %v (want her own only)", ids(l), err)
	}
	if l, err := n.List(bob, fathom.ListOptions{}); err != nil || ids(l) != "b-1" {
		t.Fatalf("bob's list: %s, %v", ids(l), err)
	}
	if l, err := n.List(ctx, fathom.ListOptions{}); err != nil || ids(l) != "b-1,a-3,a-2,a-1" {
		t.Fatalf("the program's list: %s, %v", ids(l), err)
	}
	if l, err := n.List(ctx, fathom.ListOptions{Tenant: "globex"}); err != nil || ids(l) != "b-1" || l.Sessions[0].Tenant != "globex" {
		t.Fatalf("the program's list of globex: %s, %v", ids(l), err)
	}
}

// TestGoAPIApproveEditReject: a call waiting for approval runs with the edited args
// after Edit (a retry with the same command id is a no-op), never runs after Reject,
// and runs as asked after Approve.
func TestGoAPIApproveEditReject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var refunded []string
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"refund it\"}]}"},
		{"tool_match":".","response":"done: {{.Tool}}"},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"refund","arguments":"{\"order\":\"42\"}"}]}]}`, Edit: func(c *fathom.Config) {
		c.Tools = []tools.Tool{tools.MustNew("refund", "Refunds an order.", tools.SandboxNone, func(_ context.Context, a struct {
			Order string `json:"order"`
		}) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			refunded = append(refunded, a.Order)
			return "refunded " + a.Order, nil
		})}
		c.ApprovalTools = []string{"refund"}
	}})
	start := func(id string) {
		t.Helper()
		if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: id, Goal: "refund order 42"}); err != nil {
			t.Fatal(err)
		}
		fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	}
	start("edit-1")
	for range 2 {
		if err := n.Edit(ctx, "edit-1", "s", map[string]string{"order": "43"}, fathom.WithCommandID("edit-1/decide")); err != nil {
			t.Fatal(err)
		}
	}
	if st := fathomtest.WaitStatus(ctx, t, n, "edit-1", messages.SessionStatus_SESSION_STATUS_COMPLETED); st.GetResult() != "done: refunded 43" {
		t.Fatalf("edited: result %q", st.GetResult())
	}
	start("reject-1")
	if err := n.Reject(ctx, "reject-1", "s", "not this one"); err != nil {
		t.Fatal(err)
	}
	if st := fathomtest.WaitStatus(ctx, t, n, "reject-1", messages.SessionStatus_SESSION_STATUS_COMPLETED); !strings.Contains(st.GetResult(), "not this one") {
		t.Fatalf("rejected: result %q", st.GetResult())
	}
	start("approve-1")
	if err := n.Approve(ctx, "approve-1", "s"); err != nil {
		t.Fatal(err)
	}
	if st := fathomtest.WaitStatus(ctx, t, n, "approve-1", messages.SessionStatus_SESSION_STATUS_COMPLETED); st.GetResult() != "done: refunded 42" {
		t.Fatalf("approved: result %q", st.GetResult())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(refunded, ",") != "43,42" {
		t.Fatalf("refunds %v, want 43 (edited, once) then 42 (approved)", refunded)
	}
}

// TestGoAPIArtifacts: a demo-model session's artifacts are listed and read through the
// Go API; another tenant reads none (ErrNotFound), a missing path is ErrNotFound.
func TestGoAPIArtifacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	alice := auth.WithPrincipal(ctx, auth.Principal{Subject: "alice", Tenant: "acme"})
	bob := auth.WithPrincipal(ctx, auth.Principal{Subject: "bob", Tenant: "globex"})
	id, err := n.StartSession(alice, fathom.SessionRequest{ID: "art-1", Goal: "Explain event sourcing in one sentence"})
	if err != nil {
		t.Fatal(err)
	}
	fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	arts, err := n.Artifacts(alice, id)
	if err != nil {
		t.Fatal(err)
	}
	var notes *messages.ArtifactWritten
	for _, a := range arts {
		if a.GetPath() == id+"/research/notes.md" {
			notes = a
		}
	}
	if notes == nil {
		t.Fatalf("no research/notes.md among the artifacts %v", arts)
	}
	a, err := n.ReadArtifact(alice, id, notes.GetPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(a.Content), "# Research notes") || a.SHA256 != notes.GetSha256() || a.ContentType == "" {
		t.Fatalf("read %s: %q (%s, sha256 %s, want %s)", notes.GetPath(), a.Content, a.ContentType, a.SHA256, notes.GetSha256())
	}
	if _, err := n.ReadArtifact(bob, id, notes.GetPath()); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("bob reads alice's artifact: %v, want ErrNotFound", err)
	}
	if _, err := n.ReadArtifact(alice, id, id+"/research/none.md"); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("a missing artifact: %v, want ErrNotFound", err)
	}
}
