package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// release is a tagged release: its tag and the commit the tag names.
type release struct{ tag, commit string }

// releases are the tagged releases, oldest first. The upgrade soak starts from the newest
// release that is not this commit; a clone without tags (CI's clean clone has none) finds
// it here. Tagging a release adds it here; TestReleasesNameTheirTags checks the list
// against the tags a clone has. Builds before v0.3.0 advertise no journal format, and
// upgrades from them go through v0.3.0 (docs/operations.md#upgrades): the soak refuses them
// as a predecessor.
var releases = []release{
	{tag: "v0.3.0", commit: "f0aa850fbe1163fa3012365e8dd30987788b4b31"},
}

// upgradeConfig sizes TestUpgradeSoak. The defaults are the short variant `make test-faults`
// runs; `make upgrade-soak` sets the FATHOM_UPGRADE_* variables to the full one.
type upgradeConfig struct {
	from     string        // the predecessor's git tag or commit (FATHOM_UPGRADE_FROM; default the newest v* tag, else the newest of releases)
	sessions int           // sessions to start in all, at least: more start while members remain to be replaced (FATHOM_UPGRADE_SESSIONS)
	running  int           // sessions kept running while members are replaced (FATHOM_UPGRADE_RUNNING)
	limit    time.Duration // the whole soak's bound (FATHOM_UPGRADE_TIMEOUT)
	out      string        // a file the summary is also written to (FATHOM_UPGRADE_OUT)
}

func upgradeConfigFromEnv(t *testing.T) upgradeConfig {
	t.Helper()
	c := upgradeConfig{from: os.Getenv("FATHOM_UPGRADE_FROM"), sessions: 12, running: 8, limit: 4 * time.Minute, out: os.Getenv("FATHOM_UPGRADE_OUT")}
	for name, p := range map[string]*int{"FATHOM_UPGRADE_SESSIONS": &c.sessions, "FATHOM_UPGRADE_RUNNING": &c.running} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("FATHOM_UPGRADE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FATHOM_UPGRADE_TIMEOUT=%q: want a positive duration", v)
		}
		c.limit = d
	}
	return c
}

// repoRoot is the repository holding this package (cmd/fathom).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// git runs git in the repository and returns its trimmed output.
func git(root string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
	}
	return strings.TrimSpace(string(out)), err
}

