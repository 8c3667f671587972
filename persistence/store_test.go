package persistence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// bare is a journal with no capability beyond persistence.Journal.
type bare struct{ persistence.Journal }

// indexOnly adds the session index and nothing else.
type indexOnly struct {
	persistence.Journal
	persistence.SessionIndex
}

func TestCheckSessionStoreNamesTheMissingCapabilities(t *testing.T) {
	mem := memjournal.New(memjournal.Options{})
	if s, err := persistence.CheckSessionStore("memory", mem); err != nil || s == nil {
		t.Fatalf("the in-memory journal: %v", err)
	}
	_, err := persistence.CheckSessionStore("bare", bare{mem})
	var miss *persistence.MissingCapabilityError
	if !errors.As(err, &miss) || miss.Journal != "bare" || len(miss.Missing) != len(persistence.Capabilities) {
		t.Fatalf("a bare journal: %v, want all %d capabilities missing", err, len(persistence.Capabilities))
	}
	_, err = persistence.CheckSessionStore("index-only", indexOnly{mem, mem})
	if !errors.As(err, &miss) || len(miss.Missing) != len(persistence.Capabilities)-1 ||
		strings.Contains(err.Error(), "persistence.SessionIndex") || !strings.Contains(err.Error(), "journal index-only") ||
		!strings.Contains(err.Error(), "persistence.SessionDeleter (deleting sessions") {
		t.Fatalf("a journal with only the index: %v", err)
	}
}
