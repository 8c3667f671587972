package sandboxd

import (
	"errors"
	"fmt"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// Isolation selects how executions are isolated.
type Isolation string

// Isolation modes.
const (
	// IsolationAuto is the default: bubblewrap, which must be installed and pass its
	// start-up probe (New fails otherwise, saying how to install it). It never falls
	// back to rlimits silently: without namespaces an execution would reach the network
	// and the host's files; ask for IsolationRlimits to accept that.
	IsolationAuto Isolation = "auto"
	// IsolationBwrap requires bubblewrap: New fails when the probe does not pass.
	IsolationBwrap Isolation = "bwrap"
	// IsolationRlimits never uses bubblewrap: a fresh process under rlimits (and, when
	// the server runs as root, a per-slot unprivileged uid), with the host's network and
	// filesystem. Only when asked for explicitly.
	IsolationRlimits Isolation = "rlimits"
)

// ErrBwrapUnavailable is wrapped by the error New returns when bubblewrap isolation
// (IsolationAuto or IsolationBwrap) cannot be used: bwrap is not installed or its probe
// fails here.
var ErrBwrapUnavailable = errors.New("bubblewrap unavailable")

// BwrapError is New's error when bubblewrap isolation cannot be used. It wraps
// ErrBwrapUnavailable and says how to install bubblewrap or opt out.
type BwrapError struct {
	// Isolation is the mode asked for (auto or bwrap).
	Isolation Isolation
	// Err is why: the lookup or the probe failure.
	Err error
}

// Error implements error.
func (e *BwrapError) Error() string {
	return fmt.Sprintf("isolation %s needs bubblewrap, which is unusable here (%v): install it "+
		"(Debian/Ubuntu: apt-get install bubblewrap, or scripts/install-bwrap.sh; it needs user or root "+
		"namespaces), point --bwrap (FATHOM_SANDBOX_BWRAP) at it, or pass --isolation rlimits "+
		"(FATHOM_SANDBOX_ISOLATION=rlimits) to run executions without namespaces: with the host's network and files",
		e.Isolation, e.Err)
}

// Unwrap returns ErrBwrapUnavailable and the cause.
func (e *BwrapError) Unwrap() []error { return []error{ErrBwrapUnavailable, e.Err} }

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Token is the bearer token clients must present on the upgrade request. Required.
	Token string
	// MaxConcurrent bounds the executions running at once, server-wide.
	MaxConcurrent int
	// MaxQueued bounds the acknowledged executions waiting for a free slot; past
	// MaxConcurrent+MaxQueued an execute is answered SANDBOX_OVERLOADED (no ack).
	MaxQueued int

	// MaxTimeout bounds limits.timeout_ms.
	MaxTimeout time.Duration
	// MaxMemoryMB bounds limits.memory_mb.
	MaxMemoryMB int64
	// MaxCPUShares bounds limits.cpu_shares.
	MaxCPUShares int64
	// MaxOutputBytes bounds limits.max_output_bytes.
	MaxOutputBytes int64
	// MaxCodeBytes bounds an execute's code.
	MaxCodeBytes int
	// MaxStdinBytes bounds an execute's stdin.
	MaxStdinBytes int
	// MaxEnvEntries bounds the number of env variables of an execute.
	MaxEnvEntries int
	// MaxEnvBytes bounds the total size of an execute's env keys and values.
	MaxEnvBytes int

	// MaxProcesses is RLIMIT_NPROC of an execution (processes and threads). It is enforced
	// per execution when the server runs as root (each slot runs as its own uid); an
	// unprivileged server cannot change uid and leaves it unset.
	MaxProcesses uint64
	// MaxFileBytes is RLIMIT_FSIZE of an execution: the largest file it may write.
	MaxFileBytes uint64
	// MaxOpenFiles is RLIMIT_NOFILE of an execution.
	MaxOpenFiles uint64
	// TmpfsBytes is the size of the private /tmp under bubblewrap.
	TmpfsBytes uint64
	// UIDBase is the first uid of the per-slot uids executions run as when the server runs
	// as root: slot i runs as UIDBase+i (same gid). Unused when not root. 0 derives a range
	// from the server's pid, so that servers on one host never share uids (a server kills
	// every process of its slot uids). Give each server on a host its own range.
	UIDBase int

	// Isolation selects bubblewrap or rlimits only.
	Isolation Isolation
	// BwrapPath is the bubblewrap binary; "" looks up "bwrap" on PATH.
	BwrapPath string
	// HelperPath is the executable re-run in its hidden helper mode to apply rlimits and
	// drop privileges (see RunHelperIfRequested); "" means os.Executable().
	HelperPath string
	// Interpreters overrides the interpreter of a language (an absolute path or a name on
	// PATH); languages absent here are looked up in the default places.
	Interpreters map[fsp.Language]string
	// WorkRoot is the directory per-execution work directories are created under; ""
	// means os.TempDir().
	WorkRoot string

	// MaxFrameBytes bounds an incoming frame. A larger frame closes the connection
	// (WebSocket close 1009); frames up to this size that fail to decode are answered
	// INVALID_REQUEST and the connection lives on.
	MaxFrameBytes int
	// OutputChunkBytes is the largest stdout/stderr chunk read at once.
	OutputChunkBytes int
	// SendQueue bounds the frames waiting for the socket per connection; producers block
	// (pipes fill, the child blocks) when it is full.
	SendQueue int
	// WriteTimeout is the write deadline of every frame.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings the client at the WebSocket level; a
	// client silent for twice this long is dropped and its executions killed.
	PingInterval time.Duration
	// KillGrace is how long output pumps may drain after the process group was killed
	// before their pipes are closed regardless.
	KillGrace time.Duration
}

