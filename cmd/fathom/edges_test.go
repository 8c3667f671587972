package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/llm/mock"
)

// TestReadOnlyCommandsNeverCreateTheDataDir: list, timeline, state, watch and
// artifacts on a data dir that does not exist answer at once (no session; the others
// "not found", exit 1) and leave no data dir or journal behind.
func TestReadOnlyCommandsNeverCreateTheDataDir(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "never-used")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"session", "list", "--data-dir", data}, 0},
		{[]string{"session", "timeline", "--data-dir", data, "s-1"}, 1},
		{[]string{"session", "state", "--data-dir", data, "s-1"}, 1},
		{[]string{"session", "watch", "--data-dir", data, "s-1"}, 1},
		{[]string{"session", "artifacts", "--data-dir", data, "s-1"}, 1},
	} {
		r := fathom(t, cleanEnv(), c.args...)
		if r.code != c.code || (c.code == 1 && !strings.Contains(r.stderr, `session "s-1" not found`)) {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args[:2], r.code, c.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v created the data dir %s (stat: %v)", c.args[:2], data, err)
		}
	}
}

// smashJournalPage overwrites the in-use page nearest the middle of the bbolt file at
// path with garbage and returns the file's new content.
func smashJournalPage(t *testing.T, path string) []byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil) // writable: a read-only open has no freelist for tx.Page
	if err != nil {
		t.Fatal(err)
	}
	pageSize, victim := db.Info().PageSize, -1
	err = db.View(func(tx *bbolt.Tx) error {
		pages := int(tx.Size()) / pageSize
		for d := 0; d <= pages/2 && victim < 0; d++ {
			for _, id := range []int{pages/2 + d, pages/2 - d} {
				if p, err := tx.Page(id); err == nil && p != nil && (p.Type == "leaf" || p.Type == "branch") {
					victim = id
					break
				}
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || victim < 0 {
		t.Fatalf("no page to smash in %s: %v", path, err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(content[victim*pageSize:(victim+1)*pageSize], bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x17}, pageSize/5+1))
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return content
}

// TestCorruptJournalPageIsRefused: a journal with sessions whose middle page was
// overwritten is refused by run (nothing written into it) and by the reading commands,
// with an error naming the file.
func TestCorruptJournalPageIsRefused(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	for _, goal := range []string{"Write a haiku about event sourcing", "Explain virtual actors"} {
		if r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", goal); r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
	}
	path := filepath.Join(data, "journal.db")
	content := smashJournalPage(t, path)
	for _, args := range [][]string{
		{"run", "--data-dir", data, "one more"},
		{"session", "list", "--data-dir", data},
		{"session", "timeline", "--data-dir", data, "s-1"},
	} {
		r := fathom(t, cleanEnv(), args...)
		if r.code != 1 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "corrupt") || !strings.Contains(r.stderr, "consistency check") {
			t.Errorf("%v: exit %d, want 1 and a consistency-check error naming %s\n%s", args[:2], r.code, path, r.stderr)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(after, content) {
			t.Fatalf("%v wrote into the corrupt journal", args[:2])
		}
	}
}

// TestSessionWatchOfAnUnknownSessionFails: watch answers "not found" (exit 1) at once,
// from the journal and through a node, instead of waiting silently.
func TestSessionWatchOfAnUnknownSessionFails(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	if r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Write a haiku about event sourcing"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	w := fathom(t, cleanEnv(), "session", "watch", "--data-dir", data, "no-such-session")
	if w.code != 1 || !strings.Contains(w.stderr, `session "no-such-session" not found`) {
		t.Fatalf("watch from the journal: exit %d\n%s%s", w.code, w.stdout, w.stderr)
	}
	const tok = "watch-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	w = fathom(t, cleanEnv(), "session", "watch", "--addr", p.url, "--token", tok, "no-such-session")
	if w.code != 1 || !strings.Contains(w.stderr, "404") || !strings.Contains(w.stderr, "not found") {
		t.Fatalf("watch through the node: exit %d\n%s%s", w.code, w.stdout, w.stderr)
	}
	p.stop(t)
}

// TestSessionSubcommandHelpListsOnlyItsOwnFlags: `fathom session SUB -h` lists the
// flags SUB takes and none of its siblings'.
func TestSessionSubcommandHelpListsOnlyItsOwnFlags(t *testing.T) {
	t.Parallel()
	flagLine := func(name string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `(\s|$)`)
	}
	for _, c := range []struct {
		sub       string
		want, not []string
	}{
		{"list", []string{"data-dir", "postgres", "json", "addr", "token", "status", "user", "goal", "since", "until", "limit", "cursor"}, []string{"at", "at-seq", "from", "out", "request-id", "new-id"}},
		{"delete", []string{"data-dir", "postgres", "json", "addr", "token"}, []string{"at", "at-seq", "from", "out", "request-id", "new-id", "status"}},
		{"timeline", []string{"data-dir", "json", "addr", "token"}, []string{"at", "at-seq", "from", "out"}},
		{"state", []string{"data-dir", "at", "at-seq", "addr"}, []string{"from", "json", "out", "new-id"}},
		{"watch", []string{"data-dir", "from", "json", "addr"}, []string{"at", "at-seq", "out"}},
		{"artifacts", []string{"data-dir", "out", "json", "addr"}, []string{"at", "at-seq", "from"}},
		{"input", []string{"data-dir", "request-id", "addr"}, []string{"at", "new-id", "from"}},
		{"fork", []string{"data-dir", "at", "at-seq", "new-id", "addr"}, []string{"request-id", "from"}},
	} {
		r := fathom(t, cleanEnv(), "session", c.sub, "-h")
		if r.code != 0 {
			t.Errorf("session %s -h: exit %d\n%s", c.sub, r.code, r.stderr)
		}
		for _, f := range c.want {
			if !flagLine(f).MatchString(r.stderr) {
				t.Errorf("session %s -h does not list -%s:\n%s", c.sub, f, r.stderr)
			}
		}
		for _, f := range c.not {
			if flagLine(f).MatchString(r.stderr) {
				t.Errorf("session %s -h lists -%s, which it does not take:\n%s", c.sub, f, r.stderr)
			}
		}
	}
}

// TestContinuedSessionShowsItsPlanAndDuration: `session input` and `session watch
// --from` join a session after its plan: steps are still numbered against the plan
// (2/2, not 2/0) and the duration is the session's (not an overflowed 2562047h).
func TestContinuedSessionShowsItsPlanAndDuration(t *testing.T) {
	t.Parallel()
	env := humanModel(t)
	data := filepath.Join(t.TempDir(), "data")
	if r := fathom(t, env, "run", "--data-dir", data, "--session-id", "c1", "print copies"); r.code != 3 {
		t.Fatalf("run: exit %d, want 3 (waits for a human)\n%s%s", r.code, r.stdout, r.stderr)
	}
	in := fathom(t, env, "session", "input", "--data-dir", data, "c1", "ask", `{"n": 2}`)
	tl := fathom(t, env, "session", "timeline", "--data-dir", data, "--json", "c1")
	from := ""
	for _, ev := range jsonEvents(t, tl.stdout) {
		if ev["type"] == "plan_created" {
			from = fmt.Sprint(ev["seq"])
		}
	}
	if from == "" {
		t.Fatalf("no plan_created in the timeline:\n%s", tl.stdout)
	}
	w := fathom(t, env, "session", "watch", "--data-dir", data, "--from", from, "c1")
	completed := regexp.MustCompile(`✓ session completed in (\S+) \(`)
	for name, r := range map[string]result{"input": in, "watch --from " + from: w} {
		if r.code != 0 || !strings.Contains(r.stdout, "… step 2/2 (custom): print them") || !strings.Contains(r.stdout, "✓ step 2/2 done") {
			t.Errorf("%s: exit %d, steps not numbered against the plan:\n%s%s", name, r.code, r.stdout, r.stderr)
			continue
		}
		m := completed.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Errorf("%s: no completion line with a duration:\n%s", name, r.stdout)
			continue
		}
		if d, err := time.ParseDuration(m[1]); err != nil || d <= 0 || d > 10*time.Minute {
			t.Errorf("%s: session took %q by the printer, not the session's real duration", name, m[1])
		}
	}
}

// TestDemoModelCostsNothing: the built-in demo model answers under the default model's
// name, which has a list price, but its calls cost 0 and the printer shows no dollar
// amount.
func TestDemoModelCostsNothing(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, cleanEnv(), "run", "--data-dir", data, "--json", "Explain virtual actors")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	id := checkCompletedRun(t, evs)
	for _, ev := range evs {
		if c, ok := ev["cost_usd"]; ok && c != float64(0) {
			t.Errorf("%v at seq %v costs %v with the demo model", ev["type"], ev["seq"], c)
		}
	}
	tl := fathom(t, cleanEnv(), "session", "timeline", "--data-dir", data, id)
	if tl.code != 0 || strings.Contains(tl.stdout, "$") {
		t.Fatalf("the text timeline (exit %d) shows a dollar cost for the demo model:\n%s", tl.code, tl.stdout)
	}
}

