package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fcluster "github.com/fathom-agents/fathom/cluster"
)

// echoKind answers every StringValue with "<member address>|<identity>|<text>".
func echoKind() *cluster.Kind {
	return cluster.NewKind("echo", actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*wrapperspb.StringValue); ok {
			ctx.Respond(wrapperspb.String(ctx.ActorSystem().Address() + "|" + ctx.Self().Id + "|" + m.Value))
		}
	}))
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode starts a member of cfg hosting echo and kinds (logging nowhere unless cfg.Logger is set) and stops
// it when the test ends.
func startNode(t *testing.T, cfg fcluster.Config, kinds ...*cluster.Kind) *fcluster.Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	n, err := fcluster.New(cfg, fcluster.NewActorSystem(cfg.Logger), append([]*cluster.Kind{echoKind()}, kinds...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return n
}

func call(n *fcluster.Node, id, text string) (string, error) {
	res, err := n.Cluster().Request(id, "echo", wrapperspb.String(text), cluster.WithTimeout(5*time.Second))
	if err != nil {
		return "", err
	}
	return res.(*wrapperspb.StringValue).Value, nil
}

func TestLocalGrainRoundTrip(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = "local-" + t.Name()
	n := startNode(t, cfg)
	got, err := call(n, "a", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, n.Address()+"|") || !strings.HasSuffix(got, "|hi") {
		t.Fatalf("echo = %q (node %s)", got, n.Address())
	}
	if addrs := n.MemberAddresses(); len(addrs) != 1 || addrs[0] != n.Address() {
		t.Fatalf("members %v", addrs)
	}
	// Stop is idempotent.
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConsulUnreachableFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cfg := fcluster.DefaultConfig()
	cfg.Provider, cfg.ConsulAddr, cfg.Logger = fcluster.ProviderConsul, dead, quiet()
	n, err := fcluster.New(cfg, fcluster.NewActorSystem(cfg.Logger), echoKind())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = n.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "consul agent at "+dead+" is unreachable") {
		t.Fatalf("Start = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Start took %s to fail", d)
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for name, mut := range map[string]func(*fcluster.Config){
		"no name":           func(c *fcluster.Config) { c.Name = "" },
		"bad provider":      func(c *fcluster.Config) { c.Provider = "etcd" },
		"bad port":          func(c *fcluster.Config) { c.Port = 70000 },
		"bad consul":        func(c *fcluster.Config) { c.Provider, c.ConsulAddr = "consul", "nocolon" },
		"advertise no port": func(c *fcluster.Config) { c.AdvertisedHost = "10.0.0.1:9000" },
	} {
		c := fcluster.DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := fcluster.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestStopEndsTheServerDrainWithAPeerConnected: a peer that keeps a stream open to the
// member would hold gRPC's GracefulStop past Proto.Actor's 10 s limit, which returns and
// leaves it running; Stop closes the server after DrainTimeout instead, so nothing of
// the member's server runs once Stop returned.
func TestStopEndsTheServerDrainWithAPeerConnected(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = "drain-" + strings.ReplaceAll(t.Name(), "/", "-")
	cfg.DrainTimeout = time.Second
	n := startNode(t, cfg) // its cleanup's Stop is a no-op after ours
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The peer: a raw remoting client holding a stream open and never closing it, in a
	// process of its own (the test binary run again): its gRPC transport reads gRPC's
	// global logger as it closes, which the next test's member start writes.
	peer := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperRemotingPeer$")
	peer.Env = append(os.Environ(), "FATHOM_TEST_REMOTING_PEER="+n.Address())
	out, err := peer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	peer.Stderr = os.Stderr
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = peer.Process.Kill(); _ = peer.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "up" { // the member's ConnectResponse came
		t.Fatalf("the peer did not connect: %q %v", line, err)
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

// TestHelperRemotingPeer is the peer of TestStopEndsTheServerDrainWithAPeerConnected,
// run in a process of its own: it opens a remoting stream to the member at
// FATHOM_TEST_REMOTING_PEER, prints "up" once the member answered, and holds the stream
// until it is killed. Without the variable it does nothing.
func TestHelperRemotingPeer(t *testing.T) {
	addr := os.Getenv("FATHOM_TEST_REMOTING_PEER")
	if addr == "" {
		t.Skip("a helper process of TestStopEndsTheServerDrainWithAPeerConnected")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := remote.NewRemotingClient(conn).Receive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "peer", Address: "127.0.0.1:1"}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("up")
	for {
		if _, err := stream.Recv(); err != nil {
			time.Sleep(time.Hour) // the member closed it; the test kills this process
		}
	}
}

// slowStopKind is echoKind whose activation stops itself on "stop" and then takes
// 150 ms to finish stopping, as a session grain does while it releases its lease:
// Proto.Actor has removed the activation from the registry by then (messages to it are
// dead letters) but the placement actor still maps the identity to it. It signals
// stopping (without blocking) as it begins those 150 ms.
func slowStopKind(stopping chan<- struct{}) *cluster.Kind {
	return cluster.NewKind("slowstop", actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *wrapperspb.StringValue:
			if m.Value == "stop" {
				ctx.Stop(ctx.Self())
				return
			}
			ctx.Respond(wrapperspb.String(ctx.Self().Id + "|" + m.Value))
		case *actor.Stopped:
			select {
			case stopping <- struct{}{}:
			default:
			}
			time.Sleep(150 * time.Millisecond)
		}
	}))
}

// TestCallWhileTheGrainStops: a call made while a grain's activation is stopping
// (passivating) reaches a fresh activation once the old one is gone. Proto.Actor's
// default retries (3 attempts within a microsecond) gave up with "dead letter" — a
// session read right after the session passivated answered 503.
func TestCallWhileTheGrainStops(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	cfg.Name = "stopping-" + t.Name()
	stopping := make(chan struct{}, 1)
	n := startNode(t, cfg, slowStopKind(stopping))
	c := n.Cluster()
	for i := range 3 {
		id := "g" + strconv.Itoa(i)
		first, err := c.Request(id, "slowstop", wrapperspb.String("a"), cluster.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		c.ActorSystem.Root.Send(c.Get(id, "slowstop"), wrapperspb.String("stop"))
		select { // inside the 150 ms stop: out of the registry, still placed
		case <-stopping:
		case <-time.After(5 * time.Second):
			t.Fatal("the activation never stopped")
		}
		second, err := c.Request(id, "slowstop", wrapperspb.String("b"), cluster.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatalf("a call while the activation stops: %v", err)
		}
		a, b := first.(*wrapperspb.StringValue).Value, second.(*wrapperspb.StringValue).Value
		if !strings.HasSuffix(b, "|b") || strings.TrimSuffix(a, "|a") == strings.TrimSuffix(b, "|b") {
			t.Fatalf("answers %q then %q: the second should come from a fresh activation", a, b)
		}
	}
}
