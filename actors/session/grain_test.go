package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/resilient"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/persistence/memjournal"
	"github.com/fathom-agents/fathom/tools"
)

// harness is one in-process node on a real embedded journal, talking over HTTP to the
// scripted model.
type harness struct {
	t    testing.TB
	node *node.Node
	j    persistence.Journal
	// model is the scripted model; it keeps the newest requests (mock.Server.Recorded).
	model *mock.Server
}

type harnessOpts struct {
	journal persistence.Journal // shared journal; nil opens a fresh one
	// direct hands journal to the node itself instead of wrapped in journaltest.Faulty
	// (whose appends are synchronous), so the grains use its asynchronous appends
	// (persistence.AsyncIndexAppender); the node's Stop closes it.
	direct bool
	script *mock.Script // nil = demo script
	cfg    func(*session.Config)
	llm    func(*node.LLMConfig)
	tools  *tools.Executor // nil = a registry with the test tools
	// feedPoll is the node's feed polling (node.Config.FeedPoll).
	feedPoll time.Duration
	// artifacts is the node's artifact store (nil: the node's default).
	artifacts artifact.Store
	// promptsDir overrides prompt templates (node.Config.PromptsDir).
	promptsDir string
	// telemetry is the node's telemetry (node.Config.Telemetry).
	telemetry telemetry.Config
	// log, when set, is the node's logger.
	log *slog.Logger
	// memory is the node's vector store and embedder (node.Config.Memory).
	memory node.MemoryConfig
	// postgres is the node's PostgreSQL database (node.Config.PostgresDSN: the pgvector
	// store's; the journal is still journal).
	postgres string
	// observers are the node's extra commit observers (node.Config.SessionObservers).
	observers []session.Observer
}

// openJournal is the journal of a test of the grain: in memory (persistence/memjournal),
// since the grain's behaviour does not depend on the backend and every backend passes
// the same conformance suite (persistence/journaltest). The tests of the durable path
// (reactivation_test.go) use openBoltJournal, the PostgreSQL ones their own database.
func openJournal(t testing.TB) persistence.SessionStore {
	t.Helper()
	return memjournal.NewStore(memjournal.Options{}).Open()
}

