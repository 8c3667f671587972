package sandboxd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// The waiter: how a program's own exit and resource usage reach the server.
//
// Under bubblewrap the server's child is bwrap, whose exit status folds a signal n into
// code 128+n (so a program's own exit(137) looks like SIGKILL) and whose rusage is bwrap's
// own (a few ms, and a peak RSS that is the server's: a child forked from the server
// inherits its memory high-water mark across exec), not the program's. Without
// bubblewrap that inheritance alone makes a direct child's peak RSS the server's. So the
// helper runs first in a third mode, the waiter (inside the namespace under bubblewrap): it starts the exec helper (which applies the limits and execs
// the interpreter) as its child, waits for it with wait4(2), and writes what the kernel
// said — exited or signalled, the code or signal, CPU time, peak RSS — as one JSON line
// to file descriptor 3, a pipe whose other end the server reads. The waiter closes that
// descriptor on exec, so the program never holds it, and makes itself non-dumpable, so
// a program running under the same uid cannot reach it through /proc either.
//
// A peak RSS from wait4(2) is not the program's own either: a process's ru_maxrss is the
// highest of every address space it had, so the program inherits the waiter's peak (the
// exec helper shares the waiter's memory until its exec) and the exec helper's (a Go
// runtime with the whole binary's package initialisation: some 54 MB for the fathom
// binary). So the waiter measures the program's own peak: it traces its child with
// ptrace(2) (not the program's children; the tracee's signals are passed on unchanged,
// a stop signal is resumed at once since nothing inside sends SIGCONT, and a program
// cannot trace itself), and when the program exits reads its high-water mark (VmHWM in
// /proc/PID/status) while its memory still exists; and the exec helper writes
// the peak the program inherits (getrusage(2) just before execve) to baselineFD. The
// program's peak is that high-water mark, or ru_maxrss when that is above what was
// inherited: then it is the program's, or a child's it waited for (a shell's commands).
// Where tracing is refused (a seccomp policy), the report falls back to ru_maxrss, an
// upper bound.
//
// The report is absent when the execution was killed from outside (timeout, cancel,
// disconnect: the server kills the process group, or bwrap and the namespace with the
// waiter in it) or when the waiter itself was killed; the server then reports no resource
// usage rather than a wrong one.

// reportFD is the waiter's report descriptor (the server's cmd.ExtraFiles[0]).
const reportFD = 3

// maxReportBytes bounds what the server reads from the report pipe.
const maxReportBytes = 4 << 10

// baselineFD is the exec helper's descriptor for the peak RSS it passes on to the program
// (helperSpec.inheritedFD), a pipe the waiter reads.
const baselineFD = 3

// inheritedSlackKB is how far ru_maxrss may exceed the inherited peak the exec helper
// measured (pages it touched after measuring) and still be the inherited one.
const inheritedSlackKB = 1024

// ptraceOExitKill is PTRACE_O_EXITKILL, which package syscall does not name: the tracee
// dies with the waiter.
const ptraceOExitKill = 0x100000

// helperReport is the waiter's account of the program (the exec helper's process, which
// became the interpreter): how it ended and what it used, from wait4(2).
type helperReport struct {
	// Exited is true when the program exited by itself (Code is its status).
	Exited bool `json:"exited"`
	// Code is the exit status when Exited.
	Code int `json:"code"`
	// Signal is the signal that killed the program when not Exited.
	Signal int `json:"signal,omitempty"`
	// CPUMicros is user plus system CPU time of the program and the children it waited for.
	CPUMicros int64 `json:"cpu_us"`
	// MaxRSSKB is the program's own peak resident set size in KiB: its high-water mark
	// at exit, or ru_maxrss when that exceeds what it inherited (see above).
	MaxRSSKB int64 `json:"maxrss_kb"`
}

// helperWait runs cmd (the exec helper's command line) as a child, waits for it and
// writes a helperReport to reportFD. It exits with the child's code (128+n for a signal n).
func helperWait(cmd []string) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(reportFD, &st); err != nil {
		return fmt.Errorf("report descriptor %d: %w", reportFD, err)
	}
	syscall.CloseOnExec(reportFD)
	const prSetDumpable = 4
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", e)
	}
	// Every ptrace request must come from the thread that started the tracee.
	goruntime.LockOSThread()
	baseR, baseW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("baseline pipe: %w", err)
	}
	start := func(trace bool) (*exec.Cmd, error) {
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		c.ExtraFiles = []*os.File{baseW} // baselineFD
		c.Env = os.Environ()
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Ptrace: trace} // dies with the waiter
		return c, c.Start()
	}
	c, err := start(true)
	traced := err == nil
	if !traced {
		c, err = start(false) // tracing refused here: fall back to ru_maxrss
	}
	baseW.Close()
	if err != nil {
		return fmt.Errorf("start %s: %w", cmd[0], err)
	}
	ws, ru, hwm, err := waitTraced(c.Process.Pid, traced)
	if err != nil {
		return err
	}
	var inherited [8]byte
	n, _ := io.ReadFull(baseR, inherited[:]) // written before the program's exec; EOF once it is gone
	baseR.Close()
	rep := reportOf(ws, ru)
	if n == len(inherited) {
		rep.MaxRSSKB = programPeak(ru.Maxrss, int64(binary.NativeEndian.Uint64(inherited[:])), hwm)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	f := os.NewFile(reportFD, "report")
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	_ = f.Close()
	code := rep.Code
	if !rep.Exited {
		code = 128 + rep.Signal
	}
	os.Exit(code)
	return nil
}

