package archtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// module is the import path of Fathom's module; rule patterns are relative to it unless
// their first element has a dot (another module, e.g. Proto.Actor).
const module = "github.com/fathom-agents/fathom"

// protoActor is Proto.Actor's module.
const protoActor = "github.com/asynkron/protoactor-go/..."

// rule forbids the packages matching from to import, directly or through any chain of
// imports, a package matching deny (unless it also matches allow). Patterns are import
// paths, relative to the module; "x/..." is x and everything under it.
type rule struct {
	name  string
	from  []string
	deny  []string
	allow []string
	// opaque are packages the rule does not look through: their own imports are not
	// followed (for the agent actor: the wire types and the core it may use, whatever
	// they import).
	opaque []string
	// pending marks a rule for a part that does not exist yet: skipped (not failed)
	// while no package matches from.
	pending bool
	why     string
	// The rule holds for the from packages' test files (_test.go, in-package and
	// external) too: what a package's tests import, and everything that imports, is
	// checked like the package's own imports. testAllow are the packages a from
	// package's test files may import directly all the same (not looked through: they
	// are the exception, whatever they pull in), testWhy says why.
	testAllow []string
	testWhy   string
}

// realNode is what the gateway's tests import to run the gateway against a real node:
// internal/node and the starter of its tests, the grain and its core, the node's feed,
// the scripted model, a journal and its fault wrapper (to read back and to break), and
// the build information the node reports (which names the journal's format); and the
// in-memory journal its fakes keep their sessions in (gateway/fake_test.go). It is the
// test files' exception to the gateway's rules, not looked through.
var realNode = []string{"internal/node", "internal/node/nodetest", "actors/session", "actors/session/core",
	"live/feed", "llm/mock", "persistence", "persistence/artifact", "persistence/journaltest", "persistence/memjournal", "internal/buildinfo"}

// realNodeWhy is the reason of realNode.
const realNodeWhy = "the gateway's tests start a real node (internal/node over a real journal and the scripted model), or fakes of its interfaces over an in-memory journal and the session core, and read the journal back to check what the gateway did"

// rules is the map's import rules (docs/ARCHITECTURE.md, "Import rules").
var rules = []rule{
	{name: "libraries import no actors, cluster or gateway", from: []string{"llm/...", "tools/...", "memory/...", "prompts/...", "webhooks/..."},
		deny: []string{"actors/...", "cluster/...", "gateway/..."}, why: "libraries are called by actors, never the reverse"},
	{name: "persistence imports no actors", from: []string{"persistence/..."}, deny: []string{"actors/..."},
		why: "stores know records, not the grains that write them"},
	{name: "messages imports nothing of ours", from: []string{"messages/..."}, deny: []string{"..."}, allow: []string{"messages/..."},
		why: "the wire formats are the bottom of the graph"},
	{name: "auth imports only the wire formats", from: []string{"auth/..."}, deny: []string{"..."}, allow: []string{"auth/...", "messages/..."},
		why: "who is asking, and what a role may do, is decided the same way by the gateway, the grains and the Go API: no side may pull the others in"},
	{name: "transcript imports only the wire formats", from: []string{"transcript/..."}, deny: []string{"..."}, allow: []string{"transcript/...", "messages/..."},
		why: "the transcript is a pure fold of events: any reader (the gateway, a program) renders it from events it got anywhere"},
	{name: "the gateway imports no persistence", from: []string{"gateway/..."}, deny: []string{"persistence/..."},
		why:       "the gateway reaches sessions through grain clients and the live read side, never the journal",
		testAllow: realNode, testWhy: realNodeWhy},
	{name: "the gateway reads restart records from live", from: []string{"gateway/..."}, deny: []string{"actors/observer"},
		why:       "one restart record type, live.Restart: the observer keeps it, the gateway serves it without linking the observer",
		testAllow: realNode, testWhy: realNodeWhy},
	{name: "the gateway imports nothing of Fathom's cluster", from: []string{"gateway/..."}, deny: []string{"cluster/..."},
		why:       "the gateway reaches grains through messages/sessiongrain's grain client (which brings Proto.Actor's own cluster package, not ours) and follows sessions through the feed it is given (gateway.Feed), never cluster/topics",
		testAllow: realNode, testWhy: realNodeWhy},
	{name: "live imports no actors, no gateway and no cluster", from: []string{"live/..."}, deny: []string{"actors/...", "gateway/...", "cluster/..."},
		why: "the live read side serves readers; the grains publish to it; it survives a member's death by polling the journal, not through cluster/topics (Proto.Actor's best-effort pub-sub for Proto.Actor programs)"},
	{name: "the session core imports no Proto.Actor", from: []string{"actors/session/core/..."}, deny: []string{protoActor},
		why: "the core is pure: (state, input) -> events, testable without an actor system"},
	{name: "the wire types link no actor framework", from: []string{"messages", "messages/fsp"}, deny: []string{protoActor},
		why: "a program that only reads events links no Proto.Actor: the grain's binding is messages/sessiongrain"},
	{name: "the binary starts its node through the public package", from: []string{"cmd/fathom"}, deny: []string{"internal/node/..."},
		opaque: []string{"."},
		why:    "fathom run and fathom node are built on package fathom (fathom.Start): there is no second way to assemble a node"},
	{name: "the agent actor never decides or writes", from: []string{"actors/agent/..."}, deny: []string{"actors/session", "persistence/...", "cluster/..."},
		opaque: []string{"messages", "actors/session/core"},
		why:    "the grain decides and commits every event; an agent actor only runs calls and forwards their results"},
}

