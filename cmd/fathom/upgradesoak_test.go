package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// firstRelease is the predecessor an upgrade soak starts from until the repository has a
// release tag: main as the upgrade issue was filed, whose journals every later build
// must read.
const firstRelease = "22f16bd"

// upgradeConfig sizes TestUpgradeSoak. The defaults are the short variant `make test-faults`
// runs; `make upgrade-soak` sets the FATHOM_UPGRADE_* variables to the full one.
type upgradeConfig struct {
	from     string        // the predecessor's git tag or commit (FATHOM_UPGRADE_FROM; default the newest v* tag, else firstRelease)
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
// newest release tag (v*) that is not this commit, else firstRelease.
func predecessor(t *testing.T, from string) string {
	t.Helper()
	if from != "" {
		return from
	}
	root := repoRoot(t)
	if tag, err := git(root, "describe", "--tags", "--abbrev=0", "--match", "v*", "HEAD^"); err == nil && tag != "" {
		return tag
	}
	return firstRelease
}

// TestUpgradeSoak is a rolling upgrade with sessions running: three members of the
// predecessor build (PostgreSQL, Consul, `fathom mock-llm` with 200 ms latency,
// code_execute in each member's sandbox) run sessions; each member in turn is drained
// (`POST /v1/node/drain`; a predecessor without it gets SIGTERM, its graceful leave) and
// replaced by a member of this build, while new sessions keep starting; then every
// session's journal is audited as TestSoak's are, with the longest stall of any session
// (the longest gap between two of its events). Last, the predecessor is started on the
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
	model := startMockLLM(t, soakScript(latency))
	// The flags both builds take; this build's members also check in with Consul every 2 s.
	common := []string{"--consul", consul, "--postgres", dsn, "--token", "t", "--lease-ttl", "5s", "--cluster-name", "fathom-upgrade-" + freePort(t)}
	r := &soakRun{t: t, cfg: soakConfig{sessions: cfg.sessions, running: cfg.running, nodes: 3}, conn: connectPG(t, dsn),
		prefix: "upgrade-" + freePort(t), env: cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x"), common: common}
	for range 3 {
		r.nodes = append(r.nodes, r.start(oldBin, common...))
	}
	r.awaitAll()
	oldFormat := journalFormatOf(t, r.nodes[0].url)
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
		ways = append(ways, retire(t, r.nodes[i]))
		r.nodes[i] = r.start(fathomBin, append(common, "--consul-check-ttl", "2s")...)
		r.nodes[i].await(t)
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
	downgrade := tryDowngrade(t, oldBin, oldFormat, r.env, common)
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "upgrade: %-40s %v\n", k, v) }
	line("from", fmt.Sprintf("%s (%s) to this tree", from, commit[:12]))
	line("members replaced", strings.Join(ways, ", "))
	line("duration", a.duration.Round(time.Second))
	a.counts(line)
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
