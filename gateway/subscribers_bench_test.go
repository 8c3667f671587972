package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// The streaming-subscribers benchmarks: one node (in-process, embedded journal, scripted
// model) runs a session of streamSteps chained plan steps, each a model answer after
// streamStepDelay, and subscribers follow it live. Each iteration is one session: it is
// started through the AG-UI endpoint, its first model call is held until every
// subscriber has its stream, then it runs to its end.
//
//   - BenchmarkStreamSubscribers/mixed: N subscribers on that one node (default 1,000;
//     env FATHOM_BENCH_STREAM_SUBSCRIBERS), a quarter each of WebSocket (subscribe
//     frames), SSE (GET /v1/sessions/{id}/events), A2A (SubscribeToTask) and AG-UI (the
//     run posted again: replayed, then followed), all over loopback HTTP from the same
//     process.
//   - BenchmarkStreamSubscribers/baseline=bare: the same session with one bare subscriber:
//     an in-process subscription to the node's journal-backed feed (no gateway, no socket).
//     The mixed run has that subscriber too, beside its N (bare-p99-ms): what the
//     session's own pace, its commits on a loaded machine, adds to every delivery.
//
// An event's delivery latency is from its timestamp (when the session recorded it) to
// the subscriber having read and decoded its frame (an AG-UI subscriber: the first
// AG-UI event made from it), for every event recorded after the streams were open.
// Metrics: p50-ms and p99-ms over the N subscribers' deliveries, p99 per protocol, and gaps and
// duplicates: a WebSocket, SSE or A2A subscriber must get every event from where it
// subscribed to session_completed exactly once, in order; an AG-UI subscriber the run's
// events exactly as the run replayed from the journal afterwards (each message's text
// whole). Any gap or duplicate fails the benchmark. The live phase's cost (from the
// release of the first model call to the last subscriber's end): frames/session, the
// frames the subscribers read (events, deltas, AG-UI events); cpu-us/frame, the process's
// CPU time (node and clients: they share it) per frame; writes/frame, its write system
// calls per frame (how many frames a write carries).
//
//	go test -run '^$' -bench 'StreamSubscribers' -benchtime 1x ./gateway/
const envStreamSubscribers = "FATHOM_BENCH_STREAM_SUBSCRIBERS"

// envStreamProfile, when set, names a file that gets a CPU profile of a session's live
// phase only (from the release of its first model call to its last subscriber's end; the
// last session's with -benchtime above 1x), without the streams' opening and replays:
// the node's cost per delivery beside the clients'. Do not combine it with -cpuprofile.
const envStreamProfile = "FATHOM_BENCH_STREAM_CPUPROFILE"

// profileLive starts the live-phase CPU profile (envStreamProfile) and returns its stop.
func profileLive(b *testing.B) (stop func()) {
	path := os.Getenv(envStreamProfile)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("%s: %v", envStreamProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("%s: %v", envStreamProfile, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("%s: %v", envStreamProfile, err)
		}
	}
}

// The benchmark session: streamSteps steps in a chain, each answered after streamStepDelay.
const (
	streamSteps     = 20
	streamStepDelay = 50 * time.Millisecond
)

// Subscriber kinds of the mixed benchmark.
const (
	kindWS   = "ws"
	kindSSE  = "sse"
	kindA2A  = "a2a"
	kindAGUI = "agui"
	kindBare = "bare"
)

var streamKinds = []string{kindAGUI, kindWS, kindSSE, kindA2A}

func BenchmarkStreamSubscribers(b *testing.B) {
	b.Run("mixed", func(b *testing.B) { runStreamSubscribers(b, streamSubscriberCount(b)) })
	b.Run("baseline=bare", func(b *testing.B) { runStreamSubscribers(b, 0) })
}

func streamSubscriberCount(b *testing.B) int {
	n := 1000
	if v := os.Getenv(envStreamSubscribers); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number", envStreamSubscribers, v)
		}
	}
	return n
}

