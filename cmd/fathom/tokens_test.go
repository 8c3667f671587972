package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTokensCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(file, []byte("tiktoken is great!"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"tokens"}, args...), &out, &errb)
		return out.String(), errb.String(), code
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "gpt-4", file}, "6\n"},
		{[]string{file, "--encoding", "cl100k_base", "-v"}, "6 tokens (cl100k_base)\n"},
		{[]string{"--model", "gpt-4o", "-v", file}, "6 tokens (o200k_base)\n"},
		{[]string{"--model", "some-local-model", "-v", file}, "6 tokens (o200k_base)\n"}, // unknown → default encoding
	} {
		if out, errOut, code := run(tc.args...); code != 0 || out != tc.want {
			t.Errorf("tokens %v: %q %q exit %d, want %q", tc.args, out, errOut, code, tc.want)
		}
	}
	if out, errOut, code := run("--model", "claude-sonnet-4-6", file); code != 0 || out != "6\n" ||
		!strings.Contains(errOut, "estimate") || !strings.Contains(errOut, "count_tokens") {
		t.Errorf("claude count: %q %q exit %d: want the count and a note that it is an estimate", out, errOut, code)
	}
	if _, errOut, code := run("--model", "gpt-4o", file); code != 0 || strings.Contains(errOut, "estimate") {
		t.Errorf("gpt-4o count called an estimate: %q", errOut)
	}
	if _, errOut, code := run("--encoding", "nope", file); code != 2 || !strings.Contains(errOut, "unknown encoding") {
		t.Errorf("bad encoding: exit %d %q", code, errOut)
	}
	if _, _, code := run(filepath.Join(dir, "missing")); code != 1 {
		t.Errorf("missing file: exit %d", code)
	}
	if _, _, code := run(file, file); code != 2 {
		t.Errorf("two files: exit %d", code)
	}
}

// TestTokensStdin: the real binary reading standard input.
func TestTokensStdin(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fathomBin, "tokens", "--model", "gpt-4o-mini", "-")
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader("hello world")
	out, err := cmd.Output()
	if err != nil || string(out) != "2\n" {
		t.Fatalf("stdin: %q %v", out, err)
	}
}
