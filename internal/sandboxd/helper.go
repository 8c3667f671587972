package sandboxd

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// The helper: how an execution gets its rlimits without touching the server's own.
//
// Go cannot set resource limits on a child between fork and exec, and setrlimit on the
// server would limit the server. So the server re-executes its own binary (HelperPath) in
// a hidden mode selected by argv[1]: the helper applies the rlimits and the nice value,
// drops to the execution's uid/gid when one is given (root servers run every slot as its
// own uid, which makes RLIMIT_NPROC a per-execution bound and lets a sweep kill every
// process of the slot), then execve(2)s the interpreter. Nothing stays behind: the
// interpreter replaces the helper, in the same process group (and, under bubblewrap, the
// same PID namespace).
//
// Binaries that can serve as HelperPath call RunHelperIfRequested first thing (the fathom
// binary does it in an init function; test binaries in TestMain).

// Hidden argv[1] values of the helper modes.
const (
	helperExecArg = "__fathom-sandbox-exec"
	helperKillArg = "__fathom-sandbox-kill"
	helperWaitArg = "__fathom-sandbox-wait"
)

// helperSpec is what the helper applies before exec: the positional arguments after the
// mode, in this order, then "--" and the command.
type helperSpec struct {
	as, data, cpu, fsize, nproc, nofile uint64
	nice                                int
	uid, gid                            int // -1: keep
	// inheritedFD is the descriptor the helper writes its peak RSS to just before exec
	// (the waiter's baselineFD; see report.go), -1 for none.
	inheritedFD int
}

func (s helperSpec) args(helper string, cmd []string) []string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	a := []string{helper, helperExecArg, u(s.as), u(s.data), u(s.cpu), u(s.fsize), u(s.nproc), u(s.nofile),
		strconv.Itoa(s.nice), strconv.Itoa(s.uid), strconv.Itoa(s.gid), strconv.Itoa(s.inheritedFD), "--"}
	return append(a, cmd...)
}

// In exec helper mode the main goroutine stays on the main thread (init functions run
// there), so execve runs on the thread group leader: the thread the waiter traces.
func init() {
	if len(os.Args) > 1 && os.Args[1] == helperExecArg {
		goruntime.LockOSThread()
	}
}

// RunHelperIfRequested runs the sandbox helper and exits when the process was started in
// one of its hidden modes; otherwise it returns at once. Call it before anything else in
// main (or TestMain) of a binary used as Config.HelperPath.
func RunHelperIfRequested() {
	if len(os.Args) < 2 {
		return
	}
	var err error
	switch os.Args[1] {
	case helperExecArg:
		err = helperExec(os.Args[2:])
	case helperKillArg:
		err = helperKill(os.Args[2:])
	case helperWaitArg:
		err = helperWait(os.Args[2:])
	default:
		return
	}
	fmt.Fprintf(os.Stderr, "fathom sandbox helper: %v\n", err)
	os.Exit(126)
}

