package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const goTestOutput = `goos: linux
goarch: amd64
pkg: github.com/fathom-agents/fathom/actors/session
BenchmarkStepOverhead/pipelined-2         	    4000	    303000 ns/op	   97000 B/op	     567 allocs/op
BenchmarkStepOverhead/synchronous-2       	    1500	    767000 ns/op	  129000 B/op	     840 allocs/op
BenchmarkGatewayFanout-2   	     300	   2000000 ns/op	    221000 deliveries/s	     47800 B/conn
PASS
`

func TestParseFindsTheNamedResultLine(t *testing.T) {
	s := parse(goTestOutput, "BenchmarkStepOverhead/synchronous")
	if s["ns/op"] != 767000 || s["B/op"] != 129000 || s["allocs/op"] != 840 {
		t.Fatalf("parse = %v", s)
	}
	if s := parse(goTestOutput, "BenchmarkGatewayFanout"); s["deliveries/s"] != 221000 || s["B/conn"] != 47800 {
		t.Fatalf("custom metrics: %v", s)
	}
	if s := parse("--- SKIP: BenchmarkAppend\n", "BenchmarkAppend"); s != nil {
		t.Fatalf("a skipped benchmark parsed as %v", s)
	}
}

func TestBenchRegexpAnchorsEveryLevel(t *testing.T) {
	got := benchRegexp("BenchmarkContext/history=10000")
	if got != `^BenchmarkContext$/^history=10000$` {
		t.Fatalf("benchRegexp = %q", got)
	}
	// go test matches each level separately; the first level must not match a longer name.
	if regexp.MustCompile(strings.Split(got, "/")[0]).MatchString("BenchmarkContextX") {
		t.Fatal("first level matches a longer benchmark name")
	}
}

func TestMedianOfOddAndEvenCounts(t *testing.T) {
	ss := []sample{{"ns/op": 5}, {"ns/op": 1}, {"ns/op": 3}}
	if m, _ := median(ss, "ns/op"); m != 3 {
		t.Fatalf("median of 3 = %v", m)
	}
	if m, _ := median(append(ss, sample{"ns/op": 4}), "ns/op"); m != 3.5 {
		t.Fatalf("median of 4 = %v", m)
	}
	if _, ok := median(ss, "B/op"); ok {
		t.Fatal("median of a missing unit reported ok")
	}
}

func TestRowRatiosAndTargets(t *testing.T) {
	step := row{ID: "s", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Kind: "time", Max: 1.3}
	res := map[measurement][]sample{
		{Pkg: "./p", Bench: "BenchmarkA", Time: "500ms"}: {{"ns/op": 400}, {"ns/op": 420}, {"ns/op": 410}},
		{Pkg: "./p", Bench: "BenchmarkB", Time: "500ms"}: {{"ns/op": 300}, {"ns/op": 310}, {"ns/op": 280}},
	}
	if l := step.line(res); !strings.Contains(l, "**1.37× time**") || !strings.Contains(l, "**no**") {
		t.Fatalf("time row: %s", l)
	}
	tp := row{ID: "t", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Kind: "throughput", Min: 0.65}
	if l := tp.line(res); !strings.Contains(l, "**0.73× throughput**") || !strings.Contains(l, "| yes |") {
		t.Fatalf("throughput row: %s", l)
	}
	missing := row{ID: "m", Pkg: "./q", Bench: "BenchmarkA", Base: "BenchmarkB", Kind: "time", Max: 2}
	if l := missing.line(res); !strings.Contains(l, "not measured") {
		t.Fatalf("a row without samples: %s", l)
	}
}

