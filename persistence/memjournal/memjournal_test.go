package memjournal_test

import (
	"testing"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// TestConformance runs the journal conformance suite, every capability included, on
// handles of one in-memory store.
func TestConformance(t *testing.T) {
	s := memjournal.NewStore(memjournal.Options{Facts: journaltest.Facts})
	journaltest.Run(t, func(t *testing.T) persistence.Journal { return s.Open() })
}
