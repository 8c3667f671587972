package sandboxd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// isolator turns an execution into a command: bubblewrap around the helper around the
// interpreter, or the helper around the interpreter alone.
//
// Under bubblewrap the child gets new IPC, PID, network and UTS namespaces (no network:
// only a loopback that is down), a root of its own holding only what the interpreters
// need, read-only (see hostMounts: /usr, the /bin, /lib... links or directories, the
// dynamic loader's cache and /etc/alternatives, and the install prefix of an interpreter
// outside /usr), its own /dev and /proc, a private size-bounded tmpfs on /tmp with the
// work directory /tmp/work, and the source file and helper bound read-only under
// /tmp/.fathom. The rest of the host filesystem (/etc, /home, /root, /var, the host's
// /tmp...) does not exist inside. When the server runs as root no user namespace is made,
// so the helper can drop to the slot's real uid; otherwise bubblewrap makes one
// (--unshare-user) and the child keeps the server's uid.
//
// In both modes the helper runs first as the waiter (see report.go), which reports the
// program's own exit and usage: bwrap's, or a child forked from the server's address
// space, would report the wrong ones.
//
// Without bubblewrap the child is a fresh process in its own process group with a fresh
// 0700 work directory, under the same rlimits and (as root) the same per-slot uid.
type isolator struct {
	cfg    Config
	mode   Isolation // IsolationBwrap or IsolationRlimits
	bwrap  string
	helper string
	root   bool
	// uidBase is the uid of slot 0 (Config.UIDBase, or derived from the pid).
	uidBase int
	// mounts are the bubblewrap arguments that build the child's root (hostMounts).
	mounts []string
}

// autoUIDBase derives a uid range from the server's pid, so sandbox servers on one host
// (which share one pid namespace, hence distinct pids) never share slot uids: each one's
// sweep kills every process of its slot uids.
func autoUIDBase(maxConcurrent int) int {
	stride := max(1000, maxConcurrent)
	return 1_000_000 + (os.Getpid()%1_000_000)*stride%(1<<31-2_000_000)
}

// Paths inside the bubblewrap sandbox.
const (
	boxWork   = "/tmp/work"
	boxFathom = "/tmp/.fathom"
)

// uid returns the uid (and gid) slot runs as, or -1 to keep the server's.
func (iso *isolator) uid(slot int) int {
	if !iso.root {
		return -1
	}
	return iso.uidBase + slot
}

// prepare makes the execution's host directory: the source file in it, owned so the
// slot's uid can use it. It returns the directory.
func (iso *isolator) prepare(rt runtime, code string, slot int) (string, error) {
	dir, err := os.MkdirTemp(iso.cfg.WorkRoot, "fathom-exec-")
	if err != nil {
		return "", fmt.Errorf("create work directory: %w", err)
	}
	src := filepath.Join(dir, rt.file)
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("write source file: %w", err)
	}
	if uid := iso.uid(slot); uid >= 0 && iso.mode == IsolationRlimits {
		// The child works in this directory: it must own it.
		for _, p := range []string{dir, src} {
			if err := os.Chown(p, uid, uid); err != nil {
				_ = os.RemoveAll(dir)
				return "", fmt.Errorf("chown work directory: %w", err)
			}
		}
	}
	return dir, nil
}

