package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// eventsOnly is a journal that stores events and nothing else: no session index (so
// no leases, reactivation or listing), no deletes, no counts.
type eventsOnly struct{ persistence.Journal }

// TestStartRefusesAJournalMissingACapability: a node given a journal that is no
// persistence.SessionStore fails at start, naming the journal and each capability it
// lacks, instead of running without leases, reactivation, delete or listing.
func TestStartRefusesAJournalMissingACapability(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j := memjournal.New(memjournal.Options{})
	defer j.Close()
	ccfg := fcluster.DefaultConfig()
	ccfg.Provider = fcluster.ProviderLocal
	n, err := node.Start(ctx, node.Config{Journal: eventsOnly{j}, Session: session.DefaultConfig(), Cluster: ccfg})
	if err == nil {
		_ = n.Stop(ctx)
		t.Fatal("the node started on a journal without a session index")
	}
	var miss *persistence.MissingCapabilityError
	if !errors.As(err, &miss) || miss.Journal != "node_test.eventsOnly" {
		t.Fatalf("start error %v, want a *persistence.MissingCapabilityError naming node_test.eventsOnly", err)
	}
	for _, c := range persistence.Capabilities {
		if !strings.Contains(err.Error(), c.Name) {
			t.Errorf("the error does not name the missing %s: %v", c.Name, err)
		}
	}
}
