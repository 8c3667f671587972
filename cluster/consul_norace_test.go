//go:build !race

// Two members in one process trip data races inside Proto.Actor's remoting (its
// endpointManager reads a stop flag unsynchronised while another member disconnects), so
// this test is excluded from -race runs; `make test` runs this package a second time
// without -race. cmd/fathom's test of two `fathom node` processes covers the same ground.

package cluster_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/testenv"
)

func TestConsulTwoNodesShareIdentities(t *testing.T) {
	addr := testenv.ConsulAddr(t)
	cfg := fcluster.DefaultConfig()
	cfg.Name = fmt.Sprintf("fathom-test-%d", time.Now().UnixNano())
	cfg.Provider, cfg.ConsulAddr = fcluster.ProviderConsul, addr
	a := startNode(t, cfg)
	b := startNode(t, cfg)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(a.MemberAddresses()) == 2 && len(b.MemberAddresses()) == 2
	}, "both nodes see two members (a %v, b %v)", a.MemberAddresses(), b.MemberAddresses())
	hosts := map[string]int{}
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("id-%d", i)
		fromA, err := call(a, id, "x")
		if err != nil {
			t.Fatalf("%s via a: %v", id, err)
		}
		fromB, err := call(b, id, "x")
		if err != nil {
			t.Fatalf("%s via b: %v", id, err)
		}
		hostA, hostB := strings.Split(fromA, "|")[0], strings.Split(fromB, "|")[0]
		if hostA != hostB {
			t.Fatalf("%s answered by %s via a but %s via b", id, hostA, hostB)
		}
		hosts[hostA]++
	}
	if len(hosts) != 2 {
		t.Fatalf("20 identities all placed on %v", hosts)
	}
}

// TestConsulStopEndsTheServerDrainWithAPeerConnected: in a graceful leave (a Consul
// member; a local one stops at once), a peer that keeps a stream open to the member would
// hold gRPC's GracefulStop past Proto.Actor's 10 s limit, which returns and leaves it
// running; Stop closes the server after DrainTimeout instead, so nothing of the member's
// server runs once Stop returned.
func TestConsulStopEndsTheServerDrainWithAPeerConnected(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = fmt.Sprintf("drain-%d", time.Now().UnixNano())
	cfg.Provider, cfg.ConsulAddr = fcluster.ProviderConsul, testenv.ConsulAddr(t)
	cfg.DrainTimeout = time.Second
	n := startNode(t, cfg) // its cleanup's Stop is a no-op after ours
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The peer: a raw remoting client holding a stream open and never closing it.
	conn, err := grpc.Dial(n.Address(), grpc.WithTransportCredentials(insecure.NewCredentials())) // grpc v1.60 (Proto.Actor's) has no NewClient
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	stream, err := remote.NewRemotingClient(conn).Receive(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "peer", Address: "127.0.0.1:1"}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the member's ConnectResponse: the stream is up
		t.Fatal(err)
	}
	began := time.Now()
	if err := n.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	took := time.Since(began)
	if took > 8*time.Second {
		t.Fatalf("Stop took %s: the drain was not bounded by DrainTimeout", took)
	}
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "grpc.(*Server).GracefulStop") {
			t.Fatalf("a GracefulStop of the member is still running after Stop returned (%s):\n%s", took, g)
		}
	}
}