// openBoltJournal is the embedded journal, a file in a temporary directory.
func openBoltJournal(t testing.TB) persistence.SessionStore {
	t.Helper()
	j, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func startHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	if o.journal == nil {
		o.journal = openJournal(t)
	}
	script := mock.DemoScript()
	if o.script != nil {
		script = *o.script
	}
	model := mock.New(mock.Config{Script: script, Record: 256})
	srv := httptest.NewServer(model.Handler())
	t.Cleanup(srv.Close)
	scfg := session.DefaultConfig()
	// Every harness runs its own copy of the scripted model on its own port: they are one
	// endpoint as far as the sessions are concerned, so a session moves between the nodes
	// of a test. A test of the endpoint check zeroes it (the node's real URL is used).
	scfg.Endpoint = core.Endpoint{Provider: "openai", BaseURL: "http://scripted-model.test/v1"}
	scfg.RetryBackoffMax = 200 * time.Millisecond
	scfg.StepRetryDelay = 100 * time.Millisecond
	if o.cfg != nil {
		o.cfg(&scfg)
	}
	lcfg := node.LLMConfig{BaseURL: srv.URL + "/v1", APIKey: "test", Resilience: resilient.Config{
		MaxAttempts: 2, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, BreakerOpenFor: 200 * time.Millisecond,
	}}
	if o.llm != nil {
		o.llm(&lcfg)
	}
	if o.tools == nil {
		o.tools = testTools(t)
	}
	ccfg := fcluster.DefaultConfig()
	ccfg.Provider = "local"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.log != nil {
		log = o.log
	}
	ccfg.Logger = log
	startTimeout := 30 * time.Second
	if o.memory.Embedder == node.EmbedderGloVe {
		startTimeout = 5 * time.Minute // reading the word vectors' 307 MB of JSON: seconds, more under load
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	journal := o.journal
	if !o.direct {
		journal = keepOpen(journal)
	}
	n, err := node.Start(ctx, node.Config{
		Journal: journal, Cluster: ccfg, Session: scfg, Logger: log,
		LLM: lcfg, Tools: o.tools, FeedPoll: o.feedPoll, Artifacts: node.ArtifactConfig{Store: o.artifacts},
		PromptsDir: o.promptsDir, Telemetry: o.telemetry, Memory: o.memory, SessionObservers: o.observers,
		PostgresDSN: o.postgres,
	})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return &harness{t: t, node: n, j: o.journal, model: model}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// keepOpen wraps j so that closing it does nothing (several nodes share one journal;
// the test closes it), every capability kept. A j that is no persistence.SessionStore
// is passed as is: the node refuses it at start.
func keepOpen(j persistence.Journal) persistence.Journal {
	if s, ok := j.(persistence.SessionStore); ok {
		return journaltest.NewFaulty(s).KeepOpen()
	}
	return j
}

func (h *harness) start(id, cmd, goal string) (*messages.StartResponse, error) {
	return h.node.Session(id).Start(&messages.StartRequest{CommandId: cmd, Goal: goal}, cluster.WithTimeout(10*time.Second))
}

func (h *harness) state(id string) (*messages.GetStateResponse, error) {
	return h.node.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(10*time.Second))
}

// waitTerminal waits until the stored events of id end the session and returns them.
func waitTerminal(t testing.TB, j persistence.Journal, id string, timeout time.Duration) []*messages.Event {
	t.Helper()
	var evs []*messages.Event
	testenv.Eventually(t, timeout, func() bool {
		evs = storedEvents(t, j, id)
		if len(evs) == 0 {
			return false
		}
		switch evs[len(evs)-1].GetPayload().(type) {
		case *messages.Event_SessionCompleted, *messages.Event_SessionFailed:
			return true
		}
		return false
	}, "session %s did not finish", id)
	return evs
}

// storedEvents reads every event of id and checks the stream has no gap or repeat.
func storedEvents(t testing.TB, j persistence.Journal, id string) []*messages.Event {
	t.Helper()
	var evs []*messages.Event
	err := replay.Events(context.Background(), j, id, 0, func(ev *messages.Event) error {
		if ev.GetSeq() != uint64(len(evs))+1 {
			return fmt.Errorf("seq %d after %d", ev.GetSeq(), len(evs))
		}
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("read events of %s: %v", id, err)
	}
	return evs
}

func count(evs []*messages.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

func TestSessionRunsToCompletion(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	resp, err := h.start("s1", "c1", "Write a haiku about event sourcing")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSessionId() != "s1" || resp.GetSeq() != 2 || resp.GetDuplicate() {
		t.Fatalf("start response %v", resp)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	last := evs[len(evs)-1]
	if last.Type() != "session_completed" {
		t.Fatalf("session ended with %s: %v", last.Type(), last)
	}
	// The demo plan has four steps (research, code ∥ write, review), each delegated to a
	// sub-agent: the researcher calls write_todos and write_artifact, the coder
	// code_execute (no sandbox here: it reads a ToolError) and write_artifact, the writer
	// write_artifact, the reviewer read_artifact; each takes one more LLM turn than its
	// tool calls, and the orchestrator plans and writes the closing summary.
	steps, tools := count(evs, "step_completed"), count(evs, "tool_result")
	if steps != 4 || tools != 6 || count(evs, "tool_called") != 6 || count(evs, "plan_created") != 1 ||
		count(evs, "subagent_started") != 4 || count(evs, "subagent_completed") != 4 || count(evs, "artifact_written") != 3 ||
		count(evs, "llm_requested") != steps+tools+2 || count(evs, "llm_responded") != steps+tools+2 {
		t.Fatalf("unexpected event mix: %d steps, %d tool results, events %v", steps, tools, evs)
	}
	if res := last.GetSessionCompleted().GetResult(); !strings.Contains(res, "s1/drafts/draft.md") {
		t.Fatalf("the closing summary does not cite the draft: %q", res)
	}
	st, err := h.state("s1")
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState().GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || st.GetState().GetSeq() != uint64(len(evs)) {
		t.Fatalf("state %v", st.GetState())
	}
	if st.GetHost() != h.node.Address() {
		t.Fatalf("host %q, want %q", st.GetHost(), h.node.Address())
	}
	// The grain's state is exactly the fold of the journal.
	folded, _, err := replay.Load(context.Background(), h.j, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(folded, st.GetState()) {
		t.Fatalf("grain state differs from the journal's fold:\n%v\n%v", folded, st.GetState())
	}
}

func TestUnknownSessionIsNotFound(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	_, err := h.state("nope")
	if !sessiongrain.IsNotFound(err) {
		t.Fatalf("err = %v, want NOT_FOUND", err)
	}
}

func TestBadStartIsRefusedAndStoresNothing(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	_, err := h.start("s1", "c1", "   ")
	if !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
	}
	_, err = h.start("s1", "", "goal")
	if !sessiongrain.IsInvalidArgument(err) {
		t.Fatalf("err = %v, want INVALID_ARGUMENT for a missing command id", err)
	}
	if evs := storedEvents(t, h.j, "s1"); len(evs) != 0 {
		t.Fatalf("refused commands stored %d events", len(evs))
	}
}

func TestDuplicateCommandAppliesOnce(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	first, err := h.start("s1", "c1", "goal")
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.start("s1", "c1", "goal")
	if err != nil {
		t.Fatal(err)
	}
	if !again.GetDuplicate() || again.GetSeq() != first.GetSeq() {
		t.Fatalf("retry answered %v, want duplicate of %v", again, first)
	}
	_, err = h.start("s1", "c2", "another goal")
	if !sessiongrain.IsFailedPrecondition(err) {
		t.Fatalf("a second start: err = %v, want FAILED_PRECONDITION", err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	if n := count(evs, "session_started"); n != 1 {
		t.Fatalf("%d session_started events, want 1", n)
	}
}

func TestPassivationRestoresIdenticalState(t *testing.T) {
	h := startHarness(t, harnessOpts{cfg: func(c *session.Config) { c.IdleTimeout = 300 * time.Millisecond }})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, h.j, "s1", 20*time.Second)
	before, err := h.state("s1")
	if err != nil {
		t.Fatal(err)
	}
	// Watched without a grain request (asking would keep it alive): the activation leaves
	// the process registry when it passivates; the read below activates it again.
	testenv.Eventually(t, 10*time.Second, func() bool { return activations(h.node, "s1") == 0 },
		"the grain was never passivated")
	after, err := h.state("s1")
	if err != nil {
		t.Fatal(err)
	}
	if after.GetActivatedAtUnixNano() == before.GetActivatedAtUnixNano() {
		t.Fatalf("the read after passivation answered from the old activation (activated at %d)", before.GetActivatedAtUnixNano())
	}
	if !proto.Equal(before.GetState(), after.GetState()) {
		t.Fatalf("state changed across passivation:\n%v\n%v", before.GetState(), after.GetState())
	}
}

func TestPanicMidCommandReloadsAndAnswersWithError(t *testing.T) {
	pj := journaltest.NewFaulty(openJournal(t))
	h := startHarness(t, harnessOpts{journal: pj})
	if _, err := h.start("s0", "c0", "warm up"); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, pj, "s0", 20*time.Second)
	pj.PanicNextAppend()
	began := time.Now()
	_, err := h.start("s1", "c1", "goal")
	if !sessiongrain.IsInternal(err) {
		t.Fatalf("err = %v, want INTERNAL from the crashed grain", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("caller waited %s for the crash to be reported", d)
	}
	// The restarted grain reloaded: the retry with the same command id succeeds once.
	resp, err := h.start("s1", "c1", "goal")
	if err != nil {
		t.Fatalf("retry after crash: %v", err)
	}
	if resp.GetDuplicate() {
		t.Fatal("the crashed command was reported as applied")
	}
	evs := waitTerminal(t, pj, "s1", 20*time.Second)
	if count(evs, "session_started") != 1 || evs[len(evs)-1].Type() != "session_completed" {
		t.Fatalf("events after crash: %v", evs)
	}
}

var errDown = errors.New("connection refused (injected)")

func TestJournalOutageLosesNothingAndRecovers(t *testing.T) {
	fj := journaltest.NewFaulty(openJournal(t)) // down: every call fails, like a database that went away
	// A slow model keeps the session mid-run while the journal goes away.
	script, err := mock.ParseScript([]byte(`{"rules":[{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"research\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"write\",\"description\":\"two\"}]}"},{"system_match":"FATHOM-ROLE: (executor|researcher|writer)","response":"done {{.Step}}","delay_ms":300}],"default":"?"}`))
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{journal: fj, script: &script})
	fj.Down(errDown)
	if _, err := h.start("s1", "c1", "goal"); !sessiongrain.IsUnavailable(err) {
		t.Fatalf("start while the journal is down: err = %v, want UNAVAILABLE", err)
	}
	fj.Up()
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatalf("start after the journal came back: %v", err)
	}
	// Take the journal away while the first step's call is in flight.
	testenv.Eventually(t, 10*time.Second, func() bool { return count(storedEvents(t, fj, "s1"), "step_started") > 0 }, "no step started")
	var refused atomic.Int64 // appends of s1 the journal refused while down
	fj.OnAppend(func(stream string, _ []persistence.Record, _ uint64, err error) {
		if stream == "s1" && errors.Is(err, errDown) {
			refused.Add(1)
		}
	})
	fj.Down(errDown)
	// The outage lasts until the session has met it: its step's answer could not be stored.
	testenv.Eventually(t, 10*time.Second, func() bool { return refused.Load() > 0 }, "no append of s1 was refused while the journal was down")
	fj.Up()
	evs := waitTerminal(t, fj, "s1", 30*time.Second)
	if evs[len(evs)-1].Type() != "session_completed" {
		t.Fatalf("session ended with %v", evs[len(evs)-1])
	}
	for _, typ := range []string{"session_started", "plan_created", "session_completed"} {
		if count(evs, typ) != 1 {
			t.Fatalf("%d %s events, want 1", count(evs, typ), typ)
		}
	}
	if count(evs, "step_completed") != 2 {
		t.Fatalf("%d step_completed, want 2", count(evs, "step_completed"))
	}
	// A call started while its llm_requested was being appended (startEarly) and whose
	// append failed is cancelled: every recorded request is answered exactly once.
	checkCallsAnsweredOnce(t, evs)
}

func TestModelOutageFailsTheSessionWithAReason(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[{"match":".*","status":500,"error_message":"model exploded"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{script: &script})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 20*time.Second)
	last := evs[len(evs)-1]
	if last.Type() != "session_failed" || !strings.Contains(last.GetSessionFailed().GetError(), "model exploded") {
		t.Fatalf("last event %v", last)
	}
	// A 500 is retryable: the plan was tried StepAttempts times before the session failed.
	if n := count(evs, "plan_failed"); n != int(core.DefaultConfig().StepAttempts) {
		t.Fatalf("%d plan_failed events, want %d", n, core.DefaultConfig().StepAttempts)
	}
}
