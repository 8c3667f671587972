package node

import (
	"fmt"

	"github.com/fathom-agents/fathom/webhooks"
)

// webhookConfig is c over webhooks.DefaultConfig: a zero field takes the default.
func webhookConfig(c webhooks.Config) webhooks.Config {
	d := webhooks.DefaultConfig()
	d.Secret = c.Secret
	if c.Timeout > 0 {
		d.Timeout = c.Timeout
	}
	if c.MaxAttempts > 0 {
		d.MaxAttempts = c.MaxAttempts
	}
	if c.InitialBackoff > 0 {
		d.InitialBackoff = c.InitialBackoff
	}
	if c.MaxBackoff > 0 {
		d.MaxBackoff = c.MaxBackoff
	}
	d.MaxBackoff = max(d.MaxBackoff, d.InitialBackoff)
	if c.Concurrency > 0 {
		d.Concurrency = c.Concurrency
	}
	if c.QueueSize > 0 {
		d.QueueSize = c.QueueSize
	}
	return d
}

// startWebhooks starts the webhook sender when the node has a secret, and tells the
// session grains whether they may take a webhook_url. A default or an agent's webhook
// url needs the secret.
func (n *Node) startWebhooks(b *boot) error {
	cfg := webhookConfig(n.cfg.Webhooks)
	for _, a := range b.session.Agents {
		if a.WebhookURL == "" {
			continue
		}
		if cfg.Secret == "" {
			return fmt.Errorf("webhooks: agent %s: a webhook url needs a webhook secret", a.Name)
		}
		if err := webhooks.ValidateURL(a.WebhookURL); err != nil {
			return fmt.Errorf("webhooks: agent %s: %w", a.Name, err)
		}
	}
	if cfg.Secret == "" {
		if b.session.WebhookURL != "" {
			return fmt.Errorf("webhooks: a default webhook url needs a webhook secret")
		}
		return nil
	}
	if b.session.WebhookURL != "" {
		if err := webhooks.ValidateURL(b.session.WebhookURL); err != nil {
			return fmt.Errorf("webhooks: default url: %w", err)
		}
	}
	s, err := webhooks.NewSender(cfg, n.cfg.Logger.With("component", "webhooks"))
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	n.webhooks = s
	b.session.Webhooks = true
	return nil
}

// SendsWebhooks reports whether the node sends webhook notifications (it has a webhook
// secret): only then does it take webhook URLs and push configs.
func (n *Node) SendsWebhooks() bool { return n.webhooks != nil }