// command builds the execution's command (not started). dir is from prepare.
func (iso *isolator) command(rt runtime, dir string, l fsp.Limits, slot int, userEnv map[string]string) *exec.Cmd {
	spec := helperSpec{
		data:   uint64(l.MemoryMB) << 20,
		cpu:    uint64((l.TimeoutMS+999)/1000) + 1,
		fsize:  iso.cfg.MaxFileBytes,
		nofile: iso.cfg.MaxOpenFiles,
		nice:   niceFor(l.CPUShares),
		uid:    iso.uid(slot),
		gid:    iso.uid(slot),
		// The waiter gives the exec helper its inherited-peak pipe as baselineFD.
		inheritedFD: baselineFD,
	}
	spec.as = spec.data + rt.asHeadroom
	if iso.root {
		spec.nproc = iso.cfg.MaxProcesses
	}
	var argv []string
	work := dir
	if iso.mode == IsolationBwrap {
		work = boxWork
		argv = append(iso.bwrapArgs(rt, dir), boxFathom+"/helper", helperWaitArg)
		argv = append(argv, spec.args(boxFathom+"/helper", rt.argv(boxFathom+"/"+rt.file))...)
	} else {
		argv = append([]string{iso.helper, helperWaitArg}, spec.args(iso.helper, rt.argv(filepath.Join(dir, rt.file)))...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if iso.mode == IsolationRlimits {
		cmd.Dir = dir
	}
	cmd.Env = childEnv(work, userEnv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = iso.cfg.KillGrace
	return cmd
}

func (iso *isolator) bwrapArgs(rt runtime, dir string) []string {
	a := []string{iso.bwrap}
	if iso.root {
		a = append(a, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try")
	} else {
		a = append(a, "--unshare-all")
	}
	a = append(a, "--die-with-parent", "--new-session", "--hostname", "sandbox")
	a = append(a, iso.mounts...)
	return append(a,
		"--dev", "/dev",
		"--proc", "/proc",
		"--perms", "01777", "--size", strconv.FormatUint(iso.cfg.TmpfsBytes, 10), "--tmpfs", "/tmp",
		"--perms", "0777", "--dir", boxWork,
		"--perms", "0755", "--dir", boxFathom,
		"--ro-bind", iso.helper, boxFathom+"/helper",
		"--ro-bind", filepath.Join(dir, rt.file), boxFathom+"/"+rt.file,
		"--chdir", boxWork,
		"--",
	)
}

// childEnv is the execution's whole environment: a small fixed base (PATH, HOME and
// TMPDIR in the work directory, UTF-8, unbuffered Python so output streams as produced),
// then the request's variables, which may override the base. Nothing of the server's own
// environment leaks in.
func childEnv(work string, user map[string]string) []string {
	env := map[string]string{
		"PATH":             "/usr/local/bin:/usr/bin:/bin",
		"HOME":             work,
		"TMPDIR":           work,
		"LANG":             "C.UTF-8",
		"PYTHONUNBUFFERED": "1",
	}
	for k, v := range user {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// niceFor maps cpu_shares to a nice value: the default 512 and above run at 0, fewer
// shares at a proportionally higher nice value (up to 19). Without cgroups a share can
// only lower priority, never raise it above the server's own.
func niceFor(shares int64) int {
	if shares >= fsp.DefaultCPUShares || shares <= 0 {
		return 0
	}
	return int((fsp.DefaultCPUShares - shares) * 19 / fsp.DefaultCPUShares)
}

// sweep kills every process left of slot's uid (rlimits mode as root: a child that left
// its process group with setsid cannot escape the uid), then reaps those that became our
// children: in rlimits mode as root the server is a child subreaper (see New), so orphans
// of an execution are reparented to it rather than to an init that may never reap them,
// and an unreaped zombie would still count against its slot's RLIMIT_NPROC. Only zombies
// of this slot's uid are waited for, never another execution's process. Under bubblewrap
// the PID namespace dies with its init, which reaps everything in it.
func (iso *isolator) sweep(slot int) error {
	uid := iso.uid(slot)
	if uid < 0 || iso.mode != IsolationRlimits {
		return nil
	}
	if len(processesOf(uid, -1, false)) > 0 { // usually none: no helper to start
		cmd := exec.Command(iso.helper, helperKillArg, strconv.Itoa(uid))
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sweep uid %d: %w: %s", uid, err, out)
		}
	}
	self := os.Getpid()
	deadline := time.Now().Add(iso.cfg.KillGrace)
	for {
		pending := false
		for _, p := range append(processesOf(uid, -1, true), processesOf(uid, -1, false)...) {
			if p.ppid != self {
				continue // not ours to reap (e.g. reparented before we were a subreaper)
			}
			pending = true
			if p.state == 'Z' {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
			}
		}
		if !pending || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// becomeSubreaper makes orphaned descendants of executions children of the server.
func becomeSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", e)
	}
	return nil
}

// systemRoots are the top-level host paths the interpreters run from: on a merged-/usr
// system the others are links into /usr, made as the same links inside.
var systemRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// systemFiles are the few host files under /etc the interpreters use: the dynamic
// loader's configuration and the alternatives links (/usr/bin/x -> /etc/alternatives/x).
var systemFiles = []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"}

// hostMounts returns the bubblewrap arguments that build an execution's root from the
// host: systemRoots (read-only binds, or the same symbolic links), systemFiles that
// exist, and, for each interpreter outside them, its install prefix (the directory above
// its bin/, e.g. /opt/node for /opt/node/bin/node), read-only. Nothing else of the host
// is visible.
func hostMounts(interps []string) []string {
	var a []string
	bound := map[string]bool{}
	for _, p := range systemRoots {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				a = append(a, "--symlink", target, p)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", p, p)
			bound[p] = true
		}
	}
	// bwrap would make /etc for the binds below 0700 root: the slot uid could not look in.
	a = append(a, "--perms", "0755", "--dir", "/etc")
	for _, p := range systemFiles {
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", p, p)
		}
	}
	covered := func(p string) bool {
		for r := range bound {
			if p == r || strings.HasPrefix(p, r+"/") {
				return true
			}
		}
		return false
	}
	for _, interp := range interps {
		paths := []string{interp}
		if real, err := filepath.EvalSymlinks(interp); err == nil {
			paths = append(paths, real)
		}
		for _, p := range paths {
			if !filepath.IsAbs(p) || covered(p) {
				continue
			}
			prefix := filepath.Dir(filepath.Dir(p))
			if prefix == "/" {
				prefix = filepath.Dir(p)
			}
			if prefix == "/" || bound[prefix] {
				continue
			}
			a = append(a, "--ro-bind", prefix, prefix)
			bound[prefix] = true
		}
	}
	return a
}
