package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNodeServesPprofBehindTheFlag: with --pprof the metrics listener serves the Go
// profiles under /debug/pprof/ (the index, a named profile); without it they are 404
// there, and /metrics is served either way.
func TestNodeServesPprofBehindTheFlag(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		args := []string{"--data-dir", t.TempDir(), "--metrics-listen", addr}
		if on {
			args = append(args, "--pprof")
		}
		p := startNode(t, cleanEnv(), args...)
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		for path, mark := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/heap?debug=1": "heap profile"} {
			code, body := get(t, "http://"+addr+path)
			if code != want || on && !strings.Contains(body, mark) {
				t.Errorf("pprof %v: GET %s = %d, want %d (%.200s)", on, path, code, want, body)
			}
		}
		if code, _ := get(t, "http://"+addr+"/metrics"); code != http.StatusOK {
			t.Errorf("pprof %v: GET /metrics = %d", on, code)
		}
		p.stop(t)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