// waitTraced waits for the child pid to end. When traced (it was started under
// PTRACE_TRACEME and stops after its first exec) it is continued through its stops, its
// signals delivered as they would have been, and hwm is its VmHWM in KiB when it exits
// (-1 when it was never read: not traced, or killed). ws and ru are the child's exit.
func waitTraced(pid int, traced bool) (ws syscall.WaitStatus, ru syscall.Rusage, hwm int64, err error) {
	hwm = -1
	optionsSet := false
	for {
		if _, err := syscall.Wait4(pid, &ws, syscall.WALL, &ru); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return ws, ru, hwm, fmt.Errorf("wait for %d: %w", pid, err)
		}
		if !ws.Stopped() {
			return ws, ru, hwm, nil
		}
		sig := ws.StopSignal()
		switch {
		case !traced:
		case sig == syscall.SIGTRAP && !optionsSet: // the exec helper's own exec
			optionsSet = true
			sig = 0
			if err := syscall.PtraceSetOptions(pid, syscall.PTRACE_O_TRACEEXIT|syscall.PTRACE_O_TRACEEXEC|ptraceOExitKill); err != nil {
				// Untraced from here on: ru_maxrss it is.
				_ = syscall.PtraceDetach(pid)
				traced = false
				continue
			}
		case ws.TrapCause() == syscall.PTRACE_EVENT_EXIT:
			hwm = vmHWM(pid)
			sig = 0
		case ws.TrapCause() == syscall.PTRACE_EVENT_EXEC:
			sig = 0
		case groupStop(pid):
			sig = 0 // a stop signal took effect: resume (nobody here would send SIGCONT)
		}
		if err := syscall.PtraceCont(pid, int(sig)); err != nil && err != syscall.ESRCH {
			return ws, ru, hwm, fmt.Errorf("continue %d: %w", pid, err)
		}
	}
}

// groupStop reports whether the tracee's stop is a group-stop rather than the delivery
// of a signal (PTRACE_GETSIGINFO fails with EINVAL for a group-stop).
func groupStop(pid int) bool {
	const ptraceGetSiginfo = 0x4202
	var info [128]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_PTRACE, ptraceGetSiginfo, uintptr(pid), 0, uintptr(unsafe.Pointer(&info[0])), 0, 0)
	return e == syscall.EINVAL
}

// vmHWM is pid's peak resident set size in KiB (VmHWM in /proc/PID/status), -1 when it
// cannot be read.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
				return kb
			}
		}
	}
	return -1
}

// programPeak is the program's own peak RSS in KiB from its ru_maxrss, the peak it
// inherited and its high-water mark at exit (-1: unknown): ru_maxrss when it exceeds the
// inherited peak (then it is the program's, or a waited-for child's), else the
// high-water mark, else ru_maxrss (an upper bound).
func programPeak(maxRSS, inherited, hwm int64) int64 {
	if maxRSS > inherited+inheritedSlackKB || hwm < 0 {
		return maxRSS
	}
	return hwm
}

// reportOf turns a wait status and its rusage into a report.
func reportOf(ws syscall.WaitStatus, ru syscall.Rusage) helperReport {
	var rep helperReport
	switch {
	case ws.Exited():
		rep.Exited, rep.Code = true, ws.ExitStatus()
	case ws.Signaled():
		rep.Signal = int(ws.Signal())
	}
	rep.CPUMicros = (ru.Utime.Nano() + ru.Stime.Nano()) / 1000
	rep.MaxRSSKB = ru.Maxrss
	return rep
}

// usage is the report's resource usage as FSP reports it.
func (r helperReport) usage() *fsp.ResourceUsage {
	return &fsp.ResourceUsage{PeakMemoryMB: (r.MaxRSSKB + 1023) / 1024, CPUTimeMS: (time.Duration(r.CPUMicros) * time.Microsecond).Milliseconds()}
}

// readReport reads the waiter's report from r until EOF; nil when there is none (the
// waiter was killed) or it cannot be read.
func readReport(r io.Reader) *helperReport {
	b, err := io.ReadAll(io.LimitReader(r, maxReportBytes))
	if err != nil || len(b) == 0 {
		return nil
	}
	var rep helperReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil
	}
	return &rep
}
