package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// fathomBin is the binary under test, built once by TestMain: these tests drive the
// real command line, as a user would.
var fathomBin string

// testVersion is the version the tests' binary is built with (-ldflags -X main.version).
const testVersion = "v0.0.0-test"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fathom-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fathomBin = filepath.Join(dir, "fathom")
	build := exec.Command("go", "build", "-ldflags=-X main.version="+testVersion, "-o", fathomBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fathom:", err)
		os.Exit(1)
	}
	_, statErr := os.Stat(".fathom")
	hadDataDir := statErr == nil
	code := m.Run()
	os.RemoveAll(dir)
	// Every command a test runs starts in a temporary directory: the default data dir
	// (.fathom) must never appear in the package.
	if _, err := os.Stat(".fathom"); err == nil && !hadDataDir && code == 0 {
		fmt.Fprintln(os.Stderr, "a test wrote the default data dir .fathom into the package: run commands in t.TempDir()")
		code = 1
	}
	os.Exit(code)
}

// cleanEnv is the environment without any Fathom or OpenAI configuration of the machine.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OPENAI_") || strings.HasPrefix(kv, "ANTHROPIC_") || strings.HasPrefix(kv, "FATHOM_") || strings.HasPrefix(kv, "CONSUL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

type result struct {
	stdout, stderr string
	code           int
}