// heldModel is the scripted model behind a gate: every request waits until the gate of
// the current session opens.
type heldModel struct {
	h      http.Handler
	mu     sync.Mutex
	gate   chan struct{} // closed to let the requests through
	arrive func()        // signals that a request waits at the gate
}

// hold shuts the gate for the next session.
func (m *heldModel) hold() (arrived <-chan struct{}, release func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gate, arrivedc := make(chan struct{}), make(chan struct{})
	var opened, came sync.Once
	m.gate, m.arrive = gate, func() { came.Do(func() { close(arrivedc) }) }
	return arrivedc, func() { opened.Do(func() { close(gate) }) }
}

func (m *heldModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	gate, arrive := m.gate, m.arrive
	m.mu.Unlock()
	if gate != nil {
		arrive()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	m.h.ServeHTTP(w, r)
}

func streamScript() mock.Script {
	var steps []string
	for i := 1; i <= streamSteps; i++ {
		deps := "[]"
		if i > 1 {
			deps = fmt.Sprintf(`["s%d"]`, i-1)
		}
		steps = append(steps, fmt.Sprintf(`{"id":"s%d","type":"custom","description":"part %d","dependencies":%s}`, i, i, deps))
	}
	return mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[` + strings.Join(steps, ",") + `]}`},
		{SystemMatch: "FATHOM-ROLE: executor", Response: "Part {{.Step}} is written: the journal keeps every word of it.", DelayMS: int(streamStepDelay / time.Millisecond)},
		{Response: "All parts are written."},
	}}
}

// streamSub is one subscriber's record of a session.
type streamSub struct {
	kind     string
	attached chan struct{} // closed once its stream is open
	seqs     []uint64      // the journaled events, in the order received (not AG-UI)
	recv     map[uint64]time.Time
	frames   []aguiFrame // AG-UI: the run's events
	// read counts the frames read (events, deltas, AG-UI events, A2A responses).
	read atomic.Int64
	err  error
}

type aguiFrame struct {
	id string
	ev map[string]any
}

func newStreamSub(kind string) *streamSub {
	return &streamSub{kind: kind, attached: make(chan struct{}), recv: map[uint64]time.Time{}}
}

func (s *streamSub) attach() {
	select {
	case <-s.attached:
	default:
		close(s.attached)
	}
}

// got records event seq as received now.
func (s *streamSub) got(seq uint64) {
	s.seqs = append(s.seqs, seq)
	if _, ok := s.recv[seq]; !ok {
		s.recv[seq] = time.Now()
	}
}

type streamBench struct {
	g      *gw
	model  *heldModel
	client *http.Client
	dialer websocket.Dialer
}

func runStreamSubscribers(b *testing.B, n int) {
	script := streamScript()
	m := &heldModel{h: mock.New(mock.Config{Script: script}).Handler()}
	model := httptest.NewServer(m)
	b.Cleanup(model.Close)
	g := startGW(b, gwOpts{node: func(c *node.Config) { c.LLM.BaseURL = model.URL + "/v1" },
		session: func(c *session.Config) { c.MaxSteps, c.MaxIterations = streamSteps, 2*streamSteps+10 }})
	a2a.Mount(g.h, a2a.Config{})
	agui.Mount(g.h, nil)
	sb := &streamBench{g: g, model: m, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		dialer: websocket.Dialer{HandshakeTimeout: 30 * time.Second}}
	b.Cleanup(sb.client.CloseIdleConnections)

	var all []float64 // the deliveries to the n subscribers (the bare one's, without any)
	byKind := map[string][]float64{}
	gaps, dups, deliveries, events := 0, 0, 0, 0
	var frames, writes int64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := sb.session(b, fmt.Sprintf("bench-%d-%d", n, i), n)
		for k, ls := range r.latencies {
			byKind[k] = append(byKind[k], ls...)
			if k != kindBare || n == 0 {
				all = append(all, ls...)
				deliveries += len(ls)
			}
		}
		gaps, dups, events = gaps+r.gaps, dups+r.dups, events+r.live
		frames, writes, cpu = frames+r.frames, writes+r.writes, cpu+r.cpu
	}
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(percentile(all, 0.50), "p50-ms")
	b.ReportMetric(percentile(all, 0.99), "p99-ms")
	for _, k := range append(slices.Clone(streamKinds), kindBare) {
		if ls := byKind[k]; len(ls) > 0 {
			slices.Sort(ls)
			b.ReportMetric(percentile(ls, 0.99), k+"-p99-ms")
		}
	}
	b.ReportMetric(float64(gaps), "gaps")
	b.ReportMetric(float64(dups), "duplicates")
	b.ReportMetric(float64(max(n, 1)), "subscribers")
	b.ReportMetric(float64(deliveries)/float64(b.N), "deliveries/session")
	b.ReportMetric(float64(events)/float64(b.N), "events/session")
	if frames > 0 {
		b.ReportMetric(float64(frames)/float64(b.N), "frames/session")
		b.ReportMetric(float64(cpu.Microseconds())/float64(frames), "cpu-us/frame")
		if writes >= 0 {
			b.ReportMetric(float64(writes)/float64(frames), "writes/frame")
		}
	}
	if gaps > 0 || dups > 0 {
		b.Fatalf("%d gaps and %d duplicates across the subscribers", gaps, dups)
	}
}

// percentile is the p-quantile of sorted values (milliseconds), nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// sessionResult is what one session's subscribers saw.
type sessionResult struct {
	latencies  map[string][]float64 // by kind, milliseconds
	gaps, dups int
	live       int // events recorded after the streams were open
	// The live phase's frames read by the subscribers, the process's CPU time and write
	// system calls (-1: not known) meanwhile.
	frames, writes int64
	cpu            time.Duration
}

// processCost is the process's CPU time (user and system) and its write system calls
// so far (/proc/self/io's syscw; -1 where there is none).
func processCost() (time.Duration, int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return cpu, -1
	}
	for _, line := range strings.Split(string(io), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return cpu, n
			}
		}
	}
	return cpu, -1
}

// session runs one session with n subscribers (0: one bare subscriber) on thread.
func (sb *streamBench) session(b *testing.B, thread string, n int) sessionResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	arrived, release := sb.model.hold()
	defer release()
	body := runBody(thread, "run-1")

	// The session starts through the AG-UI endpoint: that stream is the first AG-UI
	// subscriber (the baseline closes it once the session exists).
	starter := newStreamSub(kindAGUI)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	var wg sync.WaitGroup
	wg.Add(1)
	sidc := make(chan string, 1)
	go func() {
		defer wg.Done()
		sb.followAGUI(sctx, starter, body, sidc)
	}()
	var sid string
	select {
	case sid = <-sidc:
	case <-ctx.Done():
	}
	if sid == "" {
		b.Fatalf("the session did not start: %v", starter.err)
	}
	select {
	case <-arrived: // its first model call is held
	case <-ctx.Done():
		b.Fatal("the session made no model call")
	}
	for { // and its start is stored (the call may go out before it is)
		if seq, err := sb.g.n.Journal().LastSeq(ctx, sid); err != nil || seq > 0 {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatal("the session's start was not stored")
		case <-time.After(time.Millisecond):
		}
	}

	// The bare subscriber, in the mixed run too: there it shows what the session's own
	// pace (its commits) adds to every subscriber's latency.
	bare := newStreamSub(kindBare)
	subs := []*streamSub{bare, starter}
	if n == 0 {
		scancel()
		subs = subs[:1]
	}
	sub := sb.g.n.Feed().Follow(sid, 0, 0)
	defer sub.Close()
	bare.attach()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			u, err := sub.NextUpdate(ctx)
			if err != nil {
				bare.err = err
				return
			}
			if u.IsDelta {
				continue
			}
			bare.got(u.Event.GetSeq())
			if isEnd(u.Event.Type()) {
				return
			}
		}
	}()
	sem := make(chan struct{}, 32) // streams opening at once
	for i := 1; i < n; i++ {
		s := newStreamSub(streamKinds[i%len(streamKinds)])
		subs = append(subs, s)
		wg.Add(1)
		sem <- struct{}{}
		go func() { // frees the slot once the stream is open
			select {
			case <-s.attached:
			case <-ctx.Done():
			}
			<-sem
		}()
		go func() {
			defer wg.Done()
			defer s.attach()
			switch s.kind {
			case kindWS:
				sb.followWS(ctx, s, sid)
			case kindSSE:
				sb.followSSE(ctx, s, sid)
			case kindA2A:
				sb.followA2A(ctx, s, sid)
			case kindAGUI:
				sb.followAGUI(ctx, s, body, nil)
			}
		}()
	}
	for _, s := range subs { // (one that failed is reported at the end)
		select {
		case <-s.attached:
		case <-ctx.Done():
			b.Fatal("the subscribers did not all open their streams")
		}
	}
	head, err := sb.g.n.Journal().LastSeq(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range subs {
		s.read.Store(0) // the live phase's only
	}
	stopProfile := profileLive(b)
	cpu0, writes0 := processCost()
	release()
	wg.Wait()
	cpu1, writes1 := processCost()
	stopProfile()

	at, final := sb.eventTimes(b, sid)
	res := sessionResult{latencies: map[string][]float64{}, live: int(final - head), cpu: cpu1 - cpu0, writes: -1}
	if writes0 >= 0 && writes1 >= 0 {
		res.writes = writes1 - writes0
	}
	var whole []aguiFrame
	for _, s := range subs {
		if s.err != nil {
			b.Fatalf("a %s subscriber: %v", s.kind, s.err)
		}
		if s.kind != kindBare {
			res.frames += s.read.Load()
		}
		if s.kind == kindAGUI {
			if whole == nil {
				whole = sb.replayAGUI(ctx, b, body)
			}
			if !sameRun(s.frames, whole) {
				res.gaps++
				b.Logf("an AG-UI subscriber's run (%d events) is not the run replayed (%d events)", len(s.frames), len(whole))
			}
		} else {
			g, d := seqFaults(s.seqs, head, final)
			res.gaps, res.dups = res.gaps+g, res.dups+d
		}
		for seq, t := range s.recv {
			if seq > head && seq <= final {
				res.latencies[s.kind] = append(res.latencies[s.kind], float64(t.Sub(at[seq]).Nanoseconds())/1e6)
			}
		}
	}
	return res
}

// seqFaults counts the gaps (events missing) and duplicates of seqs, which must run
// from at most from+1 (the stream opened by then) to final, each once, in order.
func seqFaults(seqs []uint64, from, final uint64) (gaps, dups int) {
	if len(seqs) == 0 {
		return int(final), 0
	}
	if seqs[0] > from+1 {
		gaps += int(seqs[0] - from - 1)
	}
	for i := 1; i < len(seqs); i++ {
		switch d := seqs[i] - seqs[i-1]; {
		case seqs[i] <= seqs[i-1]:
			dups++
		case d > 1:
			gaps += int(d - 1)
		}
	}
	if last := seqs[len(seqs)-1]; last < final {
		gaps += int(final - last)
	}
	return gaps, dups
}

// eventTimes is each event's timestamp by seq, and the last seq.
func (sb *streamBench) eventTimes(b *testing.B, sid string) (map[uint64]time.Time, uint64) {
	at := map[uint64]time.Time{}
	var last uint64
	err := sb.g.n.Journal().Load(context.Background(), sid, 0, func(r persistence.Record) error {
		ev := &messages.Event{}
		if err := proto.Unmarshal(r.Data, ev); err != nil {
			return err
		}
		t := r.At
		if ev.GetAtUnixNano() != 0 {
			t = ev.At()
		}
		at[r.Seq], last = t, r.Seq

		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return at, last
}

func isEnd(typ string) bool {
	return typ == "session_completed" || typ == "session_failed" || typ == "session_cancelled"
}

func runBody(thread, runID string) string {
	js, _ := json.Marshal(map[string]any{"threadId": thread, "runId": runID, "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"messages": []any{map[string]any{"id": "m-" + runID, "role": "user", "content": "Write it in " + strconv.Itoa(streamSteps) + " parts"}}})
	return string(js)
}

// sseFrames reads server-sent events from r, calling fn with each frame's id and data
// until it returns false or the stream ends. id and data are fn's only until it returns
// (the lines are copied into buffers reused frame after frame: reading costs a client
// no allocation per line).
func sseFrames(r io.Reader, fn func(id, data []byte) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var id, data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id = append(id[:0], line[len("id: "):]...)
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data[:0], line[len("data: "):]...)
		case len(line) == 0:
			if len(data) > 0 && !fn(id, data) {
				return nil
			}
			id, data = id[:0], data[:0]
		}
	}
	return sc.Err()
}

func (sb *streamBench) post(ctx context.Context, path, body string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.g.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := sb.client.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, msg)
	}
	return resp, err
}

// followAGUI posts the run and records its events to RUN_FINISHED; sid, when set,
// receives the session id RUN_STARTED names.
func (sb *streamBench) followAGUI(ctx context.Context, s *streamSub, body string, sid chan<- string) {
	defer s.attach()
	if sid != nil {
		defer func() {
			if sid != nil {
				sid <- "" // the run did not start (sid has room for one)
			}
		}()
	}
	resp, err := sb.post(ctx, agui.Path, body, nil)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	s.err = sseFrames(resp.Body, func(idb, data []byte) bool {
		now := time.Now()
		s.read.Add(1)
		id := string(idb)
		var ev map[string]any
		if err := json.Unmarshal(data, &ev); err != nil {
			s.err = fmt.Errorf("AG-UI event %q: %w", data, err)
			return false
		}
		s.frames = append(s.frames, aguiFrame{id: id, ev: ev})
		// The first event made from a session event (K 0 is a live delta's, made from
		// the model's text after the event it follows).
		if p, err := agui.ParsePosition(id); err == nil && p.Seq > 0 && p.K > 0 {
			if _, ok := s.recv[p.Seq]; !ok {
				s.recv[p.Seq] = now
			}
		}
		switch ev["type"] {
		case "RUN_STARTED":
			if sid != nil {
				meta, _ := ev["metadata"].(map[string]any)
				fathom, _ := meta["fathom"].(map[string]any)
				sid <- fmt.Sprint(fathom["session_id"])
				sid = nil
			}
			s.attach()
		case "RUN_FINISHED", "RUN_ERROR":
			return false
		}
		return true
	})
	if s.err == nil && (len(s.frames) == 0 || s.frames[len(s.frames)-1].ev["type"] != "RUN_FINISHED") {
		s.err = fmt.Errorf("the AG-UI run did not finish: %d events", len(s.frames))
	}
}

// replayAGUI is the run replayed whole from the journal.
func (sb *streamBench) replayAGUI(ctx context.Context, b *testing.B, body string) []aguiFrame {
	s := newStreamSub(kindAGUI)
	sb.followAGUI(ctx, s, body, nil)
	if s.err != nil {
		b.Fatalf("the run replayed: %v", s.err)
	}
	return s.frames
}

// sameRun reports whether an AG-UI subscriber's events are the run's: the same events
// but TEXT_MESSAGE_CONTENT in the same order, and each message's text the same (a live
// stream's deltas cut a text differently from a replay's whole one).
func sameRun(got, whole []aguiFrame) bool {
	split := func(fs []aguiFrame) ([]map[string]any, map[string]string) {
		var evs []map[string]any
		texts := map[string]string{}
		for _, f := range fs {
			if f.ev["type"] == "TEXT_MESSAGE_CONTENT" {
				texts[fmt.Sprint(f.ev["messageId"])] += fmt.Sprint(f.ev["delta"])
				continue
			}
			evs = append(evs, f.ev)
		}
		return evs, texts
	}
	ge, gt := split(got)
	we, wt := split(whole)
	x, _ := json.Marshal([]any{ge, gt})
	y, _ := json.Marshal([]any{we, wt})
	return string(x) == string(y)
}

// followWS subscribes over the WebSocket from seq 0 and records the events to the end.
func (sb *streamBench) followWS(ctx context.Context, s *streamSub, sid string) {
	c, _, err := sb.dialer.DialContext(ctx, sb.g.wsURL, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		s.err = err
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":1,"session_id":"`+sid+`","from_seq":0}`)); err != nil {
		s.err = err
		return
	}
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			s.err = err
			return
		}
		s.read.Add(1)
		var f struct {
			Op   string `json:"op"`
			Type string `json:"type"`
			Seq  uint64 `json:"seq"`
		}
		if err := json.Unmarshal(msg, &f); err != nil {
			s.err = fmt.Errorf("frame %q: %w", msg, err)
			return
		}
		switch f.Op {
		case "ack":
			s.attach()
		case "event":
			s.got(f.Seq)
			if isEnd(f.Type) {
				return
			}
		case "error":
			s.err = fmt.Errorf("error frame: %s", msg)
			return
		}
	}
}