// buildRelease builds the fathom binary of git revision rev (a tag or commit of this
// repository) from its own tree (git archive, so nothing of the working tree leaks in)
// and returns its path. Binaries are kept in the user's cache by commit, so a second
// soak reuses them. A revision this clone does not hold (a shallow clone) skips the test.
func buildRelease(t *testing.T, rev string) (path, commit string) {
	t.Helper()
	root := repoRoot(t)
	commit, err := git(root, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil || commit == "" {
		t.Skipf("the predecessor %q is not in this clone (a shallow clone?): %v", rev, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "fathom", "releases")
	path = filepath.Join(dir, "fathom-"+commit)
	if _, err := os.Stat(path); err == nil {
		return path, commit
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", rev, err, out)
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	build := exec.Command("go", "build", "-ldflags=-X main.version="+rev, "-o", tmp, "./cmd/fathom")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", rev, err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path, commit
}

// predecessor is the revision an upgrade soak starts from: FATHOM_UPGRADE_FROM, else the
// newest release tag (v*) that is not this commit, else (a clone without tags) the newest
// entry of releases that is not this commit.
func predecessor(t *testing.T, from string) string {
	t.Helper()
	if from != "" {
		return from
	}
	root := repoRoot(t)
	if tag, err := git(root, "describe", "--tags", "--abbrev=0", "--match", "v*", "HEAD^"); err == nil && tag != "" {
		return tag
	}
	head, _ := git(root, "rev-parse", "HEAD")
	for i := len(releases) - 1; i >= 0; i-- {
		if releases[i].commit != head {
			return releases[i].commit
		}
	}
	t.Skip("no release precedes this commit")
	return ""
}

// TestUpgradeSoak is a rolling upgrade with sessions running: three members of the
// predecessor build (PostgreSQL, Consul, `fathom mock-llm` with 200 ms latency,
// code_execute in each member's sandbox) run sessions of four kinds in turn
// (upgradeKinds: sandboxed code steps, a step delegated to a coder sub-agent, a human
// wait its deadline ends, a tool call that waits for an approval given through a
// member's gateway or left to its deadline); each member in turn is drained
// (`POST /v1/node/drain`; a predecessor without it gets SIGTERM, its graceful leave) and
// replaced by a member of this build, while new sessions keep starting; then every
// session's journal is audited as TestSoak's are, with the longest stall of any session
// (the longest gap between two of its events, less any wait for a human up to its answer
// or deadline), and each kind's sessions are counted, failing the test unless every one
// shows what its kind does (a sub-agent's tool call, a wait ended by its deadline, an
// approval decided). Last, the predecessor is started on the
// upgraded journal: a predecessor of an older journal format must refuse with a clear
// message, one of the same format must start (rolling back is supported). The short variant runs in `make test-faults`; `make upgrade-soak` the full one.
//
// FATHOM_SOAK_LOGS=DIR (`make upgrade-soak SOAK_LOGS=DIR`) keeps the evidence: every
// member logs at --log-level debug and its stderr goes to DIR/NN-BUILD.log (a relative DIR
// is taken from cmd/fathom, where go test runs). The summary gives three stalls: the
// longest, the longest while members were replaced (from the first drain until the last
// new member is up), and the longest once a tool call's own duration on its member is
// taken out of the gap before its result (what hand-overs and the journal add: a loaded
// sandbox makes the other two long). For each it names the two events around it with
// their times (a tool_result with its call's duration on the member and its program's in
// the sandbox) and, with FATHOM_SOAK_LOGS, the member whose activation wrote each (read
// from the members' "session activated"/"session deactivated" debug lines).
func TestUpgradeSoak(t *testing.T) {
	testenv.Faults(t)
	cfg := upgradeConfigFromEnv(t)
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	from := predecessor(t, cfg.from)
	oldBin, commit := buildRelease(t, from)
	began := time.Now()
	deadline := began.Add(cfg.limit)
	latency := 200 * time.Millisecond
	model := startMockLLM(t, upgradeScript(t, latency))
	cfgFile := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(cfgFile, []byte("approval:\n  tools: [write_todos]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The flags both builds take; this build's members also check in with Consul every 2 s.
	common := []string{"--consul", consul, "--postgres", dsn, "--token", "t", "--lease-ttl", "5s", "--cluster-name", "fathom-upgrade-" + freePort(t),
		"--config", cfgFile}
	r := &soakRun{t: t, cfg: soakConfig{sessions: cfg.sessions, running: cfg.running, nodes: 3}, conn: connectPG(t, dsn),
		prefix: "upgrade-" + freePort(t), env: cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x"), common: common,
		goal: func(i int, id string) string { return fmt.Sprintf("soak %s kind-%s", id, upgradeKind(i)) }}
	for range 3 {
		r.nodes = append(r.nodes, r.start(oldBin, common...))
	}
	r.awaitAll()
	ap := startApprover(t, dsn, r.prefix)
	ap.set(r.nodes, nil)
	oldFormat := journalFormatOf(t, r.nodes[0].url)
	if oldFormat == 0 {
		// Such a member counts as journal format 1, and this build's events are all newer:
		// the lowest-format gate holds every session's events until no such member is left.
		t.Fatalf("the predecessor %s advertises no journal format (a build before v0.3.0): upgrades from it go through v0.3.0 (docs/operations.md, Upgrades); set FATHOM_UPGRADE_FROM to a release", from)
	}
	r.topUp()
	var ways []string
	// Sessions keep starting (past cfg.sessions if need be) until the last member is
	// replaced, so that cfg.running of them run through every replacement: the sessions
	// first started end within a minute, before the last members go.
	r.keepUp = true
	r.window[0] = time.Now()
	for i := range r.nodes {
		if time.Now().After(deadline) {
			t.Fatalf("the upgrade ran out of time (%s) after %d of 3 members", cfg.limit, i)
		}
		// Sessions run on every member before it goes: each replacement moves some.
		testenv.Eventually(t, time.Minute, func() bool {
			r.topUp()
			return len(r.leased(r.nodes[i].member)) > 0
		}, "member %s hosts no running session", r.nodes[i].member)
		ap.set(r.nodes, r.nodes[i])
		ways = append(ways, retire(t, r.nodes[i]))
		r.nodes[i] = r.start(fathomBin, append(common, "--consul-check-ttl", "2s")...)
		r.nodes[i].await(t)
		ap.set(r.nodes, nil)
		r.topUp()
	}
	r.window[1] = time.Now()
	r.keepUp = false
	for len(r.ids) < cfg.sessions && time.Now().Before(deadline) {
		r.topUp()
		time.Sleep(200 * time.Millisecond)
	}
	a := r.finish(deadline, dsn)
	a.duration = time.Since(began)
	ap.stop()
	downgrade := tryDowngrade(t, oldBin, oldFormat, r.env, common)
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "upgrade: %-40s %v\n", k, v) }
	line("from", fmt.Sprintf("%s (%s) to this tree", from, commit[:12]))
	line("members replaced", strings.Join(ways, ", "))
	line("duration", a.duration.Round(time.Second))
	a.counts(line)
	missing := kindLines(r.ids, a, ap, line)
	if a.moved >= 0 {
		line("tool calls handed over before their result", a.moved)
		for _, c := range a.movedCalls {
			line("  handed over", c)
		}
		line("sandbox executions cancelled (calls cut)", a.cancelled)
	}
	r.stallLines("longest stall of any session", a.stall, line)
	r.stallLines("longest stall while members were replaced", a.during, line)
	r.stallLines("longest stall beside the tools' own time", a.beside, line)
	line("downgrade to the predecessor", downgrade)
	a.listProblems(line)
	summary := b.String()
	publish(t, summary, cfg.out)
	if a.failed+a.stuck+a.lost+a.duplicated+a.reexecuted > 0 {
		t.Fatalf("the upgrade found problems:\n%s", summary)
	}
	if len(missing) > 0 {
		t.Errorf("sessions of kinds %v did not all do what their kind does (see the summary)", missing)
	}
	// The target is on what the upgrade adds: a gap less the tool call's own time on its
	// member (its program and its wait for a sandbox slot, which measure the machine's
	// sandbox capacity), as the kill -9 soak leaves out the model call's own latency.
	if a.beside.gap > 5*time.Second {
		t.Errorf("a session stalled %s beside its tool calls' own time during the upgrade (target ≤ 5s)", a.beside.gap.Round(time.Millisecond))
	}
	switch sameFormat := oldFormat == buildinfo.Format; {
	case sameFormat && !strings.HasPrefix(downgrade, "started"):
		t.Errorf("the predecessor writes this build's journal format (%d), so rolling back to it must work: %s", oldFormat, downgrade)
	case !sameFormat && oldFormat != 0 && strings.HasPrefix(downgrade, "started"):
		t.Errorf("the predecessor knows journal formats but ran on a journal of a newer one: %s", downgrade)
	}
	for _, n := range r.nodes {
		n.stop(t)
	}
}

// journalFormatOf reads the journal format a member advertises on /readyz (0: a build
// from before format versions).
func journalFormatOf(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("readyz of %s: %v", url, err)
	}
	res.Body.Close()
	n, _ := strconv.Atoi(res.Header.Get("Fathom-Journal-Format"))
	return n
}

// retire takes a member out of the cluster as an operator would before replacing it:
// drain (POST /v1/node/drain) where its build has it, else SIGTERM; it returns which,
// with the drain's report (the sessions the member had, the ones whose calls it cut).
func retire(t *testing.T, n *soakNode) string {
	t.Helper()
	code, body := httpJSON(t, "POST", n.url+"/v1/node/drain", "t", map[string]any{})
	how := fmt.Sprintf("drain (%v sessions, %d cut, %vms)", body["sessions"], len(asSlice(body["cut"])), body["took_ms"])
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		how = "SIGTERM (no drain in that build)"
	} else if code/100 != 2 {
		t.Fatalf("drain %s: %d %v", n.member, code, body)
	}
	n.stop(t)
	return how
}

// asSlice is v as a JSON array (nil when it is none).
func asSlice(v any) []any {
	a, _ := v.([]any)
	return a
}

// tryDowngrade starts the predecessor on the upgraded journal and says what happened: a
// build that knows journal formats (format > 0) must exit with a clear message.
func tryDowngrade(t *testing.T, oldBin string, oldFormat int, env, common []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, oldBin, append([]string{"node", "--listen", "127.0.0.1:0"}, common...)...)
	cmd.Env, cmd.Dir = env, t.TempDir()
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	banner := regexp.MustCompile(`listening on http://`)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			msg := strings.TrimSpace(out.String())
			if i := strings.LastIndex(msg, "\n"); i >= 0 {
				msg = msg[i+1:]
			}
			return fmt.Sprintf("refused (%v): %s", err, msg)
		case <-tick.C:
			if banner.MatchString(out.String()) {
				_ = cmd.Process.Kill()
				<-done
				if oldFormat == 0 {
					return "not refused: the predecessor predates journal format versions (it reads every schema)"
				}
				if oldFormat == buildinfo.Format {
					return fmt.Sprintf("started: the same journal format (%d), so rolling back is supported", oldFormat)
				}
				return fmt.Sprintf("started: journal format %d build ran on the upgraded journal", oldFormat)
			}
		case <-ctx.Done():
			<-done
			return "neither refused nor started within 60s:\n" + out.String()
		}
	}
}