// graph maps an import path to its direct imports: a package's own (non-test) imports,
// or, in the tests graph, the further imports of its test files.
type graph map[string][]string

// match reports whether path matches pattern (relative to the module unless it names
// another module; "..." alone is every package of the module, "." its root package).
func match(pattern, path string) bool {
	if pattern == "." { // the module's root package
		return path == module
	}
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		if pattern == "..." {
			return path == module || strings.HasPrefix(path, module+"/")
		}
		pattern = module + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// violation is one forbidden import: the chain from a package of the rule's from to the
// denied package.
type violation struct{ chain []string }

func (v violation) String() string {
	short := make([]string, len(v.chain))
	for i, p := range v.chain {
		short[i] = strings.TrimPrefix(p, module+"/")
	}
	return strings.Join(short, " -> ")
}

// testsOf names, in a chain, the test files of the package path.
func testsOf(path string) string { return path + " (tests)" }

// check returns r's violations in g, and in tests (each package's test imports) unless
// it is nil (one shortest chain per offending pair), and the number of packages r
// applies to. A chain through a package's test files starts with testsOf(that package).
func check(g, tests graph, r rule) (vs []violation, applies int) {
	var froms []string
	for p := range g {
		if matchAny(r.from, p) {
			froms = append(froms, p)
		}
	}
	slices.Sort(froms)
	for _, from := range froms {
		parent := map[string]string{from: ""}
		queue := []string{from}
		if tests != nil {
			// The test files come after the package: what the package itself imports
			// is reported as the package's, only what its tests add as the tests'.
			parent[testsOf(from)] = ""
			queue = append(queue, testsOf(from))
		}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			var imports []string
			if p == testsOf(from) {
				for _, imp := range tests[from] {
					if !matchAny(r.testAllow, imp) || slices.Contains(g[from], imp) {
						imports = append(imports, imp)
					}
				}
			} else {
				imports = slices.Clone(g[p])
			}
			slices.Sort(imports)
			for _, imp := range imports {
				if _, seen := parent[imp]; seen {
					continue
				}
				parent[imp] = p
				if matchAny(r.deny, imp) && !matchAny(r.allow, imp) && !matchAny(r.from, imp) {
					var chain []string
					for q := imp; q != ""; q = parent[q] {
						chain = append(chain, q)
					}
					slices.Reverse(chain)
					vs = append(vs, violation{chain: chain})
					continue // the denied package's own imports are its rule's business
				}
				if matchAny(r.opaque, imp) {
					continue
				}
				queue = append(queue, imp)
			}
		}
	}
	return vs, len(froms)
}

