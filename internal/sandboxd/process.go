package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// Why a process was killed by the server (the context cause of a run).
var (
	errCancelled    = errors.New("cancelled by the client")
	errDisconnected = errors.New("client disconnected")
	errShutdown     = errors.New("sandbox shutting down")
	errTimeout      = errors.New("time limit exceeded")
	errOutputLimit  = errors.New("output limit exceeded")
)

// job is one process run: what to run and where its output goes.
type job struct {
	rt     runtime
	code   string
	stdin  *string
	env    map[string]string
	limits fsp.Limits
	slot   int
	chunk  int
	// output receives each chunk of output as produced (stream is TypeStdout or
	// TypeStderr). It may block (backpressure); it returns false when nobody listens.
	output func(stream fsp.Type, data string) bool
	// started is called once the process runs.
	started func()
}

// outcome is how a run ended.
type outcome struct {
	status   fsp.Status
	exitCode *int
	duration time.Duration
	usage    *fsp.ResourceUsage
	// killedFor is the reason the server killed the process, if it did.
	killedFor error
}

// stderrTail keeps the last bytes of stderr to recognise out-of-memory failures.
const stderrTail = 4 << 10

// oomMarkers are what interpreters print when an allocation fails.
// Node.js says "Array buffer allocation failed" (a RangeError: the program exits 1) or
// "Allocation failed - JavaScript heap out of memory" (V8 aborts).
var oomMarkers = []string{"MemoryError", "out of memory", "Cannot allocate memory", "std::bad_alloc", "Out of memory",
	"Array buffer allocation failed"}

// run runs j to the end: until the process exits, or ctx is cancelled (its cause says
// why), the time limit passes or the output limit is exceeded. The process group is
// killed in every case before run returns, and no goroutine of the run outlives it.
func (iso *isolator) run(ctx context.Context, j job) (outcome, error) {
	dir, err := iso.prepare(j.rt, j.code, j.slot)
	if err != nil {
		return outcome{}, err
	}
	defer os.RemoveAll(dir)
	cmd := iso.command(j.rt, dir, j.limits, j.slot, j.env)
	if j.stdin != nil {
		cmd.Stdin = strings.NewReader(*j.stdin)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return outcome{}, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return outcome{}, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	repR, repW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return outcome{}, fmt.Errorf("report pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{repW} // the waiter's reportFD
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	repW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		repR.Close()
		return outcome{}, fmt.Errorf("start %s: %w", j.rt.lang, err)
	}
	reported := make(chan *helperReport, 1)
	go func() { reported <- readReport(repR) }() // ends at EOF: when the waiter is gone
	pgid := cmd.Process.Pid
	if j.started != nil {
		j.started()
	}

	var (
		once     sync.Once
		reason   error
		killDone = make(chan struct{})
	)
	kill := func(why error) {
		once.Do(func() {
			reason = why
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		})
	}
	timer := time.AfterFunc(time.Duration(j.limits.TimeoutMS)*time.Millisecond, func() { kill(errTimeout) })
	defer timer.Stop()
	go func() { // stops when the run ends (killDone) or ctx is cancelled
		select {
		case <-ctx.Done():
			kill(context.Cause(ctx))
		case <-killDone:
		}
	}()

	p := &pumps{limit: j.limits.MaxOutputBytes, output: j.output, overflow: func() { kill(errOutputLimit) }}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(outR, fsp.TypeStdout, j.chunk, false) }()
	go func() { defer wg.Done(); p.pump(errR, fsp.TypeStderr, j.chunk, true) }()

	waitErr := cmd.Wait()
	duration := time.Since(start)
	close(killDone)
	timer.Stop()
	// Whatever the main process left behind dies with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	sweepErr := iso.sweep(j.slot)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(iso.cfg.KillGrace):
		// A process outside our reach still holds the pipes: stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	var report *helperReport
	select {
	case report = <-reported:
	case <-time.After(iso.cfg.KillGrace):
		repR.Close()
		report = <-reported
	}
	repR.Close()
	once.Do(func() {}) // no kill after this point; reason is stable
	if sweepErr != nil {
		return outcome{}, sweepErr
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return outcome{}, fmt.Errorf("wait for %s: %w", j.rt.lang, waitErr)
	}
	return classify(report, cmd.ProcessState, reason, duration, j.limits, p.tailString()), nil
}

