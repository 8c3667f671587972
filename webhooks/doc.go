// Package webhooks delivers a session's notifications to a receiver's URL, signed as the
// Standard Webhooks specification says (https://www.standardwebhooks.com).
//
// # Signing
//
// Each POST carries three headers: webhook-id (the notification's id, the same on every
// attempt of one notification, so a receiver drops duplicates by it), webhook-timestamp
// (Unix seconds of the attempt) and webhook-signature ("v1," and the base64 HMAC-SHA256
// of "id.timestamp.body" under the secret). The secret is "whsec_" and base64 bytes
// (Config.Secret); it is the node's, read from configuration or the environment, and
// never logged or recorded.
//
// # Delivery
//
// The Sender runs attempts on a bounded pool of workers with a bounded queue, each with
// its own timeout; it does not follow redirects and takes only http and https URLs. What
// is due and what was delivered is not the Sender's: the session grain keeps it in the
// session's journal (webhook_delivered, webhook_failed events; the fold's pending
// notifications), so a delivery survives the node's death and resumes on the node that
// reactivates the session. Backoff gives the delay before attempt n+1.
//
//	s, err := webhooks.NewSender(webhooks.DefaultConfig(), logger)
//	ok := s.Submit(webhooks.Attempt{URL: url, ID: id, Body: body}, func(r webhooks.Outcome) { ... })
//	defer s.Close()
package webhooks