// TestRowAdditiveTarget: a row with MaxOver meets its target when Fathom's value is at
// most MaxOver above the baseline's, whatever the ratio.
func TestRowAdditiveTarget(t *testing.T) {
	r := row{ID: "l", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Unit: "p99-ms", Kind: "time", MaxOver: 50}
	res := func(fathom float64) map[measurement][]sample {
		return map[measurement][]sample{
			{Pkg: "./p", Bench: "BenchmarkA", Time: "500ms"}: {{"p99-ms": fathom}},
			{Pkg: "./p", Bench: "BenchmarkB", Time: "500ms"}: {{"p99-ms": 10}},
		}
	}
	if l := r.line(res(55)); !strings.Contains(l, "| ≤ baseline + 50 p99-ms | yes |") || !strings.Contains(l, "**5.50× time**") {
		t.Fatalf("within the target: %s", l)
	}
	if l := r.line(res(61)); !strings.Contains(l, "| ≤ baseline + 50 p99-ms | **no** |") {
		t.Fatalf("over the target: %s", l)
	}
}

func TestReplaceTableKeepsTheRestOfTheFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "B.md")
	in := "# Title\n\nintro\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\n## Notes\nkept\n"
	if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceTable(f, tables["main"], beginMarker+"\nnew table\n"+endMarker+"\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f)
	want := "# Title\n\nintro\n\n" + beginMarker + "\nnew table\n" + endMarker + "\n\n## Notes\nkept\n"
	if string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if err := replaceTable(filepath.Join(t.TempDir(), "none.md"), tables["main"], "x"); err == nil {
		t.Fatal("a missing file did not fail")
	}
}

