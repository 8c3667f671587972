package session_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/local"
)

// TestForkContinuesIndependently forks a finished session after its first step: the
// fork's state at the fork point is the source's (but for the session id), it runs the
// remaining steps on its own without making the recorded calls again, and the source is
// left as it was.
func TestForkContinuesIndependently(t *testing.T) {
	ex := &executions{}
	sc := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"look\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"write\"},{\"id\":\"c\",\"type\":\"custom\",\"description\":\"check\"}]}"},
		{"tool_match":"value of","response":"looked: {{.Tool}}"},
		{"match":"Step: look","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}} #{{.N}}"}]}`)
	h := startHarness(t, harnessOpts{script: sc, tools: testToolsWith(t, ex, nil)})
	if _, err := h.start("src", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	srcEvs := waitTerminal(t, h.j, "src", 20*time.Second)
	mustComplete(t, srcEvs)
	srcAt1, err := h.node.Session("src").StateAt(&messages.StateAtRequest{StepIndex: 1}, call())
	if err != nil {
		t.Fatal(err)
	}

	f := h.node.Session("fork")
	if _, err := f.Fork(&messages.ForkRequest{CommandId: "f1", SourceSessionId: "src", StepIndex: 4}, call()); !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("fork past the plan: err = %v, want FAILED_PRECONDITION", err)
	}
	if _, err := f.Fork(&messages.ForkRequest{CommandId: "f1", SourceSessionId: "nobody", StepIndex: 1}, call()); !sessiongrain.IsNotFound(err) {
		t.Fatalf("fork of an unknown session: err = %v, want NOT_FOUND", err)
	}
	resp, err := f.Fork(&messages.ForkRequest{CommandId: "f1", SourceSessionId: "src", StepIndex: 1}, call())
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSessionId() != "fork" || resp.GetDuplicate() {
		t.Fatalf("fork answer %v", resp)
	}
	if again, err := f.Fork(&messages.ForkRequest{CommandId: "f1", SourceSessionId: "src", StepIndex: 1}, call()); err != nil || !again.GetDuplicate() {
		t.Fatalf("retried fork: %v, %v; want a duplicate", again, err)
	}
	if _, err := f.Fork(&messages.ForkRequest{CommandId: "f2", SourceSessionId: "src", StepIndex: 0}, call()); !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("fork into an existing session: err = %v, want FAILED_PRECONDITION", err)
	}

	forkEvs := waitTerminal(t, h.j, "fork", 20*time.Second)
	mustComplete(t, forkEvs)
	point := srcAt1.GetState().GetSeq()
	for i, ev := range forkEvs[:point] { // the copied past: the source's events, re-stamped
		want := proto.Clone(srcEvs[i]).(*messages.Event)
		want.SessionId = "fork"
		if !proto.Equal(ev, want) {
			t.Fatalf("fork event %d = %v, want %v", i+1, ev, want)
		}
	}
	if sf := forkEvs[point].GetSessionForked(); sf.GetSourceSessionId() != "src" || sf.GetSourceSeq() != point || sf.GetStepIndex() != 1 {
		t.Fatalf("event after the copy: %v", forkEvs[point])
	}
	forkAt1, err := f.StateAt(&messages.StateAtRequest{StepIndex: 1}, call())
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(srcAt1.GetState()).(*messages.SessionState)
	want.SessionId = "fork"
	if !proto.Equal(forkAt1.GetState(), want) {
		t.Fatalf("fork's state at the fork point:\n got %v\nwant %v", forkAt1.GetState(), want)
	}
	fs, err := h.state("fork")
	if err != nil || fs.GetState().GetForkedFrom().GetSourceSessionId() != "src" {
		t.Fatalf("fork state: %v, %v", fs, err)
	}
	// The fork ran steps b and c itself (new LLM calls), never step a's calls again.
	if ex.get("src/a/tool-1") != 1 || count(forkEvs[point:], "tool_called") != 0 || count(forkEvs[point:], "step_started") != 2 ||
		count(forkEvs[point:], "llm_requested") != 2 {
		t.Fatalf("after the fork point: lookup ran %d times; %d tool_called, %d step_started, %d llm_requested",
			ex.get("src/a/tool-1"), count(forkEvs[point:], "tool_called"), count(forkEvs[point:], "step_started"), count(forkEvs[point:], "llm_requested"))
	}
	if a, b := forkEvs[len(forkEvs)-1].GetSessionCompleted().GetResult(), srcEvs[len(srcEvs)-1].GetSessionCompleted().GetResult(); a == b {
		t.Fatalf("the fork's result %q is the source's: its steps were not run again", a)
	}
	// The source is unchanged.
	after := storedEvents(t, h.j, "src")
	if len(after) != len(srcEvs) {
		t.Fatalf("source has %d events after the fork, had %d", len(after), len(srcEvs))
	}
	for i := range after {
		if !proto.Equal(after[i], srcEvs[i]) {
			t.Fatalf("source event %d changed", i+1)
		}
	}
}

// TestForkAtPlanAndAtTheEnd: a fork after planning runs every step; a fork after the
// last step of a delegated plan only writes the closing summary (the one call after the
// last step) and completes like the source.
func TestForkAtPlanAndAtTheEnd(t *testing.T) {
	h := startHarness(t, harnessOpts{script: slowSteps(t)})
	if _, err := h.start("s", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	srcEvs := waitTerminal(t, h.j, "s", 20*time.Second)
	if _, err := h.node.Session("f0").Fork(&messages.ForkRequest{CommandId: "f", SourceSessionId: "s", StepIndex: 0}, call()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.node.Session("f2").Fork(&messages.ForkRequest{CommandId: "f", SourceSessionId: "s", StepIndex: 2}, call()); err != nil {
		t.Fatal(err)
	}
	f0 := waitTerminal(t, h.j, "f0", 20*time.Second)
	mustComplete(t, f0)
	if n := count(f0, "step_completed"); n != 2 {
		t.Fatalf("fork at 0 completed %d steps", n)
	}
	f2 := waitTerminal(t, h.j, "f2", 20*time.Second)
	mustComplete(t, f2)
	tail := f2[len(f2)-4:]
	if got, want := f2[len(f2)-1].GetSessionCompleted().GetResult(), srcEvs[len(srcEvs)-1].GetSessionCompleted().GetResult(); got != want || want != "closing summary" ||
		tail[0].Type() != "session_forked" || tail[1].GetLlmRequested().GetCallId() != "final-1" || tail[2].GetLlmResponded().GetCallId() != "final-1" {
		t.Fatalf("fork at the end: result %q (want %q), events %v", got, want, tail)
	}
}

var keptIdentity = regexp.MustCompile(`"(idempotencyKey|requestId)":\s*"[^"]*"`)