// DefaultConfig returns the defaults: 8 concurrent executions, 16 queued; timeouts up to
// 5 minutes, memory up to 1 GiB (the seed's execution_max_ms and max_memory_mb), output
// up to 16 MiB, code up to 1 MiB; automatic isolation.
func DefaultConfig() Config {
	return Config{
		MaxConcurrent:    8,
		MaxQueued:        16,
		MaxTimeout:       5 * time.Minute,
		MaxMemoryMB:      1024,
		MaxCPUShares:     1024,
		MaxOutputBytes:   16 << 20,
		MaxCodeBytes:     1 << 20,
		MaxStdinBytes:    1 << 20,
		MaxEnvEntries:    128,
		MaxEnvBytes:      64 << 10,
		MaxProcesses:     64,
		MaxFileBytes:     64 << 20,
		MaxOpenFiles:     256,
		TmpfsBytes:       64 << 20,
		Isolation:        IsolationAuto,
		MaxFrameBytes:    4 << 20,
		OutputChunkBytes: 32 << 10,
		SendQueue:        256,
		WriteTimeout:     10 * time.Second,
		PingInterval:     30 * time.Second,
		KillGrace:        2 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Token == "":
		return errors.New("token is required")
	case c.MaxConcurrent < 1:
		return fmt.Errorf("max concurrent %d: must be >= 1", c.MaxConcurrent)
	case c.MaxQueued < 0:
		return fmt.Errorf("max queued %d: must be >= 0", c.MaxQueued)
	case c.MaxTimeout < time.Millisecond:
		return fmt.Errorf("max timeout %s: must be >= 1ms", c.MaxTimeout)
	case c.MaxMemoryMB < 1 || c.MaxOutputBytes < 1 || c.MaxCodeBytes < 1 || c.MaxCPUShares < 1:
		return errors.New("max memory, output, code and cpu shares must be >= 1")
	case c.MaxStdinBytes < 0 || c.MaxEnvEntries < 0 || c.MaxEnvBytes < 0:
		return errors.New("max stdin, env entries and env bytes must be >= 0")
	case c.MaxProcesses < 1 || c.MaxFileBytes < 1 || c.MaxOpenFiles < 16:
		return errors.New("max processes and file bytes must be >= 1, max open files >= 16")
	case c.Isolation != IsolationAuto && c.Isolation != IsolationBwrap && c.Isolation != IsolationRlimits:
		return fmt.Errorf("isolation %q: want auto, bwrap or rlimits", c.Isolation)
	case c.MaxFrameBytes < 1024 || c.OutputChunkBytes < 64 || c.SendQueue < 1:
		return errors.New("max frame bytes >= 1024, output chunk bytes >= 64 and send queue >= 1 required")
	case c.WriteTimeout <= 0 || c.PingInterval <= 0 || c.KillGrace <= 0:
		return errors.New("write timeout, ping interval and kill grace must be > 0")
	case c.UIDBase != 0 && (c.UIDBase < 1000 || c.UIDBase > 1<<31-1-c.MaxConcurrent):
		return fmt.Errorf("uid base %d: must be 0 (automatic) or >= 1000", c.UIDBase)
	}
	return nil
}

// checkExecute validates an execute's size and limits against the configured maxima and
// returns the limits with the protocol's defaults filled in.
func (c Config) checkExecute(m *fsp.Execute) (fsp.Limits, error) {
	l := m.Limits
	if l.CPUShares == 0 {
		l.CPUShares = fsp.DefaultCPUShares
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = min(fsp.DefaultMaxOutputBytes, c.MaxOutputBytes)
	}
	switch {
	case len(m.Code) > c.MaxCodeBytes:
		return l, fmt.Errorf("code is %d bytes, limit %d", len(m.Code), c.MaxCodeBytes)
	case m.Stdin != nil && len(*m.Stdin) > c.MaxStdinBytes:
		return l, fmt.Errorf("stdin is %d bytes, limit %d", len(*m.Stdin), c.MaxStdinBytes)
	case len(m.Env) > c.MaxEnvEntries:
		return l, fmt.Errorf("env has %d entries, limit %d", len(m.Env), c.MaxEnvEntries)
	case l.TimeoutMS > c.MaxTimeout.Milliseconds():
		return l, fmt.Errorf("limits.timeout_ms %d exceeds the maximum %d", l.TimeoutMS, c.MaxTimeout.Milliseconds())
	case l.MemoryMB > c.MaxMemoryMB:
		return l, fmt.Errorf("limits.memory_mb %d exceeds the maximum %d", l.MemoryMB, c.MaxMemoryMB)
	case l.CPUShares > c.MaxCPUShares:
		return l, fmt.Errorf("limits.cpu_shares %d exceeds the maximum %d", l.CPUShares, c.MaxCPUShares)
	case l.MaxOutputBytes > c.MaxOutputBytes:
		return l, fmt.Errorf("limits.max_output_bytes %d exceeds the maximum %d", l.MaxOutputBytes, c.MaxOutputBytes)
	}
	n := 0
	for k, v := range m.Env {
		n += len(k) + len(v)
	}
	if n > c.MaxEnvBytes {
		return l, fmt.Errorf("env is %d bytes, limit %d", n, c.MaxEnvBytes)
	}
	return l, nil
}