// upgradeKinds are the kinds of session the upgrade soak runs, round-robin by the
// session's index (so every kind runs through every replacement); a session's goal names
// its kind ("kind-NAME"), which upgradeScript's rules answer by:
//   - code: soakScript's four steps, each running a program in the sandbox (code_execute);
//   - sub-agent: one "code" step delegated to a coder sub-agent, which runs a program in
//     the sandbox and hands back;
//   - human: a human_input step nobody answers, whose deadline (interrupt_timeout_ms
//     1500, default_action continue) ends the wait on its own, then a sandboxed step;
//   - approval: a step whose write_todos call needs an approval (the members' config
//     file lists write_todos under approval.tools); for every other one of them
//     (leftToDeadline) an approver answers it through a random member's gateway after a
//     short delay; the rest, and any the approver is late for, the step's deadline
//     (interrupt_timeout_ms 3000, default action continue: the call is rejected) decides.
var upgradeKinds = []string{"code", "sub-agent", "human", "approval"}

// upgradeKind is the kind of the i-th session.
func upgradeKind(i int) string { return upgradeKinds[i%len(upgradeKinds)] }

// leftToDeadline reports whether the approval of the i-th session (of kind approval) is
// left to its deadline: every other one.
func leftToDeadline(i int) bool { return (i/len(upgradeKinds))%2 == 1 }

