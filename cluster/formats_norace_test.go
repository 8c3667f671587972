//go:build !race

// Two members in one process trip data races inside Proto.Actor's remoting (see
// consul_norace_test.go), so this test is excluded from -race runs; `make test` runs it
// in its race-free pass (its name matches "Consul").

package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestConsulPlacesJournalKindsOnNewestFormat: during a rolling upgrade (members
// advertising journal formats 2 and 3), every identity of a journal kind is placed on
// the member of the newest format, asked through either member, and both members report
// the range of formats (the lowest is the write gate). Once the newer member leaves, the
// older one hosts them again and reports one format.
func TestConsulPlacesJournalKindsOnNewestFormat(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = fmt.Sprintf("fathom-formats-%d", time.Now().UnixNano())
	cfg.Provider, cfg.ConsulAddr = fcluster.ProviderConsul, testenv.ConsulAddr(t)
	cfg.JournalKinds = []string{"echo"}
	older, newer := cfg, cfg
	older.Meta = map[string]string{buildinfo.MetaFormat: "2"}
	newer.Meta = map[string]string{buildinfo.MetaFormat: "3"}
	a := startNode(t, older)
	b := startNode(t, newer)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(a.MemberAddresses()) == 2 && len(b.MemberAddresses()) == 2
	}, "both members see two members (a %v, b %v)", a.MemberAddresses(), b.MemberAddresses())
	for _, n := range []*fcluster.Node{a, b} {
		if lo, hi := n.Formats(); lo != 2 || hi != 3 {
			t.Fatalf("member %s reports formats %d..%d; want 2..3", n.Address(), lo, hi)
		}
	}
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("id-%d", i)
		for _, via := range []*fcluster.Node{a, b} {
			got, err := call(via, id, "x")
			if err != nil {
				t.Fatalf("%s via %s: %v", id, via.Address(), err)
			}
			if host := strings.Split(got, "|")[0]; host != b.Address() {
				t.Fatalf("%s (asked via %s) placed on %s, a member of format 2; want %s, the member of format 3", id, via.Address(), host, b.Address())
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return len(a.MemberAddresses()) == 1 }, "the older member still sees %v", a.MemberAddresses())
	if lo, hi := a.Formats(); lo != 2 || hi != 2 {
		t.Fatalf("alone, the older member reports formats %d..%d; want 2..2", lo, hi)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		got, err := call(a, "id-0", "x")
		return err == nil && strings.HasPrefix(got, a.Address()+"|")
	}, "the older member, alone, does not host id-0")
}
