package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// Under bubblewrap the execution has no network: not even the host's loopback.
func TestSandboxNetworkBlocked(t *testing.T) {
	s := newTestServer(t, nil)
	requireBwrap(t, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c := s.dial(t)
	code := fmt.Sprintf(`import socket
for addr in [("127.0.0.1", %d), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(addr, timeout=2).close()
        print("connected", addr)
    except OSError as e:
        print("blocked", addr, type(e).__name__)
`, port)
	c.execute("net", fsp.LangPython, code, nil)
	r := c.collect("net")
	if strings.Contains(r.stdout, "connected") || strings.Count(r.stdout, "blocked") != 2 {
		t.Fatalf("network reachable from the sandbox: %q %q", r.stdout, r.stderr)
	}
	t.Logf("isolation %s: %s", s.srv.Isolation(), strings.TrimSpace(r.stdout))
}

// Under bubblewrap the root is read-only, /tmp is private, and the PID namespace holds
// only the execution.
func TestSandboxFilesystemAndPIDs(t *testing.T) {
	s := newTestServer(t, nil)
	requireBwrap(t, s)
	host, err := os.CreateTemp("", "fathom-host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	host.Close()
	defer os.Remove(host.Name())
	c := s.dial(t)
	code := fmt.Sprintf(`import os
try:
    open("/etc/fathom-test", "w")
    print("etc writable")
except OSError:
    print("etc read-only")
open("scratch.txt", "w").write("x")
print("cwd", os.getcwd(), os.path.exists("scratch.txt"))
print("host tmp visible" if os.path.exists(%q) else "host tmp hidden")
print("pids", len([p for p in os.listdir("/proc") if p.isdigit()]))
print("uid", os.getuid())
`, host.Name())
	c.execute("fs", fsp.LangPython, code, nil)
	r := c.collect("fs")
	for _, want := range []string{"etc read-only", "cwd /tmp/work True", "host tmp hidden"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("want %q in %q (stderr %q)", want, r.stdout, r.stderr)
		}
	}
	var pids int
	for _, l := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "pids "); ok {
			pids, _ = strconv.Atoi(v)
		}
	}
	if pids < 1 || pids > 3 {
		t.Fatalf("%d processes visible: want a private PID namespace", pids)
	}
}

// A fork bomb is bounded by RLIMIT_NPROC (per slot uid) and the time limit, leaves
// nothing behind and does not hurt the server.
func TestSandboxForkBomb(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("RLIMIT_NPROC is per execution only when the server runs as root (slot uids): a fork bomb would hit the whole user")
	}
	for _, mode := range []Isolation{IsolationAuto, IsolationRlimits} {
		t.Run(string(mode), func(t *testing.T) {
			s := newTestServer(t, func(c *Config) { c.Isolation = mode; c.MaxProcesses = 32 })
			c := s.dial(t)
			start := time.Now()
			c.execute("bomb", fsp.LangShell, "bomb() { bomb | bomb & }; bomb; sleep 1; echo survived", func(m *fsp.Execute) { m.Limits.TimeoutMS = 3000 })
			r := c.collect("bomb")
			if r.result == nil || time.Since(start) > 15*time.Second {
				t.Fatalf("fork bomb: %s after %v", r.kinds(), time.Since(start))
			}
			t.Logf("%s: %s after %v", s.srv.Isolation(), r.kinds(), time.Since(start).Round(time.Millisecond))
			waitNoSlotProcesses(t, s)
			c.execute("after", fsp.LangShell, "echo fine", nil)
			if r := c.collect("after"); r.stdout != "fine\n" {
				t.Fatalf("after the bomb: %s %q", r.kinds(), r.stderr)
			}
		})
	}
}

// waitNoSlotProcesses polls until no process runs as a slot uid.
func waitNoSlotProcesses(t *testing.T, s *testServer) {
	t.Helper()
	lo, hi := s.srv.iso.uidBase, s.srv.iso.uidBase+s.srv.cfg.MaxConcurrent
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
					if u, _ := strconv.Atoi(f[1]); u >= lo && u < hi {
						left = append(left, e.Name())
					}
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of slot uids left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rlimits-only isolation (the fallback where bubblewrap cannot run) runs executions,
// enforces memory and time, and kills everything an execution started, even a child that
// left the process group.
func TestSandboxRlimitsOnly(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.Isolation = IsolationRlimits })
	if s.srv.Isolation() != IsolationRlimits {
		t.Fatalf("isolation %s", s.srv.Isolation())
	}
	c := s.dial(t)
	c.execute("r1", fsp.LangPython, "import os\nprint('hi', os.getuid() != 0 or 'root')", nil)
	if r := c.collect("r1"); r.stdout != "hi True\n" {
		t.Fatalf("rlimits: %s %q %q", r.kinds(), r.stdout, r.stderr)
	}
	c.execute("r2", fsp.LangPython, "x = bytearray(512 << 20)", func(m *fsp.Execute) { m.Limits.MemoryMB = 64 })
	if r := c.collect("r2"); !strings.HasSuffix(r.kinds(), "status:oom result") {
		t.Fatalf("rlimits oom: %s %q", r.kinds(), r.stderr)
	}
	token := fmt.Sprintf("fathom-rl-%d", time.Now().UnixNano())
	c.execute("r3", fsp.LangPython, fmt.Sprintf("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)', %q])\nprint('started', flush=True)", token), nil)
	r := c.collect("r3")
	if r.stdout != "started\n" {
		t.Fatalf("r3: %s %q", r.kinds(), r.stderr)
	}
	if os.Geteuid() == 0 {
		waitNoProcesses(t, token) // the uid sweep got the setsid child
	} else {
		t.Log("not root: a setsid child escapes the process group kill in rlimits-only mode")
	}
}