// TestForkSeesOnlyItsOwnPaths forks the demo session before its review step: the
// copied hand-offs, briefs, transcripts and tool results name the fork's workspace, so
// the fork's reviewer reads the draft under the fork's id (a path of the source's would
// be refused as another session's) and approves it.
func TestForkSeesOnlyItsOwnPaths(t *testing.T) {
	store, err := local.Open(t.TempDir(), local.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := startHarness(t, harnessOpts{artifacts: store, tools: testToolsOn(t, &executions{}, nil, store)})
	if _, err := h.start("demo-src", "c1", "Write a haiku about event sourcing"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "demo-src", 30*time.Second))
	// The demo plan: research, code ∥ write, review; fork after the first three.
	if _, err := h.node.Session("demo-fork").Fork(&messages.ForkRequest{CommandId: "f", SourceSessionId: "demo-src", StepIndex: 3}, call()); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "demo-fork", 30*time.Second)
	mustComplete(t, evs)
	point := 0
	for i, ev := range evs {
		if ev.GetSessionForked() != nil {
			point = i
		}
	}
	for _, ev := range evs {
		// Identities stay as recorded: the copied calls' idempotency keys are the source's.
		text := keptIdentity.ReplaceAllString(protojson.Format(ev), "")
		if strings.Contains(text, "demo-src/") {
			t.Fatalf("fork event %d (%s) still names the source's workspace: %s", ev.GetSeq(), ev.Type(), text)
		}
	}
	var read *messages.ToolResult
	var review *messages.SubagentCompleted
	for _, ev := range evs[point:] {
		if r := ev.GetToolResult(); r.GetTool() == "read_artifact" {
			read = r
		}
		if c := ev.GetSubagentCompleted(); c.GetAgentType() == "reviewer" {
			review = c
		}
	}
	if read == nil || read.GetError() != nil {
		t.Fatalf("the fork's reviewer could not read the draft: %v", read)
	}
	if review.GetResult().GetStatus() != "completed" || !strings.Contains(review.GetResult().GetSummary(), "demo-fork/drafts/draft.md") {
		t.Fatalf("the fork's review %v", review.GetResult())
	}
}

// TestTenantKeysArtifactsAndVectors: a session of tenant acme writes its artifacts and
// embeds its messages under acme's keys of the stores, not the default tenant's, and a
// fork of it copies the artifacts into acme's keys of the fork.
func TestTenantKeysArtifactsAndVectors(t *testing.T) {
	store, err := local.Open(t.TempDir(), local.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := startHarness(t, harnessOpts{artifacts: store, tools: testToolsOn(t, &executions{}, nil, store), cfg: embedEveryMessage})
	alice := &messages.Principal{Subject: "alice", Tenant: "acme"}
	if _, err := h.node.Session("acme-src").Start(&messages.StartRequest{CommandId: "c1", Goal: "Write a haiku about event sourcing", Caller: alice}, call()); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "acme-src", 30*time.Second))
	ctx := context.Background()
	list := func(tenant, id string) []artifact.Info {
		t.Helper()
		infos, err := store.List(ctx, tenant, id, "")
		if err != nil {
			t.Fatal(err)
		}
		return infos
	}
	if got := list("acme", "acme-src"); len(got) == 0 {
		t.Fatal("acme's session has no artifacts under acme")
	}
	if got := list(auth.DefaultTenant, "acme-src"); len(got) != 0 {
		t.Fatalf("acme's session wrote under the default tenant: %v", got)
	}
	vecs := h.node.Vectors()
	q := hashembed.Vector("haiku about event sourcing", vecs.Dimensions())
	testenv.Eventually(t, 10*time.Second, func() bool {
		hits, err := vecs.Search(ctx, "acme", "acme-src", q, 5)
		return err == nil && len(hits) > 0
	}, "acme's session's messages are not embedded under acme")
	if hits, err := vecs.Search(ctx, auth.DefaultTenant, "acme-src", q, 5); err != nil || len(hits) != 0 {
		t.Fatalf("acme's session's vectors are found under the default tenant: %v %v", hits, err)
	}
	if _, err := h.node.Session("acme-fork").Fork(&messages.ForkRequest{CommandId: "f", SourceSessionId: "acme-src", StepIndex: 3, Caller: alice}, call()); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "acme-fork", 30*time.Second))
	if got := list("acme", "acme-fork"); len(got) == 0 {
		t.Fatal("the fork's copies are not under acme")
	}
	if got := list(auth.DefaultTenant, "acme-fork"); len(got) != 0 {
		t.Fatalf("the fork wrote under the default tenant: %v", got)
	}
}
