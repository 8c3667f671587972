package session

import (
	"errors"
	"log/slog"

	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
)

// A session whose journal holds an event this build cannot decode (written by a newer
// Fathom: a rolling upgrade, or a roll-back) cannot be hosted here. Its requests answer
// failed_precondition naming the cause, never unavailable (retrying would not help) or
// internal; its activation says so once in the log and releases the session's lease
// instead of holding it while it retries, so a member of the newer build can continue
// the session, and passivates when idle.

// readError is the grain error of a failed read of a session's journal (what says which
// read): failed_precondition when an event was written by a newer version, else
// unavailable.
func readError(err error, what string) error {
	if errors.Is(err, persistence.ErrNewerFormat) {
		return sessiongrain.ErrFailedPrecondition("%s: %v (this member runs Fathom %s: upgrade it)", what, err, buildinfo.String())
	}
	return sessiongrain.ErrUnavailable("%s: %v", what, err)
}

// logNewer says once per activation that its load failed (err) on an event of a newer
// version: the activation (onResume) then releases the session's lease and retries
// nothing, and answers requests (failed_precondition) until it passivates when idle.
func logNewer(log *slog.Logger, err error) {
	log.Warn("cannot host this session: its journal holds an event written by a newer Fathom; releasing its lease so a member of the newer build continues it (upgrade this member)",
		"version", buildinfo.String(), "journal_format", buildinfo.Format, "error", err)
}
