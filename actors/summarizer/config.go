package summarizer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/prompts"
)

// Config configures the pool.
type Config struct {
	// Provider is the summarizer's model (required). Wrap it in llm/resilient for retries.
	Provider llm.Provider
	// Summary is the trigger, target and input budget. Default memory.DefaultSummaryConfig().
	Summary memory.SummaryConfig
	// Tokenizer counts the new summary's tokens. Default: the tokenizer of
	// Summary.Model, falling back to memory.DefaultEncoding.
	Tokenizer *memory.Tokenizer
	// Prompts renders the "summarizer" template. Default prompts.Default().
	Prompts *prompts.Set
	// Workers is the number of jobs that run at once. Default 2.
	Workers int
	// Timeout bounds one job: a model slower than this fails the job (ErrTimeout) and
	// frees the worker. Default 2 minutes.
	Timeout time.Duration
	// MaxQueued bounds the sessions waiting for a free worker. Default 1,024.
	MaxQueued int
	// MaxRestarts within RestartWindow bound a worker's restarts; past them the worker is
	// stopped and the pool starts a fresh one. Defaults 10 per minute.
	MaxRestarts   int
	RestartWindow time.Duration
	// Logger logs failures; nil discards.
	Logger *slog.Logger
}

// withDefaults fills zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Summary == (memory.SummaryConfig{}) {
		c.Summary = memory.DefaultSummaryConfig()
	}
	if c.Tokenizer == nil {
		t, err := memory.TokenizerForModel(c.Summary.Model, "")
		if err != nil {
			return c, fmt.Errorf("summarizer: %w", err)
		}
		c.Tokenizer = t
	}
	if c.Prompts == nil {
		p, err := prompts.Default()
		if err != nil {
			return c, fmt.Errorf("summarizer: %w", err)
		}
		c.Prompts = p
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = 1024
	}
	if c.MaxRestarts == 0 {
		c.MaxRestarts = 10
	}
	if c.RestartWindow == 0 {
		c.RestartWindow = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, c.Validate()
}

// Validate reports a configuration that cannot work (after defaults).
func (c Config) Validate() error {
	if c.Provider == nil {
		return errors.New("summarizer: a provider is required")
	}
	if c.Workers < 1 || c.Timeout <= 0 || c.MaxQueued < 1 || c.MaxRestarts < 1 || c.RestartWindow <= 0 {
		return fmt.Errorf("summarizer: workers, timeout, max queued, max restarts and restart window must be positive, got %+v", c)
	}
	return c.Summary.Validate()
}

// Props returns the pool's props. Zero fields of cfg take their defaults.
func Props(cfg Config) (*actor.Props, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// One-for-one: workers share nothing, so a crash concerns its worker alone. A
	// restart is cheap (no state) and the crashed job has already been answered.
	strategy := actor.NewOneForOneStrategy(cfg.MaxRestarts, cfg.RestartWindow, actor.DefaultDecider)
	return actor.PropsFromProducer(func() actor.Actor { return newPool(cfg) }, actor.WithSupervisor(strategy)), nil
}

// Spawn starts the pool under root with the given name (the node uses "summarizers").
func Spawn(root *actor.RootContext, name string, cfg Config) (*actor.PID, error) {
	props, err := Props(cfg)
	if err != nil {
		return nil, err
	}
	pid, err := root.SpawnNamed(props, name)
	if err != nil {
		return nil, fmt.Errorf("summarizer: spawn %s: %w", name, err)
	}
	return pid, nil
}