// TestSearXNGURLFlag: --searxng-url points web_search at a SearXNG instance (here one
// speaking its JSON API), exactly as FATHOM_SEARXNG_URL does; -h documents both.
func TestSearXNGURLFlag(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []string
	search := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		queries = append(queries, r.URL.Query().Get("q"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"results":[{"title":"Orleans","url":"https://learn.microsoft.com/orleans","content":"Virtual actors, activated on demand"}]}`))
	}))
	defer search.Close()
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"look it up\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","tool_match":"activated on demand","response":"Orleans has virtual actors."},
		{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"web_search","arguments":"{\"query\":\"virtual actors\"}"}]}],"default":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer model.Close()
	env := cleanEnv("OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model")
	r := fathom(t, env, "run", "--data-dir", t.TempDir(), "--searxng-url", search.URL, "Who has virtual actors?")
	if r.code != 0 || !strings.Contains(r.stdout, "← tool web_search") || !strings.Contains(r.stdout, "Orleans") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	got := strings.Join(queries, "|")
	mu.Unlock()
	if got != "virtual actors" {
		t.Fatalf("SearXNG saw queries %q, want one for \"virtual actors\"", got)
	}
	if h := fathom(t, cleanEnv(), "run", "-h"); !strings.Contains(h.stderr, "-searxng-url") || !strings.Contains(h.stderr, "FATHOM_SEARXNG_URL") {
		t.Fatalf("run -h does not document --searxng-url and FATHOM_SEARXNG_URL:\n%s", h.stderr)
	}
}

// TestNodeRefusesAnOpenNetworkListenerWithoutToken: with no token, a node listening
// beyond loopback refuses to start (usage error) unless --insecure says so; loopback
// without a token stays allowed (startNode).
func TestNodeRefusesAnOpenNetworkListenerWithoutToken(t *testing.T) {
	t.Parallel()
	r := fathom(t, cleanEnv(), "node", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "--insecure") || !strings.Contains(r.stderr, "--token") {
		t.Fatalf("exit %d, want 2 with advice on --token and --insecure\n%s", r.code, r.stderr)
	}
	p := startNode(t, cleanEnv(), "--listen", "0.0.0.0:0", "--insecure", "--data-dir", t.TempDir())
	p.stop(t)
	if !strings.Contains(p.stderr.String(), "without authentication") {
		t.Errorf("an --insecure node does not warn about it:\n%s", p.stderr)
	}
	local := startNode(t, cleanEnv(), "--data-dir", t.TempDir())
	local.stop(t)
}
