package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/webhooks"
)

func init() {
	register("webhook_secret", parseWebhookSecret)
}

// parseWebhookSecret reads webhook_secret: the "whsec_" secret that signs the
// sessions' webhook notifications (env FATHOM_WEBHOOK_SECRET overrides it). The error
// never quotes the value.
func parseWebhookSecret(p *parser, f *File, key string, _, v *yaml.Node) error {
	s, err := p.str(v, key)
	if err != nil {
		return err
	}
	if _, err := webhooks.ParseSecret(s); err != nil {
		return p.err(v, key, "not a webhook secret: \"whsec_\" and at least 24 base64 bytes")
	}
	f.WebhookSecret = s
	return nil
}