// followSSE reads GET /v1/sessions/{id}/events as server-sent events to the end.
func (sb *streamBench) followSSE(ctx context.Context, s *streamSub, sid string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sb.g.srv.URL+"/v1/sessions/"+sid+"/events", nil)
	if err != nil {
		s.err = err
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := sb.client.Do(req)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.err = fmt.Errorf("GET events: %d", resp.StatusCode)
		return
	}
	s.attach() // the stream is open: events from seq 0 come
	s.err = sseFrames(resp.Body, func(_, data []byte) bool {
		s.read.Add(1)
		var f struct {
			Op   string `json:"op"`
			Type string `json:"type"`
			Seq  uint64 `json:"seq"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			s.err = fmt.Errorf("frame %q: %w", data, err)
			return false
		}
		if f.Op == "event" {
			s.got(f.Seq)
			return !isEnd(f.Type)
		}
		return f.Op != "error"
	})
}

// followA2A subscribes to the task (the session) and records its status updates' events
// until the stream ends with the task completed.
func (sb *streamBench) followA2A(ctx context.Context, s *streamSub, sid string) {
	resp, err := sb.post(ctx, a2a.DefaultPath, `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"`+sid+`"}}`, nil)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	completed := false
	s.err = sseFrames(resp.Body, func(_, data []byte) bool {
		s.read.Add(1)
		var m struct {
			Result struct {
				Task         json.RawMessage `json:"task"`
				StatusUpdate *struct {
					Status   struct{ State string } `json:"status"`
					Metadata struct {
						Fathom struct{ Seq uint64 } `json:"fathom"`
					} `json:"metadata"`
				} `json:"statusUpdate"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &m); err != nil || len(m.Error) > 0 {
			s.err = fmt.Errorf("A2A frame %q: %v", data, err)
			return false
		}
		if m.Result.Task != nil {
			s.attach()
		}
		if u := m.Result.StatusUpdate; u != nil && u.Metadata.Fathom.Seq > 0 {
			s.got(u.Metadata.Fathom.Seq)
			completed = u.Status.State == "TASK_STATE_COMPLETED"
		}
		return !completed
	})
	if s.err == nil && !completed {
		s.err = fmt.Errorf("the A2A stream ended before the task completed (%d events)", len(s.seqs))
	}
}