// classify turns the exit into a terminal status. rep is the program's own account, from
// the waiter; without one (the run was killed from outside, or the waiter was) the status
// comes from the server's child's exit (ps: bwrap or the waiter, which both report a
// child killed by signal n as code 128+n), and no resource usage is reported: theirs would
// be wrong.
func classify(rep *helperReport, ps *os.ProcessState, reason error, d time.Duration, l fsp.Limits, stderr string) outcome {
	o := outcome{duration: d, killedFor: reason}
	var signaled bool
	var sig syscall.Signal
	if rep != nil {
		if rep.Exited {
			c := rep.Code
			o.exitCode = &c
		} else {
			signaled, sig = true, syscall.Signal(rep.Signal)
		}
		o.usage = rep.usage()
	} else {
		ws, _ := ps.Sys().(syscall.WaitStatus)
		signaled, sig = ws.Signaled(), ws.Signal()
		if c := ws.ExitStatus(); ws.Exited() && c > 128 && c <= 128+64 {
			signaled, sig = true, syscall.Signal(c-128)
		} else if ws.Exited() {
			o.exitCode = &c
		}
	}
	switch {
	case reason == errTimeout:
		o.status = fsp.StatusTimeout
	case reason == errCancelled, reason == errDisconnected, reason == errShutdown:
		o.status = fsp.StatusCancelled
	case reason == errOutputLimit:
		o.status = fsp.StatusFailed
	case signaled && sig == syscall.SIGXCPU:
		o.status = fsp.StatusTimeout // the CPU rlimit backstop
	case signaled || *o.exitCode != 0:
		if outOfMemory(o.usage, l, stderr) {
			o.status = fsp.StatusOOM
		} else if !signaled {
			o.status = fsp.StatusCompleted
		} else {
			o.status = fsp.StatusFailed
		}
	default:
		o.status = fsp.StatusCompleted
	}
	return o
}

// outOfMemory reports whether a failed process ran out of memory: its runtime said so, or
// its peak resident memory reached 90% of the limit.
func outOfMemory(u *fsp.ResourceUsage, l fsp.Limits, stderr string) bool {
	if u != nil && u.PeakMemoryMB*10 >= l.MemoryMB*9 {
		return true
	}
	for _, m := range oomMarkers {
		if strings.Contains(stderr, m) {
			return true
		}
	}
	return false
}

// pumps reads stdout and stderr as produced and forwards them within the output limit.
type pumps struct {
	limit    int64
	output   func(stream fsp.Type, data string) bool
	overflow func()
	sent     atomic.Int64
	mu       sync.Mutex
	tail     []byte
}

// pump forwards r until EOF. Chunks never split a UTF-8 sequence; bytes past the output
// limit are dropped (and trigger overflow), and reading goes on so the child never blocks
// on a full pipe. keepTail keeps the last stderrTail bytes.
func (p *pumps) pump(r io.Reader, stream fsp.Type, chunk int, keepTail bool) {
	buf := make([]byte, chunk)
	var pending []byte
	listening := true
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if keepTail {
				p.keepTail(buf[:n])
			}
			data := append(pending, buf[:n]...)
			pending = nil
			if err == nil {
				data, pending = splitUTF8(data)
			}
			if listening && len(data) > 0 {
				listening = p.forward(stream, data)
			}
		}
		if err != nil {
			if listening && len(pending) > 0 {
				p.forward(stream, pending)
			}
			return
		}
	}
}

// forward sends data within the limit; it returns false once nothing more will be sent.
func (p *pumps) forward(stream fsp.Type, data []byte) bool {
	n := int64(len(data))
	total := p.sent.Add(n)
	if over := total - p.limit; over > 0 {
		keep := n - over
		if keep > 0 {
			k, _ := splitUTF8(data[:keep])
			p.output(stream, string(k))
		}
		p.overflow()
		return false
	}
	return p.output(stream, string(data))
}

func (p *pumps) keepTail(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tail = append(p.tail, b...)
	if len(p.tail) > stderrTail {
		p.tail = append(p.tail[:0:0], p.tail[len(p.tail)-stderrTail:]...)
	}
}

func (p *pumps) tailString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.tail)
}

// splitUTF8 splits b before a trailing incomplete UTF-8 sequence.
func splitUTF8(b []byte) (complete, rest []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], append([]byte(nil), b[i:]...)
			}
			break
		}
	}
	return b, nil
}