// moduleGraph lists the module's packages and everything they and their tests import,
// with `go list -deps -test`, from the module's root: the packages' own imports, and
// each module package's test imports (in-package and external test files).
func moduleGraph(t *testing.T) (g, tests graph) {
	t.Helper()
	// -test adds the packages only tests import, and the packages as recompiled for a
	// test (ForTest set, "p [q.test]"): those are skipped, a package's test imports
	// are read from its own entry.
	const format = `{{if not .ForTest}}{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}{{end}}`
	out := goList(t, "-deps", "-test", "-f", format, "./...")
	g, tests = graph{}, graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		path, rest, ok := strings.Cut(sc.Text(), "|")
		if !ok || strings.HasSuffix(path, ".test") { // a test's generated main package
			continue
		}
		imports, testImports, _ := strings.Cut(rest, "|")
		g[path] = strings.Fields(imports)
		if ti := strings.Fields(testImports); len(ti) > 0 {
			tests[path] = ti
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := g[module+"/messages"]; !ok {
		t.Fatalf("go list found no %s/messages: is this the module root? (%d packages)", module, len(g))
	}
	if len(tests) == 0 {
		t.Fatalf("go list found no test imports in %d packages", len(g))
	}
	return g, tests
}

// goList runs `go list` with args from the module's root and returns its output.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list packages: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go env GOMOD: %v (%s)", err, out)
	}
	cmd := exec.CommandContext(ctx, goBin, append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Dir(string(bytes.TrimSpace(out)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestImportRules checks the map's import rules against the module as it is.
func TestImportRules(t *testing.T) {
	g, tests := moduleGraph(t)
	if !slices.Contains(tests[module+"/internal/archtest"], "os/exec") {
		t.Fatalf("go list read no test imports of this very package (tests: %v)", tests[module+"/internal/archtest"])
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			vs, applies := check(g, tests, r)
			switch {
			case applies == 0 && r.pending:
				t.Skipf("no package matches %v yet: the rule applies once it exists", r.from)
			case applies == 0:
				t.Fatalf("no package matches %v: a part was renamed; update the rule", r.from)
			}
			for _, v := range vs {
				why := r.why
				if len(r.testAllow) > 0 && strings.HasSuffix(v.chain[0], testsOf("")) {
					why += "; the tests' exception is " + strings.Join(r.testAllow, ", ") + " only: " + r.testWhy
				}
				t.Errorf("forbidden import (%s): %s", why, v)
			}
		})
	}
}

// TestCheckerReportsChains: the checker finds a forbidden import through a chain of
// allowed ones and names the whole chain; allowed packages, packages of the rule's own
// part and imports of other modules pass; a rule for a part that does not exist applies
// to nothing.
func TestCheckerReportsChains(t *testing.T) {
	p := func(s string) string { return module + "/" + s }
	g := graph{
		p("gateway"):             {"context", p("live"), p("messages")},
		p("gateway/sub"):         {p("gateway")},
		p("live"):                {p("messages"), p("live/feed")},
		p("live/feed"):           {p("persistence")},
		p("persistence"):         {"errors"},
		p("messages"):            {"google.golang.org/protobuf/proto", p("messages/fsp"), "github.com/asynkron/protoactor-go/cluster"},
		p("messages/fsp"):        {},
		p("llm"):                 {p("messages"), p("actors/session")},
		p("actors/session"):      {p("cluster"), "github.com/asynkron/protoactor-go/actor"},
		p("actors/session/core"): {p("messages"), "github.com/asynkron/protoactor-go/actor"},
		p("cmd/fathom"):          {module, p("gateway")},
		p("cmd/fathom/old"):      {p("internal/node")},
		module:                   {p("internal/node")},
		p("internal/node"):       {p("gateway")},
	}
	for _, tc := range []struct {
		rule rule
		want []string
	}{
		{rule{from: []string{"gateway/..."}, deny: []string{"persistence/..."}},
			[]string{"gateway -> live -> live/feed -> persistence", "gateway/sub -> gateway -> live -> live/feed -> persistence"}},
		{rule{from: []string{"messages/..."}, deny: []string{"..."}, allow: []string{"messages/..."}}, nil},
		{rule{from: []string{"llm/..."}, deny: []string{"actors/...", "cluster/..."}}, []string{"llm -> actors/session"}},
		{rule{from: []string{"actors/session/core/..."}, deny: []string{protoActor}, opaque: []string{"messages"}},
			[]string{"actors/session/core -> github.com/asynkron/protoactor-go/actor"}},
		{rule{from: []string{"actors/session/core/..."}, deny: []string{protoActor}},
			[]string{"actors/session/core -> github.com/asynkron/protoactor-go/actor", "actors/session/core -> messages -> github.com/asynkron/protoactor-go/cluster"}},
		{rule{from: []string{"live/..."}, deny: []string{"gateway/..."}}, nil},
		{rule{from: []string{"cmd/fathom"}, deny: []string{"internal/node/..."}, opaque: []string{"."}}, nil},
		{rule{from: []string{"cmd/fathom"}, deny: []string{"internal/node/..."}},
			[]string{"cmd/fathom -> github.com/fathom-agents/fathom -> internal/node"}},
		{rule{from: []string{"cmd/fathom/..."}, deny: []string{"internal/node/..."}, opaque: []string{"."}},
			[]string{"cmd/fathom/old -> internal/node"}},
	} {
		vs, applies := check(g, nil, tc.rule)
		var got []string
		for _, v := range vs {
			got = append(got, v.String())
		}
		if applies == 0 || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("rule %v -> %v: violations %q (applies to %d), want %q", tc.rule.from, tc.rule.deny, got, applies, tc.want)
		}
	}
	if _, applies := check(g, nil, rule{from: []string{"fathom/core/..."}, deny: []string{protoActor}}); applies != 0 {
		t.Errorf("a rule for a missing part applies to %d packages", applies)
	}
}

