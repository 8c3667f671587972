package main

import (
	"strings"
	"testing"
)

// TestBadModelURLNamesTheAPIsVariable: a base URL that is not http(s) is refused naming
// the variable the chosen model API reads it from (its backend's descriptor).
func TestBadModelURLNamesTheAPIsVariable(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"OPENAI_BASE_URL=ftp://models", "OPENAI_API_KEY=k"}, []string{"run", "--data-dir", dir, "goal"}, `OPENAI_BASE_URL="ftp://models" is not an http(s) URL`},
		{[]string{"ANTHROPIC_BASE_URL=ftp://models", "ANTHROPIC_API_KEY=k"}, []string{"run", "--data-dir", dir, "--llm-api", "anthropic", "goal"}, `ANTHROPIC_BASE_URL="ftp://models" is not an http(s) URL`},
	} {
		r := fathom(t, cleanEnv(c.env...), c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("exit %d (want 2), stderr does not say %q:\n%s", r.code, c.want, r.stderr)
		}
	}
}
