// Command benchtable runs Fathom's benchmarks against their same-run baselines and writes
// the table of BENCHMARKS.md itself, so that every number in it is what anyone re-running
// `make bench` gets.
//
// Each row pairs a Fathom benchmark with the baseline it is measured against. The tool
// builds each package's test binary once, then runs every distinct benchmark once per
// round, for -rounds rounds, in an order rotated every round (interleaved runs: a slow
// stretch of the machine lands on both sides of a ratio instead of on one of them). A row
// reports the median of the rounds for both sides and their ratio, and whether it meets
// the row's target. A deterministic row (recall@5 of a fixed set) runs in the first round
// only, and says so; see plan for the rules. The table replaces the text between the markers
//
//	<!-- bench:table:begin -->
//	<!-- bench:table:end -->
//
// in the output file, with the date, the machine and the command in its header. The raw
// `go test` output of every run goes to -raw.
//
// It runs under `make bench`, which starts the real services first (durable PostgreSQL,
// Consul, MinIO) and exports their FATHOM_TEST_* variables; rows whose benchmarks skip
// (a service is missing) are reported as not measured, never as a number.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	beginMarker = "<!-- bench:table:begin -->"
	endMarker   = "<!-- bench:table:end -->"
)

// table is one generated table of BENCHMARKS.md: its rows and the markers around it.
type table struct {
	rows       []row
	begin, end string
}

// tables are the tables -table selects.
var tables = map[string]table{
	"main": {rows: tableRows, begin: beginMarker, end: endMarker},
	"load": {rows: loadRows, begin: "<!-- bench:load:begin -->", end: "<!-- bench:load:end -->"},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		var usage usageError
		if errors.As(err, &usage) {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line (exit status 2).
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 3, "rounds of interleaved runs; each row reports the median of the rounds and their spread (at least 3 for the published table; deterministic rows run in the first round only)")
	out := fs.String("out", "BENCHMARKS.md", "file whose table (between the bench:table markers) is replaced")
	raw := fs.String("raw", "bench.out", "file that receives the raw `go test` output of every run")
	only := fs.String("rows", "", "regexp: run only the rows whose id matches (the table is then printed, not written)")
	which := fs.String("table", "main", "the table to measure and write: main (BENCHMARKS.md's ratios) or load (issue-sized load runs)")
	scale := fs.Float64("scale", 1, "multiplies every row's -benchtime (e.g. 0.2 for a quick check)")
	list := fs.Bool("list", false, "list the rows and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: benchtable [flags]\n\nRuns the benchmark rows of BENCHMARKS.md interleaved and writes its table.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if *rounds < 1 {
		return usageError{fmt.Errorf("-rounds must be at least 1, got %d", *rounds)}
	}
	if *scale <= 0 {
		return usageError{fmt.Errorf("-scale must be positive, got %v", *scale)}
	}
	tbl, ok := tables[*which]
	if !ok {
		return usageError{fmt.Errorf("-table %q: want main or load", *which)}
	}
	sel := tbl.rows
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return usageError{fmt.Errorf("-rows: %w", err)}
		}
		sel = nil
		for _, r := range tbl.rows {
			if re.MatchString(r.ID) {
				sel = append(sel, r)
			}
		}
		if len(sel) == 0 {
			return usageError{fmt.Errorf("-rows %q matches no row (see -list)", *only)}
		}
	}
	if *list {
		for _, r := range sel {
			fmt.Fprintf(stdout, "%-22s %s: %s vs %s, %s\n", r.ID, r.Pkg, r.Bench, r.Base, r.unit())
		}
		return nil
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	rawf, err := os.Create(*raw)
	if err != nil {
		return fmt.Errorf("create raw output: %w", err)
	}
	defer rawf.Close()

	start := time.Now()
	results, err := measure(ctx, log, sel, *rounds, *scale, rawf)
	if err != nil {
		return err
	}
	table := render(tbl, sel, results, *rounds, start, time.Since(start))
	if *only != "" {
		_, err := io.WriteString(stdout, table)
		return err
	}
	if err := replaceTable(*out, tbl, table); err != nil {
		return err
	}
	log.Info("table written", "file", *out, "rows", len(sel), "took", time.Since(start).Round(time.Second))
	return nil
}

// measurement names one benchmark of one package: a row's side.
type measurement struct {
	Pkg   string // package path relative to the module root, e.g. ./persistence/postgres
	Bench string // benchmark name with sub-benchmarks, e.g. BenchmarkStepOverhead/pipelined
	Time  string // -test.benchtime, e.g. "1s" or "30x"
	// Timeout bounds one run (0: defaultRunTimeout).
	Timeout time.Duration
}

// defaultRunTimeout bounds one benchmark run unless its row says otherwise.
const defaultRunTimeout = 5 * time.Minute

// sample is one parsed result line.
type sample map[string]float64 // unit → value ("ns/op", "B/op", "deliveries/s", ...)

// invocation is one process of a package's test binary and the measurements it reports: one
// measurement, or several sides of one benchmark (same package, parent benchmark,
// -benchtime and timeout) that share its setup.
type invocation struct {
	ms []measurement
	// once: the invocation is in the first round only (its measurements are deterministic).
	once bool
}