func helperExec(args []string) error {
	if len(args) < 12 || args[10] != "--" {
		return errors.New("bad helper arguments")
	}
	var n [6]uint64
	for i := range n {
		v, err := strconv.ParseUint(args[i], 10, 64)
		if err != nil {
			return fmt.Errorf("parse limit %d: %w", i, err)
		}
		n[i] = v
	}
	nice, err1 := strconv.Atoi(args[6])
	uid, err2 := strconv.Atoi(args[7])
	gid, err3 := strconv.Atoi(args[8])
	inheritedFD, err4 := strconv.Atoi(args[9])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("parse nice/uid/gid/fd: %w", err)
	}
	cmd := args[11:]
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	// Everything that allocates happens before the limits: once RLIMIT_AS and RLIMIT_DATA
	// are set the helper's own Go heap may not grow (its reservations alone can exceed
	// them), so the last steps are raw system calls on prepared arguments.
	argv0, err := syscall.BytePtrFromString(cmd[0])
	if err != nil {
		return fmt.Errorf("command %q: %w", cmd[0], err)
	}
	argv, err := syscall.SlicePtrFromStrings(cmd)
	if err != nil {
		return fmt.Errorf("command arguments: %w", err)
	}
	envv, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	limits := [...]struct {
		res int
		lim syscall.Rlimit
	}{
		{syscall.RLIMIT_AS, rlim(n[0])}, {syscall.RLIMIT_DATA, rlim(n[1])}, {syscall.RLIMIT_CPU, rlim(n[2])},
		{syscall.RLIMIT_FSIZE, rlim(n[3])}, {rlimitNPROC, rlim(n[4])}, {syscall.RLIMIT_NOFILE, rlim(n[5])},
		{syscall.RLIMIT_CORE, syscall.Rlimit{}},
	}
	// The peak RSS the program inherits (ours, and the waiter's before us): written to
	// inheritedFD just before execve, which closes it.
	var ru syscall.Rusage
	if inheritedFD >= 0 {
		syscall.CloseOnExec(inheritedFD)
	}
	if nice > 0 {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, nice); err != nil {
			return fmt.Errorf("setpriority: %w", err)
		}
	}
	if gid >= 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(gid, gid, gid); err != nil {
			return fmt.Errorf("setgid %d: %w", gid, err)
		}
	}
	if uid >= 0 {
		if err := syscall.Setresuid(uid, uid, uid); err != nil {
			return fmt.Errorf("setuid %d: %w", uid, err)
		}
	}
	// Die with the waiter (and so with the server): changing credentials cleared the
	// parent-death signal the waiter set.
	const prSetPdeathsig = 1
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_PDEATHSIG: %w", e)
	}
	// No other goroutine may run from here on: one that allocates once the limits are set
	// makes the runtime throw, and its "fatal error: ..." would reach the program's stderr
	// before execve ends it. With one P, held by this goroutine through the raw system
	// calls below (they never give it up), nothing else runs Go code. Gosched first gives
	// this goroutine a fresh time slice, so the scheduler has no reason to preempt it in
	// the few microseconds until execve.
	debug.SetGCPercent(-1)
	goruntime.GOMAXPROCS(1)
	goruntime.Gosched()
	for i := range limits {
		if limits[i].lim.Max == 0 && limits[i].res != syscall.RLIMIT_CORE {
			continue // 0: leave unset
		}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, uintptr(limits[i].res),
			uintptr(unsafe.Pointer(&limits[i].lim)), 0, 0, 0); e != 0 {
			fail(helperMsgRlimit)
		}
	}
	if inheritedFD >= 0 {
		const rusageSelf = 0
		if _, _, e := syscall.RawSyscall(syscall.SYS_GETRUSAGE, rusageSelf, uintptr(unsafe.Pointer(&ru)), 0); e == 0 {
			_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(inheritedFD), uintptr(unsafe.Pointer(&ru.Maxrss)), unsafe.Sizeof(ru.Maxrss))
		}
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	if e == syscall.ENOENT || e == syscall.EACCES {
		fail(helperMsgNotFound)
	}
	fail(helperMsgExec)
	return nil
}

// Messages the helper writes after its limits are set, prepared so writing them does not
// allocate.
var (
	helperMsgRlimit   = []byte("fathom sandbox helper: setrlimit failed\n")
	helperMsgNotFound = []byte("fathom sandbox helper: interpreter not found or not executable\n")
	helperMsgExec     = []byte("fathom sandbox helper: exec failed\n")
)

// fail writes msg to stderr and exits 126 without allocating.
func fail(msg []byte) {
	_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, 2, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)))
	syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 126, 0, 0)
}

func rlim(v uint64) syscall.Rlimit { return syscall.Rlimit{Cur: v, Max: v} }

// helperKill becomes the given uid and kills every process of that uid: kill(-1) as an
// unprivileged user reaches exactly the processes it owns (and never the caller), in one
// pass the kernel makes atomic with respect to fork. Repeats until no live process is
// left (zombies also accept signals; reaping them is the server's job).
func helperKill(args []string) error {
	if len(args) != 1 {
		return errors.New("bad helper arguments")
	}
	uid, err := strconv.Atoi(args[0])
	if err != nil || uid < 1 {
		return fmt.Errorf("bad uid %q", args[0])
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	self := os.Getpid()
	for range 100 {
		if err := syscall.Kill(-1, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			os.Exit(0)
		}
		if len(processesOf(uid, self, false)) == 0 {
			os.Exit(0)
		}
	}
	return errors.New("processes survive kill")
}

// processesOf lists the processes of uid (except pid skip): the live ones, or with
// zombies the zombies only.
func processesOf(uid, skip int, zombies bool) []procInfo {
	var out []procInfo
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == skip {
			continue
		}
		// /proc/PID is owned by the process's effective uid: a cheap first filter.
		if fi, err := e.Info(); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
			continue
		}
		p, ok := readProc(pid)
		if ok && p.uid == uid && (p.state == 'Z') == zombies {
			out = append(out, p)
		}
	}
	return out
}

// procInfo is what /proc/PID/status says about a process.
type procInfo struct {
	pid, ppid, uid int
	state          byte
}

func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, uid: -1}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "State":
			p.state = f[0][0]
		case "PPid":
			p.ppid, _ = strconv.Atoi(f[0])
		case "Uid":
			p.uid, _ = strconv.Atoi(f[0])
		}
	}
	return p, p.uid >= 0
}
