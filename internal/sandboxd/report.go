package sandboxd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

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
// The report is absent when the execution was killed from outside (timeout, cancel,
// disconnect: the server kills the process group, or bwrap and the namespace with the
// waiter in it) or when the waiter itself was killed; the server then reports no resource
// usage rather than a wrong one.

// reportFD is the waiter's report descriptor (the server's cmd.ExtraFiles[0]).
const reportFD = 3

// maxReportBytes bounds what the server reads from the report pipe.
const maxReportBytes = 4 << 10

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
	// MaxRSSKB is the program's peak resident set size in KiB (ru_maxrss).
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
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = os.Environ()
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the waiter
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd[0], err)
	}
	_ = c.Wait() // the exit status is read from ProcessState below
	rep := reportOf(c.ProcessState)
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

// reportOf turns a wait status and its rusage into a report.
func reportOf(ps *os.ProcessState) helperReport {
	var rep helperReport
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			rep.Exited, rep.Code = true, ws.ExitStatus()
		case ws.Signaled():
			rep.Signal = int(ws.Signal())
		}
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
		rep.CPUMicros = (ru.Utime.Nano() + ru.Stime.Nano()) / 1000
		rep.MaxRSSKB = ru.Maxrss
	}
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