// upgradeScript is soakScript with, ahead of its rules, the rules of the other kinds
// (upgradeKinds), which match only goals naming their kind.
func upgradeScript(t *testing.T, latency time.Duration) string {
	t.Helper()
	base, err := mock.ParseScript([]byte(soakScript(latency)))
	if err != nil {
		t.Fatal(err)
	}
	ms := int(latency / time.Millisecond)
	code := mock.ToolCallRule{Name: "code_execute", Arguments: `{"language":"python","code":"print(sum(range(1000)))"}`}
	kinds := []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "kind-sub-agent", DelayMS: ms,
			Response: `{"steps":[{"id":"r","type":"code","description":"compute it with a program"}]}`},
		{SystemMatch: "FATHOM-ROLE: coder", ToolMatch: `"stdout"|Tool .code_execute. failed`, DelayMS: ms,
			Response: "Computed.\n```json\n{\"status\":\"completed\",\"summary\":\"the program ran\",\"confidence\":0.9}\n```"},
		{SystemMatch: "FATHOM-ROLE: coder", DelayMS: ms, ToolCalls: []mock.ToolCallRule{code}},
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "kind-human", DelayMS: ms,
			Response: `{"steps":[{"id":"ask","type":"human_input","description":"How many copies?","interrupt_timeout_ms":1500,"default_action":"continue"},` +
				`{"id":"use","type":"custom","description":"print them"}]}`},
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "kind-approval", DelayMS: ms,
			Response: `{"steps":[{"id":"w","type":"custom","description":"keep the todo list","interrupt_timeout_ms":3000}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "kind-approval", ToolMatch: ".", DelayMS: ms, Response: "noted {{.Step}}"},
		{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: "kind-approval", DelayMS: ms,
			ToolCalls: []mock.ToolCallRule{{Name: "write_todos", Arguments: `{"todos":[{"content":"soak todo","status":"pending"}]}`}}},
	}
	base.Rules = append(kinds, base.Rules...)
	return scriptJSON(t, base)
}

// approver answers the approval sessions' requests (but the ones leftToDeadline) ({"decision":"approve"}, POST
// /v1/sessions/{id}/input) through a random live member, a random 200–1000 ms after the
// index first shows the session awaiting a human. It runs until stop.
type approver struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	urls   []string // the live members' gateways
	// approved counts the approvals the gateway took (200); refused the other answers
	// (the next tick tries again while the request is open).
	approved, refused atomic.Int32
	cancel            context.CancelFunc
	done              chan struct{}
}

// startApprover starts the approver of the sessions of prefix with its own connection.
func startApprover(t *testing.T, dsn, prefix string) *approver {
	t.Helper()
	conn := connectPG(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	a := &approver{t: t, prefix: prefix, cancel: cancel, done: make(chan struct{})}
	go a.run(ctx, conn)
	t.Cleanup(a.stop)
	return a
}

// set replaces the gateways the approver answers through.
func (a *approver) set(nodes []*soakNode, except *soakNode) {
	var urls []string
	for _, n := range nodes {
		if n != except && n.ready == nil && n.url != "" {
			urls = append(urls, n.url)
		}
	}
	a.mu.Lock()
	a.urls = urls
	a.mu.Unlock()
}

// stop stops the approver and waits for it (idempotent).
func (a *approver) stop() {
	a.cancel()
	<-a.done
}

func (a *approver) run(ctx context.Context, conn *pgx.Conn) {
	defer close(a.done)
	due := map[string]time.Time{}
	answered := map[string]bool{}
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := conn.Query(ctx, `SELECT session_id FROM fathom_sessions WHERE session_id LIKE $1 AND status = 'awaiting_human'`, a.prefix+"-%")
		if err != nil {
			if ctx.Err() == nil {
				a.t.Logf("approver: %v", err)
			}
			continue
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			continue
		}
		a.mu.Lock()
		urls := a.urls
		a.mu.Unlock()
		for _, id := range ids {
			i, err := strconv.Atoi(strings.TrimPrefix(id, a.prefix+"-"))
			if err != nil || upgradeKind(i) != "approval" || leftToDeadline(i) || answered[id] || len(urls) == 0 {
				continue
			}
			if _, ok := due[id]; !ok {
				due[id] = time.Now().Add(time.Duration(200+rand.IntN(800)) * time.Millisecond)
			}
			if time.Now().Before(due[id]) {
				continue
			}
			code, err := postJSON(ctx, client, urls[rand.IntN(len(urls))]+"/v1/sessions/"+id+"/input",
				map[string]any{"step_id": "w", "command_id": "approve", "input": map[string]any{"decision": "approve"}})
			if code == http.StatusOK {
				answered[id] = true
				a.approved.Add(1)
			} else {
				a.refused.Add(1)
				a.t.Logf("approver: approve %s: %d %v", id, code, err)
			}
		}
	}
}

// postJSON posts body with the soak's token and returns the status code (0 with the
// error when there is no answer).
func postJSON(ctx context.Context, client *http.Client, url string, body any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("encode the body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("make the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer t")
	res, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post %s: %w", url, err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, fmt.Errorf("%s", strings.TrimSpace(string(msg)))
	}
	return res.StatusCode, nil
}

// kindLines writes, with line, each kind's sessions (started, completed) and what their
// journals show of the kind; it returns the kinds whose sessions do not all show it.
func kindLines(ids []string, a *soakAudit, ap *approver, line func(k string, v any)) (missing []string) {
	type tally struct{ started, completed, shown, byHuman, byTimeout int }
	byKind := map[string]*tally{}
	for i, id := range ids {
		k := upgradeKind(i)
		if byKind[k] == nil {
			byKind[k] = &tally{}
		}
		c := byKind[k]
		c.started++
		if a.ends[id] == "session_completed" {
			c.completed++
		}
		m := a.marks[id]
		c.byHuman += m["hitl_received by human"]
		c.byTimeout += m["hitl_received by timeout"]
		switch k {
		case "code":
			c.shown++
		case "sub-agent":
			if m["sub-agent tool_result"] > 0 {
				c.shown++
			}
		case "human":
			if m["hitl_received by timeout"] > 0 {
				c.shown++
			}
		case "approval":
			if m["hitl_received by human"]+m["hitl_received by timeout"] > 0 {
				c.shown++
			}
		}
	}
	what := map[string]string{
		"code":      "four sandboxed steps",
		"sub-agent": "with a sub-agent's sandboxed tool call",
		"human":     "whose human wait ended at its deadline",
		"approval":  "whose approval was decided",
	}
	for _, k := range upgradeKinds {
		c := byKind[k]
		if c == nil {
			c = &tally{}
		}
		v := fmt.Sprintf("%d started, %d completed, %d %s", c.started, c.completed, c.shown, what[k])
		if k == "approval" {
			v += fmt.Sprintf(" (%d approved by the soak through a gateway, %d by the deadline; %d answers refused and retried)",
				c.byHuman, c.byTimeout, ap.refused.Load())
		}
		line("sessions of kind "+k, v)
		if c.shown < c.started {
			missing = append(missing, k)
		}
	}
	return missing
}

// TestReleasesNameTheirTags checks releases against this clone: every release is a commit
// the clone holds, and every release tag the clone has names the commit releases gives
// (a clone without tags, as CI's, checks the commits only). The upgrade soak of a clone
// without tags starts from releases' newest entry, so it must be the newest tag's commit.
func TestReleasesNameTheirTags(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	if shallow, _ := git(root, "rev-parse", "--is-shallow-repository"); shallow == "true" {
		t.Skip("a shallow clone holds no releases")
	}
	listed := map[string]string{}
	for _, r := range releases {
		listed[r.tag] = r.commit
		if c, err := git(root, "rev-parse", "--verify", "--quiet", r.commit+"^{commit}"); err != nil || c != r.commit {
			t.Errorf("release %s: commit %s is not in this clone (%v)", r.tag, r.commit, err)
		}
	}
	tags, err := git(root, "tag", "--list", "v*")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range strings.Fields(tags) {
		c, err := git(root, "rev-parse", tag+"^{commit}")
		if err != nil {
			t.Fatal(err)
		}
		if listed[tag] != c {
			t.Errorf("tag %s names commit %s; releases gives %q: add the release to releases", tag, c, listed[tag])
		}
	}
}
