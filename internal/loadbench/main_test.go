package loadbench

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm/mock"
)

// envMockScript, set in the environment of this test binary, makes it serve that mock
// script (JSON) as the model server instead of running tests: the benchmarks that
// measure the node's own CPU and memory run the model out of process.
const envMockScript = "FATHOM_LOADBENCH_MOCK_SCRIPT"

// envMockTLS, set to 1 beside envMockScript, makes the child serve HTTPS with HTTP/2 (as
// the hosted model APIs do) on a self-signed certificate, which it prints for the parent.
const envMockTLS = "FATHOM_LOADBENCH_MOCK_TLS"

// modelProto is how the node reaches the mock model process.
type modelProto int

const (
	// plainHTTP is HTTP/1.1 without TLS: one connection per call in flight.
	plainHTTP modelProto = iota
	// httpsH2 is HTTPS with HTTP/2 (ALPN), as api.openai.com and api.anthropic.com
	// serve: the calls in flight share a few connections as streams.
	httpsH2
)

func TestMain(m *testing.M) {
	if s := os.Getenv(envMockScript); s != "" {
		if err := serveMock(s, os.Getenv(envMockTLS) == "1"); err != nil {
			fmt.Fprintln(os.Stderr, "loadbench mock:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if v := os.Getenv(envProfileRate); v != "" {
		rate, err := strconv.Atoi(v)
		if err != nil || rate <= 0 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a positive number of bytes\n", envProfileRate, v)
			os.Exit(2)
		}
		runtime.MemProfileRate = rate // before the node allocates anything
	}
	os.Exit(m.Run())
}

// envProfileRate, set to N, samples one heap allocation per N bytes (runtime.MemProfileRate,
// default 512 KiB) for the heap profiles FATHOM_LOAD_IDLE_HEAP and FATHOM_LOAD_ACTIVE_HEAP
// write: at the default a profile of 100 MB resolves nothing under about 1 MB.
const envProfileRate = "FATHOM_LOAD_PROFILE_RATE"

// serveMock serves script on a free loopback port, prints "listening URL" on stdout and
// returns when stdin closes (the parent ended or closed it). With withTLS it serves
// HTTPS with HTTP/2 on net/http/httptest's self-signed certificate and first prints
// "cert BASE64-DER", for the parent to trust.
func serveMock(script string, withTLS bool) error {
	sc, err := mock.ParseScript([]byte(script))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the parent closes stdin to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	srv := mock.New(mock.Config{Script: sc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if withTLS {
		ts := httptest.NewUnstartedServer(srv.Handler())
		ts.EnableHTTP2 = true
		ts.StartTLS()
		defer ts.Close()
		fmt.Printf("cert %s\n", base64.StdEncoding.EncodeToString(ts.Certificate().Raw))
		fmt.Printf("listening %s\n", ts.URL)
		<-ctx.Done()
		return nil
	}
	err = srv.ListenAndServe(ctx, "127.0.0.1:0", func(addr string) { fmt.Printf("listening http://%s\n", addr) })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// startMockProcess runs the scripted model in a child process (this test binary, see
// TestMain) and returns its base URL; the process ends with the benchmark. The child's
// CPU and memory are not the node's, so the figures of the benchmark process are the
// node's own (and its clients', which are light).
//
// With httpsH2 the child serves HTTPS with HTTP/2, and this process trusts its
// certificate through SSL_CERT_FILE, which Go reads once per process, at the first TLS
// verification: every later verification in this process trusts that certificate alone.
func startMockProcess(b *testing.B, script string, proto modelProto) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), envMockScript+"="+script)
	if proto == httpsH2 {
		cmd.Env = append(cmd.Env, envMockTLS+"=1")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the mock model process: %v", err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	urls, certs := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				urls <- u
			}
			if c, ok := strings.CutPrefix(sc.Text(), "cert "); ok {
				certs <- c
			}
		}
	}()
	select {
	case u := <-urls:
		if proto == httpsH2 {
			trustCert(b, <-certs) // printed before the URL
		}
		return u
	case <-time.After(30 * time.Second):
		b.Fatal("the mock model process did not listen within 30 s")
		return ""
	}
}

// trustCert makes this process trust the certificate b64 (base64 DER) alone, through
// SSL_CERT_FILE (see startMockProcess).
func trustCert(b *testing.B, b64 string) {
	der, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		b.Fatalf("the mock model process printed a bad certificate: %v", err)
	}
	path := filepath.Join(b.TempDir(), "mock-model.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Setenv("SSL_CERT_FILE", path)
}
