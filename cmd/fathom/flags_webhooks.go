package main

import (
	"flag"
	"os"

	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/webhooks"
)

// webhookFlags configure the sessions' webhook notifications. The secret has no flag
// (a command line is visible to every user of the machine): it is env
// FATHOM_WEBHOOK_SECRET, else the config file's webhook_secret, and is never logged.
type webhookFlags struct {
	url                  string
	timeout              envDuration
	backoff, maxBackoff  envDuration
	maxAttempts, workers uint64
}

func (f *webhookFlags) register(fs *flag.FlagSet) {
	d := webhooks.DefaultConfig()
	fs.StringVar(&f.url, "webhook-url", os.Getenv("FATHOM_WEBHOOK_URL"), "http(s) URL that receives the signed notifications of every session whose start names no webhook_url (needs FATHOM_WEBHOOK_SECRET or the config file's webhook_secret; env FATHOM_WEBHOOK_URL)")
	f.timeout.register(fs, "webhook-timeout", "FATHOM_WEBHOOK_TIMEOUT", d.Timeout, "bound of one webhook delivery attempt")
	f.backoff.register(fs, "webhook-backoff", "FATHOM_WEBHOOK_BACKOFF", d.InitialBackoff, "delay after a webhook's first failed attempt, doubled after each next one up to --webhook-max-backoff, plus up to a quarter of jitter")
	f.maxBackoff.register(fs, "webhook-max-backoff", "FATHOM_WEBHOOK_MAX_BACKOFF", d.MaxBackoff, "longest delay between two attempts of a webhook")
	fs.Uint64Var(&f.maxAttempts, "webhook-max-attempts", envUint("FATHOM_WEBHOOK_MAX_ATTEMPTS", uint64(d.MaxAttempts)), "attempts of one webhook notification before it is given up (webhook_failed with final); the defaults spread 12 over more than an hour (env FATHOM_WEBHOOK_MAX_ATTEMPTS)")
	fs.Uint64Var(&f.workers, "webhook-concurrency", envUint("FATHOM_WEBHOOK_CONCURRENCY", uint64(d.Concurrency)), "webhook delivery attempts in flight on the node (env FATHOM_WEBHOOK_CONCURRENCY)")
}

// config is the node's webhook configuration (the secret from the environment or file)
// and the default webhook URL.
func (f *webhookFlags) config(file *config.File) (webhooks.Config, string, error) {
	c := webhooks.DefaultConfig()
	c.Secret = os.Getenv("FATHOM_WEBHOOK_SECRET")
	if c.Secret == "" && file != nil {
		c.Secret = file.WebhookSecret
	}
	var err error
	if c.Timeout, err = f.timeout.value(); err != nil {
		return c, "", err
	}
	if c.InitialBackoff, err = f.backoff.value(); err != nil {
		return c, "", err
	}
	if c.MaxBackoff, err = f.maxBackoff.value(); err != nil {
		return c, "", err
	}
	c.MaxAttempts, c.Concurrency = int(f.maxAttempts), int(f.workers)
	if err := c.Validate(); err != nil {
		return c, "", usageError("webhooks: %v", err) // Validate never quotes the secret
	}
	if f.url != "" {
		if err := webhooks.ValidateURL(f.url); err != nil {
			return c, "", usageError("--webhook-url: %v", err)
		}
		if c.Secret == "" {
			return c, "", usageError("--webhook-url needs a webhook secret (env FATHOM_WEBHOOK_SECRET or the config file's webhook_secret)")
		}
	}
	return c, f.url, nil
}