// TestCheckerReportsTestImports: with the tests graph, what a package's test files import
// is checked like its own imports, through any chain, and named as the tests' ("core
// (tests) -> ..."); what the package itself imports stays the package's; a rule's test
// exception lets the tests import the packages it names (not looked through), and
// nothing else: not the package's own code, not another chain of the tests. Without the
// tests graph, test imports are not checked.
func TestCheckerReportsTestImports(t *testing.T) {
	p := func(s string) string { return module + "/" + s }
	const actor = "github.com/asynkron/protoactor-go/actor"
	g := graph{
		p("actors/session/core"): {p("messages")},
		p("messages"):            {},
		p("internal/fathomtest"): {p("internal/node")},
		p("internal/node"):       {p("persistence"), actor},
		p("persistence"):         {},
		p("live/feed"):           {p("persistence")},
		p("gateway"):             {p("messages")},
		p("gateway/bad"):         {p("internal/node")},
	}
	tests := graph{
		p("actors/session/core"): {"testing", p("messages"), p("internal/fathomtest")},
		p("messages"):            {p("messages"), "testing"},
		p("gateway"):             {p("gateway"), p("internal/node"), p("live/feed")},
		p("gateway/bad"):         {p("internal/node")},
	}
	core := rule{from: []string{"actors/session/core/..."}, deny: []string{protoActor}}
	wire := rule{from: []string{"messages/..."}, deny: []string{"..."}, allow: []string{"messages/..."}}
	gw := rule{from: []string{"gateway/..."}, deny: []string{"persistence/..."}}
	gwExcepted := gw
	gwExcepted.testAllow = []string{"internal/node"}
	for _, tc := range []struct {
		name  string
		rule  rule
		tests graph
		want  []string
	}{
		{"a test's chain", core, tests,
			[]string{"actors/session/core (tests) -> internal/fathomtest -> internal/node -> github.com/asynkron/protoactor-go/actor"}},
		{"tests not given", core, nil, nil},
		{"tests importing their own part", wire, tests, nil},
		{"no exception", gw, tests, []string{
			"gateway (tests) -> internal/node -> persistence", "gateway/bad -> internal/node -> persistence"}},
		{"an exception for the tests only, and for that import only", gwExcepted, tests, []string{
			"gateway (tests) -> live/feed -> persistence", "gateway/bad -> internal/node -> persistence"}},
	} {
		vs, applies := check(g, tc.tests, tc.rule)
		var got []string
		for _, v := range vs {
			got = append(got, v.String())
		}
		if applies == 0 || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: violations %q (applies to %d), want %q", tc.name, got, applies, tc.want)
		}
	}
}
