package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArtifactStoreByName: --artifact-store (env FATHOM_ARTIFACT_STORE) chooses the
// artifact store by name: an unknown name is refused with the valid ones, s3 without an
// endpoint is refused, and filesystem keeps the artifacts in the data dir even when an S3
// endpoint is configured (the default would choose S3).
func TestArtifactStoreByName(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"flag", nil, []string{"run", "--data-dir", dir, "--artifact-store", "nfs", "goal"}, `bad --artifact-store "nfs": want filesystem or s3`},
		{"env", []string{"FATHOM_ARTIFACT_STORE=nfs"}, []string{"run", "--data-dir", dir, "goal"}, `bad --artifact-store "nfs": want filesystem or s3`},
		{"s3 without endpoint", nil, []string{"run", "--data-dir", dir, "--artifact-store", "s3", "goal"}, "--artifact-store: the s3 artifact store needs an endpoint (--s3-endpoint, env FATHOM_S3_ENDPOINT)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fathom(t, cleanEnv(c.env...), c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d (want 2), stderr does not say %q:\n%s", r.code, c.want, r.stderr)
			}
		})
	}

	data := filepath.Join(dir, "data")
	// Nothing listens on the endpoint: an S3 store would fail the start.
	r := fathom(t, cleanEnv("FATHOM_ARTIFACT_STORE=filesystem"), "run", "--data-dir", data, "--s3-endpoint", "127.0.0.1:"+freePort(t), "--json", "Write a haiku about event sourcing")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkCompletedRun(t, jsonEvents(t, r.stdout))
	entries, err := os.ReadDir(filepath.Join(data, "artifacts"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("no artifacts in the data dir (%d entries): %v", len(entries), err)
	}
}