func TestEveryRowIsWellFormed(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range append(append([]row(nil), tableRows...), loadRows...) {
		if ids[r.ID] {
			t.Errorf("duplicate row id %q", r.ID)
		}
		ids[r.ID] = true
		if r.Kind != "time" && r.Kind != "throughput" && r.Kind != "memory" && r.Kind != "cost" {
			t.Errorf("row %s: kind %q", r.ID, r.Kind)
		}
		if r.Deterministic || r.OneProcess {
			bp, _ := parentAndLeaf(r.Bench)
			sp, _ := parentAndLeaf(r.Base)
			if bp == "" || bp != sp {
				t.Errorf("row %s: one process for %s and %s, which are not sides of one benchmark", r.ID, r.Bench, r.Base)
			}
		}
		files, err := filepath.Glob(filepath.Join("..", "..", r.Pkg, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("row %s: package %s has no tests (%v)", r.ID, r.Pkg, err)
			continue
		}
		for _, b := range []string{r.Bench, r.Base} {
			top, _, _ := strings.Cut(b, "/")
			found := false
			for _, f := range files {
				src, _ := os.ReadFile(f)
				found = found || strings.Contains(string(src), "func "+top+"(b *testing.B)")
			}
			if !found {
				t.Errorf("row %s: %s is not a benchmark of %s", r.ID, top, r.Pkg)
			}
		}
	}
}

func TestScaleBenchTime(t *testing.T) {
	for in, want := range map[string]string{"30x": "6x", "1s": "0.2s", "1x": "1x", "500ms": "100ms"} {
		if got := scaleBenchTime(in, 0.2); got != want {
			t.Errorf("scaleBenchTime(%q, 0.2) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatRatio(t *testing.T) {
	for v, want := range map[float64]string{1.333: "1.33", 0.75: "0.75", 0.0042: "0.0042", 0.051: "0.051", 0: "0.00", 12: "12.00"} {
		if got := formatRatio(v); got != want {
			t.Errorf("formatRatio(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFormatMemoryUnits(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{19046, "RSS-B/idle-session", "18.6 KB RSS/idle-session"},
		{3038, "marginal-RSS-B/idle-session", "3.0 KB marginal-RSS/idle-session"},
		{512, "marginal-heap-B/idle-session", "512 B marginal-heap/idle-session"},
	} {
		if got := format(c.v, c.unit); got != c.want {
			t.Errorf("format(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

// TestLineSpread: a row shows the range of its figure over the rounds, from the samples
// of several rounds or, with one sample, from the unit-min and unit-max the benchmark
// reported over its own rounds.
func TestLineSpread(t *testing.T) {
	r := row{ID: "cpu", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Unit: "cpu-us/step", Kind: "time"}
	ms := r.measurements(1)
	res := map[measurement][]sample{
		ms[0]: {{"cpu-us/step": 600, "cpu-us/step-min": 520, "cpu-us/step-max": 730}},
		ms[1]: {{"cpu-us/step": 250}, {"cpu-us/step": 240}, {"cpu-us/step": 280}},
	}
	l := r.line(res)
	for _, want := range []string{"600 cpu-us/step (520–730 cpu-us/step)", "250 cpu-us/step (240–280 cpu-us/step)"} {
		if !strings.Contains(l, want) {
			t.Errorf("line %q lacks %q", l, want)
		}
	}
}

// TestFormatBytesPer: a unit of bytes of something per thing reads as such.
func TestFormatBytesPer(t *testing.T) {
	for unit, want := range map[string]string{
		"RSS-B/session":      "97.7 KB RSS/session",
		"heap-B/session":     "97.7 KB heap/session",
		"peak-RSS-B/session": "97.7 KB peak-RSS/session",
	} {
		if got := format(100000, unit); got != want {
			t.Errorf("format(100000, %q) = %q, want %q", unit, got, want)
		}
	}
}

// TestVerdictWithinTheSpread: a row meets its target when every round does, misses it
// when no round does, and claims neither when the rounds fall on both sides of it.
func TestVerdictWithinTheSpread(t *testing.T) {
	r := row{ID: "x", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Kind: "time", Max: 2}
	ms := r.measurements(1)
	for _, c := range []struct {
		fathom []float64
		want   string
	}{
		{[]float64{150, 160, 170}, "| yes |"},
		{[]float64{250, 260, 270}, "| **no** |"},
		{[]float64{150, 210, 230}, "| within the spread |"},
	} {
		res := map[measurement][]sample{ms[0]: nil, ms[1]: nil}
		for _, f := range c.fathom {
			res[ms[0]] = append(res[ms[0]], sample{"ns/op": f})
			res[ms[1]] = append(res[ms[1]], sample{"ns/op": 100})
		}
		if l := r.line(res); !strings.HasSuffix(strings.TrimSpace(l), strings.TrimSpace(c.want)) {
			t.Errorf("rounds %v: line %q, want it to end %q", c.fathom, l, c.want)
		}
	}
	one := row{ID: "y", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Unit: "cpu-us/step", Kind: "time", Max: 2}
	ms = one.measurements(1)
	res := map[measurement][]sample{
		ms[0]: {{"cpu-us/step": 190, "cpu-us/step-min": 170, "cpu-us/step-max": 230}},
		ms[1]: {{"cpu-us/step": 100}},
	}
	if l := one.line(res); !strings.Contains(l, "| within the spread |") {
		t.Errorf("one sample with its own spread across the target: line %q", l)
	}
}

// TestRowReadsItsNamedMetric: a row with a Unit compares that metric of both benchmarks,
// not their wall time: with thread-cpu-ns/op the ratio, the verdict and the cells are the
// thread CPU time's (the ns/op beside it says otherwise), the range names the clock once,
// the allocations of a time per operation are shown, and the what cell names the unit.
// The count rows of hard text read thread-cpu-ns/op, a metric BenchmarkCount reports.
func TestRowReadsItsNamedMetric(t *testing.T) {
	r := row{ID: "c", What: "counting", Pkg: "./p", Bench: "BenchmarkA", Base: "BenchmarkB", Unit: "thread-cpu-ns/op", Kind: "time", Max: 2}
	ms := r.measurements(1)
	res := map[measurement][]sample{
		ms[0]: {{"ns/op": 9e6, "thread-cpu-ns/op": 1.5e6, "B/op": 2048, "allocs/op": 3}, {"ns/op": 8e6, "thread-cpu-ns/op": 1.7e6, "B/op": 2048, "allocs/op": 3}},
		ms[1]: {{"ns/op": 1e6, "thread-cpu-ns/op": 1e6}, {"ns/op": 1e6, "thread-cpu-ns/op": 1e6}},
	}
	l := r.line(res)
	for _, want := range []string{"counting (`BenchmarkA` / `BenchmarkB`, reading `thread-cpu-ns/op`)",
		"| 1.60 ms thread-cpu (1.50–1.70 ms thread-cpu), 2.0 KB, 3 allocs | 1.00 ms thread-cpu |", "**1.60× time**", "| ≤ 2× | yes |"} {
		if !strings.Contains(l, want) {
			t.Errorf("line %q lacks %q", l, want)
		}
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "memory", "bench_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"count-letter", "count-acgt", "count-base64"} {
		i := slices.IndexFunc(tableRows, func(r row) bool { return r.ID == id })
		if i < 0 || tableRows[i].Unit != "thread-cpu-ns/op" || !strings.HasPrefix(tableRows[i].Bench, "BenchmarkCount/") ||
			!strings.Contains(string(src), `"thread-cpu-ns/op"`) {
			t.Errorf("row %s does not read BenchmarkCount's thread-cpu-ns/op", id)
		}
	}
}

// TestPlanRunsDeterministicRowsOnce: the benchmarks of deterministic rows run in the
// first round only, every side of one benchmark in one process; a OneProcess row runs
// its two sides in one process every round; every other benchmark runs alone every
// round.
func TestPlanRunsDeterministicRowsOnce(t *testing.T) {
	rows := []row{
		{ID: "plain", Pkg: "./p", Bench: "BenchmarkX/a", Base: "BenchmarkX/b", Kind: "time"},
		{ID: "recall", Pkg: "./p", Bench: "BenchmarkR/hybrid", Base: "BenchmarkR/text", Kind: "throughput", BenchTime: "1x", Deterministic: true},
		{ID: "recall-vector", Pkg: "./p", Bench: "BenchmarkR/hybrid", Base: "BenchmarkR/vector", Kind: "throughput", BenchTime: "1x", Deterministic: true},
		{ID: "latency", Pkg: "./p", Bench: "BenchmarkL/hybrid", Base: "BenchmarkL/vector", Kind: "time", BenchTime: "10x", OneProcess: true},
	}
	rounds := plan(rows, 3, 1)
	if len(rounds) != 3 {
		t.Fatalf("%d rounds", len(rounds))
	}
	patterns := func(round []invocation) map[string]bool {
		ps := map[string]bool{}
		for _, inv := range round {
			ps[inv.pattern()] = true
		}
		return ps
	}
	every := []string{`^BenchmarkX$/^a$`, `^BenchmarkX$/^b$`, `^BenchmarkL$/^(hybrid|vector)$`}
	recall := `^BenchmarkR$/^(hybrid|text|vector)$`
	for i, round := range rounds {
		ps := patterns(round)
		want := len(every)
		if i == 0 {
			want++
			if !ps[recall] {
				t.Errorf("round 1 lacks the deterministic rows' one process %s: %v", recall, ps)
			}
		} else if ps[recall] {
			t.Errorf("round %d runs the deterministic rows again", i+1)
		}
		for _, p := range every {
			if !ps[p] {
				t.Errorf("round %d lacks %s: %v", i+1, p, ps)
			}
		}
		if len(round) != want {
			t.Errorf("round %d has %d processes, want %d: %v", i+1, len(round), want, ps)
		}
	}

	// A benchmark that a row without the mark also uses runs every round, alone.
	rows = append(rows, row{ID: "uses-hybrid", Pkg: "./p", Bench: "BenchmarkR/hybrid", Base: "BenchmarkX/a", Kind: "time", BenchTime: "1x"})
	for i, round := range plan(rows, 2, 1) {
		ps := patterns(round)
		if !ps[`^BenchmarkR$/^hybrid$`] {
			t.Errorf("round %d lacks the shared side alone: %v", i+1, ps)
		}
		if got := ps[`^BenchmarkR$/^(text|vector)$`]; got != (i == 0) {
			t.Errorf("round %d: the deterministic sides' process present %v: %v", i+1, got, ps)
		}
	}
}

// TestRenderSaysDeterministicRowsRanOnce: a deterministic row's cell and the table's
// header say that it ran once.
func TestRenderSaysDeterministicRowsRanOnce(t *testing.T) {
	r := row{ID: "recall", Pkg: "./p", Bench: "BenchmarkR/hybrid", Base: "BenchmarkR/text", Unit: "recall@5", Kind: "throughput", BenchTime: "1x", Deterministic: true}
	ms := r.measurements(1)
	res := map[measurement][]sample{ms[0]: {{"recall@5": 0.96}}, ms[1]: {{"recall@5": 0.91}}}
	out := render(tables["main"], []row{r}, res, 5, time.Now(), time.Minute)
	for _, want := range []string{`5 interleaved rounds, medians; the rows marked "one run" are deterministic and ran in the first round only.`, "0.96 recall@5; one run |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// sidesSetups counts how often BenchmarkFakeSides's setup ran in this process.
var sidesSetups int

// BenchmarkFakeSides is a fixture of TestRunOneMeasuresSidesInOneProcess: a benchmark
// with a setup and three sides, each reporting how often the setup ran.
func BenchmarkFakeSides(b *testing.B) {
	sidesSetups++
	for _, side := range []string{"a", "b", "c"} {
		b.Run(side, func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(float64(sidesSetups), "setups")
		})
	}
}

// TestRunOneMeasuresSidesInOneProcess: an invocation of two sides of one benchmark runs
// one process of the test binary that measures those two sides, not the third, after
// one setup, and reads both results.
func TestRunOneMeasuresSidesInOneProcess(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := measurement{Pkg: ".", Bench: "BenchmarkFakeSides/a", Time: "3x"}
	c := measurement{Pkg: ".", Bench: "BenchmarkFakeSides/c", Time: "3x"}
	var raw bytes.Buffer
	got, err := runOne(context.Background(), bin, invocation{ms: []measurement{a, c}}, &raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []measurement{a, c} {
		if s := got[m]; s["setups"] != 1 {
			t.Errorf("%s: %v, want one setup\n%s", m.Bench, s, raw.String())
		}
	}
	if strings.Contains(raw.String(), "BenchmarkFakeSides/b") {
		t.Errorf("the side not asked for ran:\n%s", raw.String())
	}
	if !strings.Contains(raw.String(), "### took ") {
		t.Errorf("the raw output does not say how long the process took:\n%s", raw.String())
	}
}

// TestBuildTestsOneCommandAndCollidingNames: the test binaries of several packages are
// built by one go command, named after their packages; two packages of the same name
// are each built under a name of their own; every binary runs its own package's tests.
func TestBuildTestsOneCommandAndCollidingNames(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":        "module example.com/m\n\ngo 1.26\n",
		"a/x/x.go":      "package x\n",
		"a/x/x_test.go": "package x\n\nimport \"testing\"\n\nfunc TestWhich(t *testing.T) { t.Log(\"a/x\") }\n",
		"b/x/x.go":      "package x\n",
		"b/x/x_test.go": "package x\n\nimport \"testing\"\n\nfunc TestWhich(t *testing.T) { t.Log(\"b/x\") }\n",
		"c/y/y.go":      "package y\n",
		"c/y/y_test.go": "package y\n\nimport \"testing\"\n\nfunc TestWhich(t *testing.T) { t.Log(\"c/y\") }\n",
		"d/z/z.go":      "package z\n",
		"d/z/z_test.go": "package z\n\nimport \"testing\"\n\nfunc TestWhich(t *testing.T) { t.Log(\"d/z\") }\n",
	}
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	pkgs := []string{"./a/x", "./b/x", "./c/y", "./d/z"}
	bins, err := buildTests(context.Background(), root, dir, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	if bins["./c/y"] != filepath.Join(dir, "y.test") || bins["./d/z"] != filepath.Join(dir, "z.test") {
		t.Errorf("the packages of unique names are not built together under their names: %v", bins)
	}
	seen := map[string]bool{}
	for _, pkg := range pkgs {
		bin := bins[pkg]
		if seen[bin] {
			t.Fatalf("two packages share the binary %s: %v", bin, bins)
		}
		seen[bin] = true
		out, err := exec.Command(bin, "-test.v").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, out)
		}
		if !strings.Contains(string(out), strings.TrimPrefix(pkg, "./")) {
			t.Errorf("%s is not the test binary of %s:\n%s", bin, pkg, out)
		}
	}
}