// A bubblewrap that cannot work here (no user namespaces, say) is found by the start-up
// probe: auto and bwrap refuse to start, saying how to install it or opt out; nothing
// falls back to rlimits silently.
func TestSandboxBwrapProbeFails(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Isolation{IsolationAuto, IsolationBwrap} {
		cfg := DefaultConfig()
		cfg.Token, cfg.BwrapPath, cfg.Isolation = testToken, fake, mode
		srv, err := New(cfg, nil)
		if err == nil {
			_ = srv.Close(context.Background())
			t.Fatalf("%s: New succeeded with isolation %s", mode, srv.Isolation())
		}
		if !errors.Is(err, ErrBwrapUnavailable) || !strings.Contains(err.Error(), "No permissions") ||
			!strings.Contains(err.Error(), "--isolation rlimits") {
			t.Fatalf("%s: New = %v", mode, err)
		}
	}
}

// Without bubblewrap on PATH, the default (auto) isolation fails the start with how to
// install it; only an explicit rlimits starts.
func TestSandboxAutoWithoutBwrapFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no bwrap; the interpreters are found by absolute path
	cfg := DefaultConfig()
	cfg.Token = testToken
	srv, err := New(cfg, nil)
	if err == nil {
		_ = srv.Close(context.Background())
		t.Fatalf("auto without bwrap started with isolation %s", srv.Isolation())
	}
	var be *BwrapError
	if !errors.As(err, &be) || be.Isolation != IsolationAuto || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Fatalf("New = %v, want a BwrapError with the install hint", err)
	}
	cfg.Isolation = IsolationRlimits
	srv, err = New(cfg, nil)
	if err != nil {
		t.Fatalf("explicit rlimits: %v", err)
	}
	defer srv.Close(context.Background())
	if srv.Isolation() != IsolationRlimits {
		t.Fatalf("isolation %s", srv.Isolation())
	}
}

// Which isolation this machine gives; visible with -v.
func TestSandboxIsolationMode(t *testing.T) {
	s := newTestServer(t, nil)
	t.Logf("isolation mode: %s (languages %v, root %v)", s.srv.Isolation(), s.srv.Languages(), os.Geteuid() == 0)
}

// Under bubblewrap the execution sees only what the interpreters need: no host /etc
// (hostname, passwd), no other host directory, and a root of a few entries.
func TestSandboxHostFilesHidden(t *testing.T) {
	s := newTestServer(t, nil)
	requireBwrap(t, s)
	// A host directory no interpreter needs (not /tmp, which is private anyway).
	base := "/var/tmp"
	if _, err := os.Stat(base); err != nil {
		base, _ = os.UserHomeDir()
	}
	dir, err := os.MkdirTemp(base, "fathom-host-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := s.dial(t)
	code := fmt.Sprintf(`import os
for p in ["/etc/hostname", "/etc/passwd", %q]:
    try:
        open(p).read()
        print("readable", p)
    except OSError as e:
        print("hidden", p, type(e).__name__)
print("root", sorted(os.listdir("/")))
`, secret)
	c.execute("host", fsp.LangPython, code, nil)
	r := c.collect("host")
	if strings.Contains(r.stdout, "readable") || strings.Count(r.stdout, "hidden") != 3 {
		t.Fatalf("host files visible in the sandbox: %q (stderr %q)", r.stdout, r.stderr)
	}
	for _, p := range []string{"'home'", "'root'", "'var'", "'work'"} {
		if strings.Contains(r.stdout, p) {
			t.Fatalf("host directory %s in the sandbox's root: %q", p, r.stdout)
		}
	}
	t.Logf("%s", strings.TrimSpace(r.stdout))
}

// hostMounts binds the system directories and an interpreter's install prefix outside
// them, never the host root.
func TestHostMounts(t *testing.T) {
	args := strings.Join(hostMounts([]string{"/usr/bin/python3", "/opt/fathom-test-node/bin/node"}), " ")
	for _, want := range []string{"--ro-bind /usr /usr", "--ro-bind /opt/fathom-test-node /opt/fathom-test-node", "--dir /etc"} {
		if !strings.Contains(args, want) {
			t.Errorf("mounts lack %q: %s", want, args)
		}
	}
	for _, bad := range []string{"--ro-bind / /", "--bind / /", "/etc/hostname", "/etc/passwd", "--ro-bind /opt /opt"} {
		if strings.Contains(args+" ", bad+" ") {
			t.Errorf("mounts expose %q: %s", bad, args)
		}
	}
}