func fathom(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fathomBin, args...)
	cmd.Env, cmd.Dir = env, t.TempDir() // the default data dir lands there, not in the package
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("fathom %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// jsonEvents parses --json output and checks the envelope of every line.
func jsonEvents(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %q: %v", len(evs)+1, sc.Text(), err)
		}
		for _, k := range []string{"type", "seq", "session_id", "at"} {
			if _, ok := ev[k]; !ok {
				t.Fatalf("line %d has no %q: %s", len(evs)+1, k, sc.Text())
			}
		}
		if ev["seq"] != float64(len(evs)+1) {
			t.Fatalf("line %d has seq %v", len(evs)+1, ev["seq"])
		}
		if _, err := time.Parse(time.RFC3339Nano, ev["at"].(string)); err != nil {
			t.Fatalf("line %d: bad at: %v", len(evs)+1, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func checkCompletedRun(t *testing.T, evs []map[string]any) string {
	t.Helper()
	if len(evs) < 6 {
		t.Fatalf("only %d events", len(evs))
	}
	if evs[0]["type"] != "session_started" || evs[len(evs)-1]["type"] != "session_completed" {
		t.Fatalf("events go from %v to %v", evs[0]["type"], evs[len(evs)-1]["type"])
	}
	seen := map[string]int{}
	for _, ev := range evs {
		seen[ev["type"].(string)]++
	}
	if seen["plan_created"] != 1 || seen["step_completed"] < 1 || seen["step_completed"] != seen["step_started"] {
		t.Fatalf("event mix %v", seen)
	}
	return evs[0]["session_id"].(string)
}

func TestRunOnEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Write a haiku about event sourcing")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "built-in demo model") {
		t.Fatalf("run did not say it uses the demo model; stderr:\n%s", r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	id := checkCompletedRun(t, evs)
	if !strings.Contains(fmt.Sprint(evs[0]["goal"]), "haiku") {
		t.Fatalf("session_started has goal %v", evs[0]["goal"])
	}

	// The stored timeline is exactly what was streamed.
	tl := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, "--json", id)
	if tl.code != 0 || tl.stdout != r.stdout {
		t.Fatalf("timeline (exit %d) differs from the live stream:\n%s\nvs\n%s\n%s", tl.code, tl.stdout, r.stdout, tl.stderr)
	}
	st := fathom(t, cleanEnv(), "session", "state", "--data-dir", data, id)
	var state map[string]any
	if err := json.Unmarshal([]byte(st.stdout), &state); err != nil || st.code != 0 {
		t.Fatalf("state (exit %d): %v\n%s%s", st.code, err, st.stdout, st.stderr)
	}
	if state["status"] != "SESSION_STATUS_COMPLETED" || state["session_id"] != id {
		t.Fatalf("state %v", state)
	}
	ls := fathom(t, cleanEnv(), "session", "list", "--data-dir", data)
	if ls.code != 0 || !strings.Contains(ls.stdout, id) {
		t.Fatalf("list (exit %d) lacks %s:\n%s%s", ls.code, id, ls.stdout, ls.stderr)
	}
	// Human-readable timeline too.
	tl = fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, id)
	if tl.code != 0 || !strings.Contains(tl.stdout, "session_completed") {
		t.Fatalf("text timeline (exit %d):\n%s%s", tl.code, tl.stdout, tl.stderr)
	}
}

func TestRunHumanOutput(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "run", "--data-dir", t.TempDir(), "Explain virtual actors")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The delegated plan shows: each step handed to a sub-agent, the sub-agents' tool
	// loops (tagged with their ids), their hand-offs, the artifacts, and the closing
	// summary, streamed live and printed once.
	for _, want := range []string{"goal: Explain virtual actors", "plan: 4 steps", "step 1/4", "delegated to researcher-1 (researcher)",
		"[researcher-1] → tool write_todos", "[researcher-1] ← tool write_todos", "[~] Work out what the goal asks for", "1 tool call(s)",
		"/research/notes.md", "↲ researcher-1 handed off: completed", "delegated to coder-1 (coder)", "delegated to writer-1 (writer)",
		// The coder's code_execute runs in the local sandbox; its stdout streams live.
		"[coder-1] → tool code_execute", "    │ 4 words, 18 letters\n", "[coder-1] ← tool code_execute",
		"[reviewer-1] → tool read_artifact", "… writing the closing summary", "session completed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "(demo model) Summary for: Explain virtual actors"); n != 1 {
		t.Errorf("the closing summary is printed %d times, want once:\n%s", n, r.stdout)
	}
	// --no-stream: no deltas, the result is printed from session_completed instead.
	r = fathom(t, cleanEnv(), "run", "--no-stream", "--data-dir", t.TempDir(), "Explain virtual actors")
	if r.code != 0 || strings.Count(r.stdout, "(demo model) Summary for: Explain virtual actors") != 1 {
		t.Fatalf("--no-stream: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestRunOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	r := fathom(t, cleanEnv(), "run", "--postgres", dsn, "--json", "Summarise the CAP theorem")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := checkCompletedRun(t, jsonEvents(t, r.stdout))
	tl := fathom(t, cleanEnv(), "session", "timeline", "--postgres", dsn, "--json", id)
	if tl.code != 0 || tl.stdout != r.stdout {
		t.Fatalf("timeline from PostgreSQL (exit %d) differs:\n%s\n%s", tl.code, tl.stdout, tl.stderr)
	}
	if m := fathom(t, cleanEnv(), "migrate", "--postgres", dsn); m.code != 0 {
		t.Fatalf("migrate again (exit %d): %s", m.code, m.stderr)
	}
}

// TestRunWithPgvector: `fathom run --vector-store pgvector` stores the session's
// message embeddings in PostgreSQL, one row per recorded message with text, with the
// hash embedder (256 dimensions; and --context-budget, whose value every step call's
// context reports) and then with the OpenAI embedder served by the demo model (64
// dimensions) on the same database.
func TestRunWithPgvector(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	for i, c := range []struct {
		args []string
		dims int
	}{
		// A recent share of 0 puts the embedding threshold (half the recent share of the
		// budget) at 0: every history message is embedded. With the default ratios a
		// session this short stays below it and stores none (actors/session
		// TestLazyEmbedding).
		{[]string{"--embedder", "hash", "--context-budget", "6000", "--context-ratios", "0/70/30", "--summary-target", "1000"}, 256},
		{[]string{"--embedder", "openai", "--embedding-dim", "64", "--context-ratios", "0/50/50"}, 64},
	} {
		args := append([]string{"run", "--postgres", dsn, "--vector-store", "pgvector", "--json"}, c.args...)
		r := fathom(t, cleanEnv(), append(args, "Summarise the CAP theorem")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", c.args, r.code, r.stdout, r.stderr)
		}
		evs := jsonEvents(t, r.stdout)
		id := checkCompletedRun(t, evs)
		var want []int64
		for _, ev := range evs {
			str := func(k string) string { v, _ := ev[k].(string); return v }
			text := false
			// The orchestrator's history is embedded: step openings, its own answers and
			// tool results, and outputs that are messages of their own (hand-offs); a
			// sub-agent's context is its own and is not.
			own := str("sub_agent_id") == ""
			switch ev["type"] {
			case "step_started":
				text = true
			case "llm_responded": // the planner's answer and the closing summary (no step) are not history
				text = own && str("step_id") != "" && str("content") != ""
			case "tool_result":
				text = own && (str("result") != "" || ev["error"] != nil)
			case "step_completed":
				text = ev["output_tokens"] != nil && ev["output_tokens"] != float64(0)
			}
			if text {
				want = append(want, int64(ev["seq"].(float64)))
			}
		}
		wantBudget := float64(32000)
		if i == 0 {
			wantBudget = 6000 // --context-budget
		}
		for _, ev := range evs {
			if ctx, ok := ev["context"].(map[string]any); ok && ctx["budget"] != wantBudget {
				t.Fatalf("%v: llm_responded %v has context budget %v, want %v", c.args, ev["seq"], ctx["budget"], wantBudget)
			}
		}
		got, dims := vectorRows(t, dsn, id)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v: fathom_vectors holds seqs %v of %s, want %v", c.args, got, id, want)
		}
		for _, d := range dims {
			if d != c.dims {
				t.Fatalf("%v: stored dimensions %v, want %d", c.args, dims, c.dims)
			}
		}
		if i == 1 && !strings.Contains(r.stderr, "other dimensions") {
			t.Errorf("no warning about the 256-dimension vectors of the first run:\n%s", r.stderr)
		}
	}
}

// vectorRows returns the seqs and dimensions of stream's rows in fathom_vectors.
func vectorRows(t *testing.T, dsn, stream string) (seqs []int64, dims []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT seq, dims FROM fathom_vectors WHERE stream_id = $1 ORDER BY seq", stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var d int
		if err := rows.Scan(&seq, &d); err != nil {
			t.Fatal(err)
		}
		seqs, dims = append(seqs, seq), append(dims, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return seqs, dims
}

func TestRunWithAnOpenAICompatibleServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, fathomBin, "mock-llm", "--listen", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	base := waitLine(t, out, regexp.MustCompile(`(http://\S+/v1)`))
	r := fathom(t, cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model"), "run", "--data-dir", t.TempDir(), "--json", "Plan a picnic")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "demo model") {
		t.Fatalf("used the demo model although OPENAI_BASE_URL was set:\n%s", r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	checkCompletedRun(t, evs)
	if evs[0]["config"].(map[string]any)["model"] != "mock-model" {
		t.Fatalf("FATHOM_MODEL not used: %v", evs[0]["config"])
	}
}

// waitLine reads lines from r until re matches and returns its first group.
func waitLine(t *testing.T, r io.Reader, re *regexp.Regexp) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case s := <-found:
		return s
	case <-time.After(60 * time.Second):
		t.Fatalf("no line matching %s", re)
		return ""
	}
}

func TestBadInputGetsClearErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.MkdirAll(corrupt, 0o755); err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a journal "), 1000)
	if err := os.WriteFile(filepath.Join(corrupt, "journal.db"), garbage, 0o644); err != nil {
		t.Fatal(err)
	}
	deadPG := "postgres://postgres@127.0.0.1:" + freePort(t) + "/postgres?sslmode=disable&connect_timeout=2"
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no goal", []string{"run", "--data-dir", dir}, 2, "a goal is required"},
		{"empty goal", []string{"run", "--data-dir", dir, "   "}, 1, "goal is empty"},
		{"unreadable data dir", []string{"run", "--data-dir", filepath.Join(file, "sub"), "goal"}, 1, "data dir"},
		{"corrupt journal", []string{"run", "--data-dir", corrupt, "goal"}, 1, "corrupt"},
		{"postgres down at start", []string{"run", "--postgres", deadPG, "goal"}, 1, "postgres"},
		{"unknown session", []string{"session", "timeline", "--data-dir", dir, "no-such-session"}, 1, "not found"},
		{"unknown session state", []string{"session", "state", "--data-dir", dir, "no-such-session"}, 1, "not found"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"bad flag", []string{"run", "--no-such-flag", "goal"}, 2, "no-such-flag"},
		{"no sub-agents allowed", []string{"run", "--data-dir", dir, "--max-parallel-subagents", "0", "goal"}, 2, "--max-parallel-subagents and --subagent-max-iterations must be at least 1"},
		{"migrate without dsn", []string{"migrate"}, 2, "--postgres"},
		{"unknown llm api", []string{"run", "--data-dir", dir, "--llm-api", "gemini", "goal"}, 2, "bad --llm-api"},
		{"missing price file", []string{"run", "--data-dir", dir, "--prices", filepath.Join(dir, "nope.json"), "goal"}, 2, "price table"},
		{"bad price file", []string{"run", "--data-dir", dir, "--prices", file, "goal"}, 2, "price table"},
		{"inline JSON prices", []string{"run", "--data-dir", dir, "--prices", `{"m":{"input_per_mtok":1}}`, "goal"}, 2, "--prices takes the path of a JSON price FILE"},
		{"unknown otel exporter", []string{"run", "--data-dir", dir, "--otel-exporter", "bogus", "goal"}, 2, `unknown exporter "bogus"`},
		{"node with unknown otel exporter", []string{"node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--otel-exporter", "bogus"}, 2, `unknown exporter "bogus"`},
		{"bad searxng url", []string{"run", "--data-dir", dir, "--searxng-url", "ftp://search", "goal"}, 2, "--searxng-url"},
		{"zero step attempts", []string{"run", "--data-dir", dir, "--step-attempts", "0", "goal"}, 2, "step attempts"},
		{"pgvector without postgres", []string{"run", "--data-dir", dir, "--vector-store", "pgvector", "goal"}, 2, "needs PostgreSQL: set a PostgreSQL DSN (--postgres)"},
		{"unknown vector store", []string{"run", "--data-dir", dir, "--vector-store", "faiss", "goal"}, 2, `unknown vector store "faiss"`},
		{"unknown embedder", []string{"run", "--data-dir", dir, "--embedder", "word2vec", "goal"}, 2, `unknown embedder "word2vec"`},
		{"embedding model for hash", []string{"run", "--data-dir", dir, "--embedding-model", "text-embedding-3-large", "goal"}, 2, "only for the openai embedder"},
		{"glove without word vectors", []string{"run", "--data-dir", dir, "--embedder", "glove", "goal"}, 2, "the glove embedder needs its word vectors"},
		{"word vectors for hash", []string{"run", "--data-dir", dir, "--embedding-vectors", "vectors.json", "goal"}, 2, "word vectors (vectors.json) are only for the glove embedder, not hash"},
		{"pgvector dimension too large", []string{"run", "--postgres", deadPG, "--vector-store", "pgvector", "--embedder", "openai", "--embedding-dim", "3072", "goal"}, 2, "more than pgvector indexes (2000)"},
		{"pgvector ef_search too large", []string{"run", "--postgres", deadPG, "--vector-store", "pgvector", "--pgvector-ef-search", "5000", "goal"}, 2, "--pgvector-ef-search 5000 is more than pgvector accepts (1000)"},
		{"pgvector ef_search for the memory store", []string{"run", "--data-dir", dir, "--pgvector-ef-search", "200", "goal"}, 2, "only for the pgvector vector store"},
		{"two context ratios", []string{"run", "--data-dir", dir, "--context-ratios", "50/50", "goal"}, 2, "bad --context-ratios"},
		{"context ratios not 100", []string{"run", "--data-dir", dir, "--context-ratios", "60/30/20", "goal"}, 2, "add up to 110"},
		{"zero context budget", []string{"run", "--data-dir", dir, "--context-budget", "0", "goal"}, 2, "must be positive"},
		{"context budget below the system prompts", []string{"run", "--data-dir", dir, "--context-budget", "1500", "--summary-target", "400", "goal"}, 2,
			"context budget 1500 (--context-budget) leaves no room beside the system prompts: the researcher prompt is"},
		{"summary larger than its tier", []string{"run", "--data-dir", dir, "--context-budget", "6000", "goal"}, 2, "--summary-target 2000 does not fit the context's summary tier (1800 tokens: 30% of --context-budget 6000)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			r := fathom(t, cleanEnv(), c.args...)
			if r.code != c.code || !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(c.want)) {
				t.Fatalf("exit %d (want %d), stderr does not say %q:\n%s", r.code, c.code, c.want, r.stderr)
			}
			if d := time.Since(began); d > 30*time.Second {
				t.Fatalf("took %s to fail", d)
			}
		})
	}
	for _, c := range []struct {
		name, env string
		args      []string
		code      int
		want      string
	}{
		{"bad ratios env", "FATHOM_CONTEXT_RATIOS=a/b/c", []string{"run", "--data-dir", dir, "goal"}, 2, "bad --context-ratios"},
		{"pgvector ef_search env", "FATHOM_PGVECTOR_EF_SEARCH=5000", []string{"run", "--postgres", deadPG, "--vector-store", "pgvector", "goal"}, 2, "--pgvector-ef-search 5000"},
		{"openai embedder without endpoint", "ANTHROPIC_API_KEY=k", []string{"run", "--data-dir", dir, "--llm-api", "anthropic", "--embedder", "openai", "goal"}, 1, "OPENAI_API_KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fathom(t, cleanEnv(c.env), c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d (want %d), stderr does not say %q:\n%s", r.code, c.code, c.want, r.stderr)
			}
		})
	}
	if after, err := os.ReadFile(filepath.Join(corrupt, "journal.db")); err != nil || !bytes.Equal(after, garbage) {
		t.Fatalf("the corrupt journal was modified (%v)", err)
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	if r := fathom(t, cleanEnv(), "help"); r.code != 0 || !strings.Contains(r.stdout, "mock-llm") {
		t.Fatalf("help (exit %d): %s", r.code, r.stdout)
	}
	if r := fathom(t, cleanEnv(), "run", "-h"); r.code != 0 || !strings.Contains(r.stderr, "--data-dir") && !strings.Contains(r.stderr, "-data-dir") {
		t.Fatalf("run -h (exit %d): %s", r.code, r.stderr)
	}
	if r := fathom(t, cleanEnv(), "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "fathom "+testVersion) {
		t.Fatalf("version (exit %d): %s", r.code, r.stdout)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// nodeProc is a `fathom node` subprocess.
type nodeProc struct {
	cmd    *exec.Cmd
	url    string
	member string
	stderr *testenv.Buffer
}

func startNode(t *testing.T, env []string, args ...string) *nodeProc {
	t.Helper()
	cmd := exec.Command(fathomBin, append([]string{"node", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env, cmd.Dir = env, t.TempDir() // the default data dir lands there, not in the package
	var errb testenv.Buffer             // written by os/exec's copier while tests read it
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &nodeProc{cmd: cmd, stderr: &errb}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("node stderr:\n%s", errb.String())
		}
	})
	line := waitLine(t, out, regexp.MustCompile(`(listening on .*)`))
	m := regexp.MustCompile(`listening on (http://\S+) \(cluster member (\S+)\)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("unexpected banner %q", line)
	}
	p.url, p.member = m[1], m[2]
	return p
}

func (p *nodeProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("node exited with %v\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("node did not stop within 30s of SIGTERM")
	}
}

func httpJSON(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestTwoNodesWithConsul starts two `fathom node` processes that find each other through
// a real Consul agent and share one PostgreSQL journal. Sessions started through either
// node land on both members (identity hashing) and are reachable from both.
func TestTwoNodesWithConsul(t *testing.T) {
	t.Parallel()
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	const token = "s3cret"
	env := cleanEnv()
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token, "--cluster-name", "fathom-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + freePort(t)}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)
	if code, _ := httpJSON(t, "GET", a.url+"/healthz", "", nil); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := httpJSON(t, "POST", a.url+"/v1/sessions", "", map[string]any{"goal": "x"}); code != 401 {
		t.Fatalf("no token: status %d, want 401", code)
	}
	hosts := map[string]int{}
	var ids []string
	testenv.Eventually(t, 60*time.Second, func() bool {
		// Start sessions through alternating nodes until both members host some.
		via := []*nodeProc{a, b}[len(ids)%2]
		code, body := httpJSON(t, "POST", via.url+"/v1/sessions", token, map[string]any{"goal": fmt.Sprintf("goal %d", len(ids))})
		if code != 201 {
			t.Logf("start via %s: %d %v", via.url, code, body)
			return false
		}
		ids = append(ids, body["session_id"].(string))
		_, st := httpJSON(t, "GET", via.url+"/v1/sessions/"+ids[len(ids)-1], token, nil)
		hosts[fmt.Sprint(st["host"])]++
		return hosts[a.member] > 0 && hosts[b.member] > 0
	}, "sessions were not placed on both members: %v (members %s, %s)", hosts, a.member, b.member)
	for _, id := range ids {
		var seen []string
		for _, n := range []*nodeProc{a, b} {
			code, st := httpJSON(t, "GET", n.url+"/v1/sessions/"+id, token, nil)
			if code != 200 {
				t.Fatalf("session %s via %s: %d %v", id, n.url, code, st)
			}
			seen = append(seen, fmt.Sprint(st["host"]))
		}
		if seen[0] != seen[1] {
			t.Fatalf("session %s has two activations: %v", id, seen)
		}
	}
	if code, body := httpJSON(t, "GET", b.url+"/v1/sessions/no-such-session", token, nil); code != 404 {
		t.Fatalf("unknown session: %d %v", code, body)
	}
	a.stop(t)
	b.stop(t)
}

func TestNodeFailsFastWithoutConsul(t *testing.T) {
	t.Parallel()
	began := time.Now()
	r := fathom(t, cleanEnv(), "node", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--consul", "127.0.0.1:"+freePort(t))
	if r.code == 0 || !strings.Contains(strings.ToLower(r.stderr), "consul") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Fatalf("took %s to fail", d)
	}
	if n := strings.Count(r.stderr, "\n"); n > 50 {
		t.Fatalf("%d lines of logs for one unreachable agent", n)
	}
}

// TestRunExportsSpans runs with the stdout exporter and checks the session, plan, step
// and LLM client spans reach it, with the GenAI token attributes.
func TestRunExportsSpans(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "run", "--data-dir", t.TempDir(), "--json", "--otel-exporter", "stdout", "trace me")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{`"Name":"invoke_agent orchestrator"`, `"Name":"session.activation"`, `"Name":"session.plan"`, `"Name":"session.step"`, `"Name":"chat `, `gen_ai.usage.input_tokens`} {
		if !strings.Contains(strings.ReplaceAll(r.stderr, `": "`, `":"`), want) {
			t.Errorf("stdout exporter output has no %s", want)
		}
	}
	if t.Failed() {
		t.Logf("stderr:\n%.4000s", r.stderr)
	}
}

// TestRunOverTheAnthropicAPI: with --llm-api anthropic and no key, the demo model is
// reached through the Anthropic Messages client (streamed, with the tool call).
func TestRunOverTheAnthropicAPI(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "run", "--llm-api", "anthropic", "--data-dir", t.TempDir(), "Explain virtual actors")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"← tool write_todos", "Events fall like rain", "session completed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}