// pattern is the invocation's -test.bench: each level anchored, the last one an
// alternation when it reports several sides.
func (r invocation) pattern() string {
	if len(r.ms) == 1 {
		return benchRegexp(r.ms[0].Bench)
	}
	leaves := make([]string, len(r.ms))
	for i, m := range r.ms {
		_, leaves[i] = parentAndLeaf(m.Bench)
	}
	parent, _ := parentAndLeaf(r.ms[0].Bench)
	for i, l := range leaves {
		leaves[i] = regexp.QuoteMeta(l)
	}
	return benchRegexp(parent) + "/^(" + strings.Join(leaves, "|") + ")$"
}

// label names the invocation in the raw output and the log: package, benchmark pattern and
// -benchtime.
func (r invocation) label() string {
	return fmt.Sprintf("%s %s -benchtime %s", r.ms[0].Pkg, r.pattern(), r.ms[0].Time)
}

// parentAndLeaf splits a benchmark name at its last level: "A/b/c" → "A/b", "c"; a
// top-level name has no parent.
func parentAndLeaf(name string) (parent, leaf string) {
	i := strings.LastIndex(name, "/")
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

// plan returns the runs of each round. Every measurement runs in its own process every
// round, in an order rotated every round (interleaved runs: a slow stretch of the
// machine lands on both sides of a ratio instead of on one of them), except that
//   - a measurement that only Deterministic rows use runs in the first round only, and
//   - the measurements of Deterministic and OneProcess rows that are sides of one
//     benchmark share one process (the benchmark's setup done once for all of them).
func plan(rows []row, rounds int, scale float64) [][]invocation {
	type use struct{ once, shared bool }
	var order []measurement
	uses := map[measurement]*use{}
	for _, r := range rows {
		for _, m := range r.measurements(scale) {
			u := uses[m]
			if u == nil {
				u = &use{once: true, shared: true}
				uses[m] = u
				order = append(order, m)
			}
			u.once = u.once && r.Deterministic
			u.shared = u.shared && (r.Deterministic || r.OneProcess)
		}
	}
	type key struct {
		pkg, parent, time string
		timeout           time.Duration
		once              bool
	}
	var runs []invocation
	shared := map[key]int{}
	for _, m := range order {
		u := uses[m]
		parent, _ := parentAndLeaf(m.Bench)
		if u.shared && parent != "" {
			k := key{m.Pkg, parent, m.Time, m.Timeout, u.once}
			if i, ok := shared[k]; ok {
				runs[i].ms = append(runs[i].ms, m)
				continue
			}
			shared[k] = len(runs)
		}
		runs = append(runs, invocation{ms: []measurement{m}, once: u.once})
	}
	out := make([][]invocation, rounds)
	for round := range rounds {
		var rs []invocation
		for _, r := range runs {
			if round == 0 || !r.once {
				rs = append(rs, r)
			}
		}
		// Rotate the order each round so no benchmark always runs right after the same one.
		out[round] = make([]invocation, len(rs))
		for i := range rs {
			j := (i + round*7) % len(rs)
			if round%2 == 1 {
				j = len(rs) - 1 - j
			}
			out[round][i] = rs[j]
		}
	}
	return out
}

// measure builds the test binaries, runs the rounds and returns every sample by measurement.
func measure(ctx context.Context, log *slog.Logger, rows []row, rounds int, scale float64, raw io.Writer) (map[measurement][]sample, error) {
	pkgs := map[string]bool{}
	for _, r := range rows {
		pkgs[r.Pkg] = true
	}
	dir, err := os.MkdirTemp("", "benchtable-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	list := make([]string, 0, len(pkgs))
	for pkg := range pkgs {
		list = append(list, pkg)
	}
	sort.Strings(list)
	start := time.Now()
	bins, err := buildTests(ctx, "", dir, list)
	if err != nil {
		return nil, err
	}
	log.Info("test binaries built", "packages", len(bins), "took", time.Since(start).Round(100*time.Millisecond))
	out := map[measurement][]sample{}
	took := map[string]time.Duration{}
	for round, runs := range plan(rows, rounds, scale) {
		for _, r := range runs {
			start := time.Now()
			ss, err := runOne(ctx, bins[r.ms[0].Pkg], r, raw)
			took[r.label()] += time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("round %d: %s: %w", round+1, r.label(), err)
			}
			for _, m := range r.ms {
				s := ss[m]
				if s == nil {
					log.Warn("benchmark skipped or produced no result", "pkg", m.Pkg, "bench", m.Bench)
					continue
				}
				out[m] = append(out[m], s)
			}
		}
		log.Info("round done", "round", round+1, "of", rounds)
	}
	logSlowest(log, took, 5)
	return out, nil
}

// buildTests builds the test binaries of pkgs (package directories such as ./gateway,
// relative to root: "" is the working directory) into dir with one go command, which links them in parallel and loads the packages
// once, and returns each package's binary. Packages whose names collide (go test -c
// names a binary after its package) are built one by one.
func buildTests(ctx context.Context, root, dir string, pkgs []string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-f", "{{.Dir}}\t{{.Name}}"}, pkgs...)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	listed, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list the benchmarks' packages: %w", err)
	}
	nameOf := map[string]string{} // absolute directory → package name
	count := map[string]int{}     // package name → packages of that name
	for _, l := range strings.Split(strings.TrimSpace(string(listed)), "\n") {
		d, name, ok := strings.Cut(l, "\t")
		if !ok {
			return nil, fmt.Errorf("go list printed %q", l)
		}
		nameOf[d] = name
		count[name]++
	}
	bins := map[string]string{}
	var together []string
	for _, pkg := range pkgs {
		abs, err := filepath.Abs(filepath.Join(root, pkg))
		if err != nil {
			return nil, fmt.Errorf("find %s: %w", pkg, err)
		}
		name, ok := nameOf[abs]
		if ok && count[name] == 1 {
			together = append(together, pkg)
			bins[pkg] = filepath.Join(dir, name+".test")
			continue
		}
		// Alone, under a name of its own.
		bin := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+".alone.test")
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, pkg)
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build test binary of %s: %w", pkg, err)
		}
		bins[pkg] = bin
	}
	if len(together) > 0 {
		cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-c", "-o", dir + string(filepath.Separator)}, together...)...)
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build test binaries of %s: %w", strings.Join(together, " "), err)
		}
	}
	for pkg, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("test binary of %s: %w", pkg, err)
		}
	}
	return bins, nil
}

