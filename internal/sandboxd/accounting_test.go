package sandboxd

import (
	"strconv"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// accountingModes runs f against a server in each isolation mode this machine has:
// bubblewrap (when usable; required with FATHOM_TEST_REQUIRE_SERVICES) and rlimits.
func accountingModes(t *testing.T, f func(t *testing.T, c *client)) {
	for _, mode := range []Isolation{IsolationAuto, IsolationRlimits} {
		t.Run(string(mode), func(t *testing.T) {
			s := newTestServer(t, func(c *Config) { c.Isolation = mode })
			if mode == IsolationAuto {
				requireBwrap(t, s)
			}
			f(t, s.dial(t))
		})
	}
}

// The reported resource usage is the program's, not bubblewrap's: a program allocating
// past its memory limit is oom with a peak near the limit.
func TestSandboxPeakMemoryIsTheProgramsOwn(t *testing.T) {
	accountingModes(t, func(t *testing.T, c *client) {
		const limit = 128
		c.execute("grow", fsp.LangPython, "chunks = []\nwhile True:\n    chunks.append(bytearray(4 << 20))", func(m *fsp.Execute) { m.Limits.MemoryMB = limit })
		r := c.collect("grow")
		if !strings.HasSuffix(r.kinds(), "status:oom result") {
			t.Fatalf("frames %s stderr %.300q", r.kinds(), r.stderr)
		}
		u := r.result.ResourceUsage
		if u == nil || u.PeakMemoryMB < limit*3/4 || u.PeakMemoryMB > limit+16 {
			t.Fatalf("peak memory %+v, want near the %d MB limit", u, limit)
		}
		t.Logf("usage %+v", *u)
	})
}

// A Node.js allocation the memory limit refuses (a RangeError, exit 1) is oom, not
// completed.
func TestSandboxNodeAllocationFailureIsOOM(t *testing.T) {
	accountingModes(t, func(t *testing.T, c *client) {
		c.execute("buf", fsp.LangJavaScript, "const b = Buffer.alloc(512 * 1024 * 1024); console.log(b.length)", func(m *fsp.Execute) { m.Limits.MemoryMB = 256 })
		r := c.collect("buf")
		if !strings.HasSuffix(r.kinds(), "status:oom result") || !strings.Contains(r.stderr, "allocation failed") {
			t.Fatalf("frames %s stderr %.300q", r.kinds(), r.stderr)
		}
	})
}

// The reported CPU time covers what the program burned.
func TestSandboxCPUTimeIsTheProgramsOwn(t *testing.T) {
	accountingModes(t, func(t *testing.T, c *client) {
		code := "import time\nwhile time.process_time() < 0.8:\n    pass\nprint(int(time.process_time() * 1000))"
		c.execute("busy", fsp.LangPython, code, nil)
		r := c.collect("busy")
		burned, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if err != nil || r.result == nil || r.result.ResourceUsage == nil {
			t.Fatalf("frames %s stdout %q stderr %q", r.kinds(), r.stdout, r.stderr)
		}
		if got := r.result.ResourceUsage.CPUTimeMS; got < burned {
			t.Fatalf("cpu_time_ms %d, the program burned %d ms", got, burned)
		}
	})
}

// Exit codes 129..192 are the program's own exit codes; only a real signal is reported
// as one (exit_code null).
func TestSandboxHighExitCodesAreExits(t *testing.T) {
	accountingModes(t, func(t *testing.T, c *client) {
		for _, tc := range []struct {
			id   string
			lang fsp.Language
			code string
			exit int
		}{
			{"py137", fsp.LangPython, "import sys; sys.exit(137)", 137},
			{"sh130", fsp.LangShell, "exit 130", 130},
			{"sh192", fsp.LangShell, "exit 192", 192},
		} {
			c.execute(tc.id, tc.lang, tc.code, nil)
			r := c.collect(tc.id)
			if r.statuses[len(r.statuses)-1] != fsp.StatusCompleted || r.result.ExitCode == nil || *r.result.ExitCode != tc.exit {
				t.Fatalf("%s: frames %s exit %s, want completed with exit code %d", tc.id, r.kinds(), exitOf(r), tc.exit)
			}
		}
		c.execute("term", fsp.LangPython, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)", nil)
		r := c.collect("term")
		if r.statuses[len(r.statuses)-1] != fsp.StatusFailed || r.result.ExitCode != nil {
			t.Fatalf("signalled: frames %s exit %s, want failed with exit code null", r.kinds(), exitOf(r))
		}
	})
}

// The server's own memory never shows up as the program's: a child forked from a server
// with a large heap inherits its high-water mark, which made a small failing program in
// rlimits mode look like it ran out of memory.
func TestSandboxServerMemoryIsNotCharged(t *testing.T) {
	ballast := make([]byte, 200<<20) // the server (this test process) grows past the program's limit
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	accountingModes(t, func(t *testing.T, c *client) {
		c.execute("small", fsp.LangPython, "import sys\nprint('small')\nsys.exit(1)", func(m *fsp.Execute) { m.Limits.MemoryMB = 64 })
		r := c.collect("small")
		if r.statuses[len(r.statuses)-1] != fsp.StatusCompleted || r.result.ExitCode == nil || *r.result.ExitCode != 1 {
			t.Fatalf("frames %s exit %s, want completed with exit code 1", r.kinds(), exitOf(r))
		}
		if u := r.result.ResourceUsage; u == nil || u.PeakMemoryMB > 40 {
			t.Fatalf("peak memory %+v for a print: the server's memory was charged", u)
		}
	})
	if ballast[0] != 1 { // keeps the ballast alive until here
		t.Fatal("ballast lost")
	}
}

// exitOf renders a run's exit code for messages.
func exitOf(r *run) string {
	if r.result == nil || r.result.ExitCode == nil {
		return "null"
	}
	return strconv.Itoa(*r.result.ExitCode)
}

// peak_memory_mb is the program's own peak, not its helpers' (which a child inherits
// through ru_maxrss; the helpers here carry the ~54 MB peak of the fathom binary's): a
// small program reads well below it, a program that touches 100 MB (or a shell's child
// 300 MB) reads at least that, and an allocation past a small memory_mb is still oom while a
// small program failing under it is not.
func TestSandboxPeakMemoryOfSmallAndLargePrograms(t *testing.T) {
	accountingModes(t, func(t *testing.T, c *client) {
		for _, tc := range []struct {
			id       string
			lang     fsp.Language
			code     string
			memoryMB int64
			status   fsp.Status
			min, max int64
		}{
			{"py-small", fsp.LangPython, "print('small')", 256, fsp.StatusCompleted, 1, 29},
			{"sh-small", fsp.LangShell, "echo small", 256, fsp.StatusCompleted, 0, 29},
			{"py-fail-small", fsp.LangPython, "import sys\nsys.exit(3)", 32, fsp.StatusCompleted, 1, 28},
			{"py-100mb", fsp.LangPython, "b = b'x' * (100 << 20)\nprint(len(b))", 256, fsp.StatusCompleted, 100, 140},
			// A child's peak counts once it is above the helpers' inherited one: 300 MB is,
			// also under -race, whose runtime makes the helpers (the test binary) larger.
			{"sh-child-300mb", fsp.LangShell, "python3 -c \"b = b'x' * (300 << 20); print(len(b))\"", 512, fsp.StatusCompleted, 300, 350},
			{"py-oom-64", fsp.LangPython, "chunks = []\nwhile True:\n    chunks.append(bytearray(b'x' * (1 << 20)))", 64, fsp.StatusOOM, 40, 80},
		} {
			c.execute(tc.id, tc.lang, tc.code, func(m *fsp.Execute) {
				m.Limits.MemoryMB = tc.memoryMB
				m.Env = map[string]string{helperBallastEnv: "54"}
			})
			r := c.collect(tc.id)
			if r.result == nil || r.statuses[len(r.statuses)-1] != tc.status {
				t.Errorf("%s: frames %s stderr %.300q, want status %s", tc.id, r.kinds(), r.stderr, tc.status)
				continue
			}
			u := r.result.ResourceUsage
			if u == nil || u.PeakMemoryMB < tc.min || u.PeakMemoryMB > tc.max {
				t.Errorf("%s: resource usage %+v, want peak_memory_mb in [%d, %d]", tc.id, u, tc.min, tc.max)
				continue
			}
			t.Logf("%s: %+v", tc.id, *u)
		}
	})
}
