//go:build !race

package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// consulMembers returns a start function for members of one Consul cluster named after
// prefix, on the test PostgreSQL journal and one demo model: each call starts a member
// advertising meta (nil: nothing extra), stopped when the test ends. edit, when given,
// changes each member's configuration before it starts.
func consulMembers(t *testing.T, prefix string, edit ...func(*Config)) func(meta map[string]string) *Node {
	t.Helper()
	dsn := testenv.PostgresDSN(t)
	model := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	t.Cleanup(model.Close)
	ccfg := fcluster.DefaultConfig()
	ccfg.Name = fmt.Sprintf("fathom-%s-%d", prefix, time.Now().UnixNano())
	ccfg.Provider, ccfg.ConsulAddr = fcluster.ProviderConsul, testenv.ConsulAddr(t)
	return func(meta map[string]string) *Node {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		cfg := Config{Cluster: ccfg, Logger: log, PostgresDSN: dsn, DataDir: t.TempDir(), Session: session.DefaultConfig()}
		cfg.Cluster.Logger, cfg.Cluster.Meta = log, meta
		cfg.LLM.BaseURL, cfg.LLM.APIKey = model.URL+"/v1", "k"
		for _, e := range edit {
			e(&cfg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = n.Stop(ctx)
		})
		return n
	}
}