// logSlowest logs the n runs that took longest over all rounds: where the table's time goes.
func logSlowest(log *slog.Logger, took map[string]time.Duration, n int) {
	labels := make([]string, 0, len(took))
	for l := range took {
		labels = append(labels, l)
	}
	sort.Slice(labels, func(i, j int) bool { return took[labels[i]] > took[labels[j]] })
	for _, l := range labels[:min(n, len(labels))] {
		log.Info("slowest runs, all rounds", "run", l, "took", took[l].Round(100*time.Millisecond))
	}
}

// runOne runs one process of a test binary and parses the result line of each of its
// measurements (none for a measurement that skipped).
func runOne(ctx context.Context, bin string, r invocation, raw io.Writer) (map[measurement]sample, error) {
	m0 := r.ms[0]
	timeout := m0.Timeout
	if timeout <= 0 {
		timeout = defaultRunTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", r.pattern(),
		"-test.benchmem", "-test.count", "1", "-test.benchtime", m0.Time, "-test.timeout", (timeout + time.Minute).String())
	// The test binary runs in its package's directory, as `go test` would run it.
	cmd.Dir = m0.Pkg
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, raw)
	cmd.Stderr = io.MultiWriter(&buf, raw)
	fmt.Fprintf(raw, "### %s\n", r.label())
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(raw, "### took %s\n", time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, tail(buf.String(), 2000))
	}
	out := map[measurement]sample{}
	for _, m := range r.ms {
		if s := parse(buf.String(), m.Bench); s != nil {
			out[m] = s
		}
	}
	return out, nil
}

// benchRegexp anchors each level of a benchmark name: "A/b=1" → "^A$/^b=1$".
func benchRegexp(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse finds the result line of the named benchmark in go test output.
func parse(output, name string) sample {
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || procSuffix.ReplaceAllString(f[0], "") != name {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		s := sample{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			s[f[i+1]] = v
		}
		if len(s) > 0 {
			return s
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// median of one unit over samples; ok is false when no sample has the unit.
func median(ss []sample, unit string) (float64, bool) {
	var v []float64
	for _, s := range ss {
		if x, ok := s[unit]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// render builds the Markdown that goes between the markers.
func render(tbl table, rows []row, res map[measurement][]sample, rounds int, start time.Time, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", tbl.begin)
	fmt.Fprintf(&b, "Written by `make bench` on %s UTC (took %s): %d interleaved rounds, medians",
		start.UTC().Format("2006-01-02 15:04"), took.Round(time.Second), rounds)
	for _, r := range rows {
		if r.Deterministic && rounds > 1 {
			b.WriteString("; the rows marked \"one run\" are deterministic and ran in the first round only")
			break
		}
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "Machine: %s.\n\n", machine())
	b.WriteString("| row | what | Fathom | baseline | ratio | target | met |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		b.WriteString(r.line(res))
	}
	fmt.Fprintf(&b, "%s\n", tbl.end)
	return b.String()
}

// replaceTable writes table over the text between the markers of file.
func replaceTable(file string, tbl table, text string) error {
	old, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	s := string(old)
	i := strings.Index(s, tbl.begin)
	j := strings.Index(s, tbl.end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s block to replace", file, tbl.begin, tbl.end)
	}
	s = s[:i] + text + s[j+len(tbl.end)+1:]
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, file)
}

// machine describes the host in one line: CPU, cores, memory, kernel, Go.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 2 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, %d cores%s%s, %s", cpu, runtime.NumCPU(), mem, kernel, runtime.Version())
}
