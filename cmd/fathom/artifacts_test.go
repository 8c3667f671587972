package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/internal/testissuer"
	"github.com/fathom-agents/fathom/llm/mock"
)

// findings is what the scripted model saves as an artifact.
const findings = "# Findings\n\nVirtual actors are activated on demand and never explicitly created.\n"

// artifactModel serves a script whose plan has one custom step in which the model first
// tries to write ../../etc/passwd, reads the validation error, then saves its findings
// with write_artifact and answers, if its system prompt lists the artifact's path. It
// returns the model's base URL.
func artifactModel(t *testing.T) string {
	t.Helper()
	call := func(filename string) mock.ToolCallRule {
		args, err := json.Marshal(map[string]string{"type": "research", "filename": filename, "content": findings})
		if err != nil {
			t.Fatal(err)
		}
		return mock.ToolCallRule{Name: "write_artifact", Arguments: string(args)}
	}
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"w","type":"custom","description":"write down the findings"}]}`},
		// The context lists the workspace by path (not content) once the artifact exists.
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*Artifacts in the workspace[\s\S]*/research/findings\.md \(text/markdown`, ToolMatch: "Saved artifact",
			Response: "The findings are saved in the workspace."},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: "Saved artifact", Response: "the workspace is not in my context"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: "Error type: validation", ToolCalls: []mock.ToolCallRule{call("findings.md")}},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{call("../../etc/passwd")}},
	}, Default: "ok"}
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, fathomBin, "mock-llm", "--listen", "127.0.0.1:0", "--script", path)
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	return waitLine(t, out, regexp.MustCompile(`(http://\S+/v1)`))
}

// runArtifactSession runs the scripted session and checks its events: the rejected
// traversal, then one artifact_written before the successful call's tool_result. It
// returns the session id.
func runArtifactSession(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := fathom(t, env, append(append([]string{"run"}, args...), "--json", "Research virtual actors")...)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := jsonEvents(t, r.stdout)
	id := checkCompletedRun(t, evs)
	var written []map[string]any
	var results []map[string]any
	writtenAt := -1
	for i, ev := range evs {
		switch ev["type"] {
		case "artifact_written":
			written = append(written, ev)
			writtenAt = i
		case "tool_result":
			results = append(results, ev)
			if len(results) == 2 && writtenAt != i-1 {
				t.Fatalf("artifact_written (at %d) does not come right before its tool_result (at %d)", writtenAt, i)
			}
		}
	}
	if len(results) != 2 || len(written) != 1 {
		t.Fatalf("%d tool results, %d artifact_written:\n%s", len(results), len(written), r.stdout)
	}
	rejected := fmt.Sprint(results[0]["error"])
	if !strings.Contains(rejected, "validation") || !strings.Contains(rejected, "path traversal is not allowed") {
		t.Fatalf("the traversal attempt was not a validation error: %s", rejected)
	}
	sum := sha256.Sum256([]byte(findings))
	a := written[0]
	want := map[string]any{
		"path": id + "/research/findings.md", "artifact_type": "research", "filename": "findings.md",
		"content_type": "text/markdown; charset=utf-8", "size": float64(len(findings)), "step_id": "w",
		"sha256": hex.EncodeToString(sum[:]), "call_id": results[1]["call_id"],
	}
	for k, v := range want {
		if a[k] != v {
			t.Fatalf("artifact_written %s = %v, want %v\n%v", k, a[k], v, a)
		}
	}
	if !strings.Contains(fmt.Sprint(results[1]["result"]), "Saved artifact "+id+"/research/findings.md") {
		t.Fatalf("write_artifact result %v", results[1]["result"])
	}
	for _, ev := range evs {
		if ev["type"] == "step_completed" && ev["output"] != "The findings are saved in the workspace." {
			t.Fatalf("the last step call's context did not list the artifact: step output %q", ev["output"])
		}
	}
	return id
}

// checkArtifactsCommand checks `fathom session artifacts` (text, --json, --out) with
// the given source flags (a data dir, or a node's --addr).
func checkArtifactsCommand(t *testing.T, id string, flags ...string) {
	t.Helper()
	path := id + "/research/findings.md"
	sa := func(extra ...string) result {
		t.Helper()
		r := fathom(t, cleanEnv(), append(append(append([]string{"session", "artifacts"}, flags...), extra...), id)...)
		if r.code != 0 {
			t.Fatalf("session artifacts %v: exit %d\n%s\n%s", extra, r.code, r.stdout, r.stderr)
		}
		return r
	}
	text := sa().stdout
	for _, want := range []string{"PATH", path, "research", fmt.Sprint(len(findings)), "text/markdown", " w "} {
		if !strings.Contains(text, want) {
			t.Fatalf("session artifacts lacks %q:\n%s", want, text)
		}
	}
	lines := strings.Split(strings.TrimSpace(sa("--json").stdout), "\n")
	var a map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &a) != nil || a["path"] != path || a["step_id"] != "w" || a["artifact_type"] != "research" || a["size"] != float64(len(findings)) {
		t.Fatalf("--json: %q", lines)
	}
	out := t.TempDir()
	if r := sa("--out", out); !strings.Contains(r.stdout, "wrote "+filepath.Join(out, "research", "findings.md")) {
		t.Fatalf("--out did not report the file:\n%s", r.stdout)
	}
	b, err := os.ReadFile(filepath.Join(out, "research", "findings.md"))
	if err != nil || string(b) != findings {
		t.Fatalf("downloaded %q (%v)", b, err)
	}
}

// TestArtifactsEndToEnd: in a session the model writes an artifact (after a rejected
// traversal attempt); the journal records artifact_written, the state projects it, the
// file is in DATA_DIR/artifacts, and `fathom session artifacts` lists and downloads it,
// from the journal and through a node's gateway.
func TestArtifactsEndToEnd(t *testing.T) {
	t.Parallel()
	base := artifactModel(t)
	data := filepath.Join(t.TempDir(), "data")
	id := runArtifactSession(t, cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k"), "--data-dir", data)

	st := fathom(t, cleanEnv(), "session", "state", "--data-dir", data, id)
	var state struct {
		Artifacts []map[string]any `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &state); err != nil || len(state.Artifacts) != 1 || state.Artifacts[0]["path"] != id+"/research/findings.md" {
		t.Fatalf("state.artifacts (exit %d, %v): %s", st.code, err, st.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(data, "artifacts", "tenants", "default", id, "research", "findings.md")); err != nil || string(b) != findings {
		t.Fatalf("the local store holds %q (%v)", b, err)
	}
	checkArtifactsCommand(t, id, "--data-dir", data)

	// Unknown sessions and sessions without artifacts.
	if r := fathom(t, cleanEnv(), "session", "artifacts", "--data-dir", data, "no-such-session"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("unknown session: exit %d %s", r.code, r.stderr)
	}

	// Through a node's gateway: the list and the content (GET /v1/sessions/{id}/artifacts/
	// {type}/{filename}); the command's own data dir is empty, so nothing is read locally.
	const tok = "artifacts-token"
	p := startNode(t, cleanEnv(), "--data-dir", data, "--token", tok)
	checkArtifactsCommand(t, id, "--addr", p.url, "--token", tok, "--data-dir", t.TempDir())
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", p.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, hdr := get("/v1/sessions/" + id + "/artifacts/research/findings.md")
	sum := sha256.Sum256([]byte(findings))
	if code != 200 || body != findings || hdr.Get("ETag") != `"`+hex.EncodeToString(sum[:])+`"` || hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET the artifact: %d %q %v", code, body, hdr)
	}
	if code, body, _ := get("/v1/sessions/" + id + "/artifacts/research/nope.md"); code != 404 || !strings.Contains(body, "not_found") {
		t.Fatalf("GET a missing artifact: %d %s", code, body)
	}
	if code, body, _ := get("/v1/sessions/" + id + "/artifacts/bogus-type/x.md"); code != 400 {
		t.Fatalf("GET an artifact of an invalid type: %d %s", code, body)
	}
}

// TestArtifactsKeyedByTenant: a session's artifacts are stored under its tenant's
// prefix of the artifact directory (DATA_DIR/artifacts/tenants/{tenant}/...), and the
// gateway serves a session's artifacts from its tenant's keys only: a file of the same
// session id and path under another tenant's prefix is not the session's. An artifact
// stored before tenancy (no prefix) is still served for its session, and a delete of
// the session removes its files, those from before tenancy too, and nothing of the
// other tenant's.
func TestArtifactsKeyedByTenant(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	data := t.TempDir()
	n := startNode(t, cleanEnv(), "--data-dir", data, "--oidc-issuer", iss.URL(), "--oidc-audience", testissuer.DefaultAudience)
	alice := iss.Sign(t, iss.Claims("alice", "acme"))
	const id = "shared-1"
	if st, out := httpJSON(t, "POST", n.url+"/v1/sessions", alice, map[string]any{"session_id": id, "goal": "Write a haiku about tenants"}); st != 201 {
		t.Fatalf("alice starts %s: %d %v", id, st, out)
	}
	awaitStatus(t, n, alice, id, "SESSION_STATUS_COMPLETED")
	written := snapshotSession(t, n, alice, id).artifact
	if written == "" {
		t.Fatalf("%s wrote no artifact (the demo model writes one)", id)
	}
	arts := filepath.Join(data, "artifacts")
	if _, err := os.Stat(filepath.Join(arts, "tenants", "acme", filepath.FromSlash(written))); err != nil {
		t.Fatalf("acme's artifact %s is not under tenants/acme: %v", written, err)
	}
	if _, err := os.Stat(filepath.Join(arts, id)); !os.IsNotExist(err) {
		t.Fatalf("acme's session has a directory outside its tenant's prefix: %v", err)
	}
	plant := func(rel, content string) string {
		p := filepath.Join(arts, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		return p
	}
	get := func(rel string) (int, string) {
		st, b := rawHTTP(t, "GET", n.url+"/v1/sessions/"+id+"/artifacts/"+rel, alice, "")
		return st, string(b)
	}
	globex := plant("tenants/globex/"+id+"/research/planted.md", "globex's file")
	if st, body := get("research/planted.md"); st != 404 {
		t.Fatalf("another tenant's key of the session's id and path served: %d %s", st, body)
	}
	legacy := plant(id+"/research/old.md", "stored before tenancy")
	if st, body := get("research/old.md"); st != 200 || body != "stored before tenancy" {
		t.Fatalf("an artifact from before tenancy: %d %s", st, body)
	}
	if st, out := httpJSON(t, "DELETE", n.url+"/v1/sessions/"+id, alice, nil); st != 200 {
		t.Fatalf("alice deletes %s: %d %v", id, st, out)
	}
	for _, gone := range []string{filepath.Join(arts, "tenants", "acme", id), legacy} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is left after the session's delete (%v)", gone, err)
		}
	}
	if _, err := os.Stat(globex); err != nil {
		t.Errorf("the delete of acme's session removed another tenant's file: %v", err)
	}
}

// TestArtifactsOnS3: the same session with the artifact store in MinIO, configured by
// the FATHOM_S3_* environment; the data dir holds no artifact.
func TestArtifactsOnS3(t *testing.T) {
	t.Parallel()
	m := testenv.MinIOServer(t)
	base := artifactModel(t)
	data := filepath.Join(t.TempDir(), "data")
	bucket := fmt.Sprintf("e2e-%d", os.Getpid())
	s3env := []string{"FATHOM_S3_ENDPOINT=" + m.Endpoint, "FATHOM_S3_BUCKET=" + bucket, "FATHOM_S3_ACCESS_KEY=" + m.AccessKey, "FATHOM_S3_SECRET_KEY=" + m.SecretKey}
	id := runArtifactSession(t, cleanEnv(append(s3env, "OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k")...), "--data-dir", data)
	if _, err := os.Stat(filepath.Join(data, "artifacts", "tenants")); !os.IsNotExist(err) {
		t.Fatalf("the artifact went to the data dir, not S3 (%v)", err)
	}
	out := t.TempDir()
	r := fathom(t, cleanEnv(s3env...), "session", "artifacts", "--data-dir", data, "--out", out, id)
	if r.code != 0 {
		t.Fatalf("session artifacts --out from S3: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "research", "findings.md")); err != nil || string(b) != findings {
		t.Fatalf("downloaded %q (%v)", b, err)
	}
	// The secret is never printed, not even by -h.
	h := fathom(t, cleanEnv(s3env...), "run", "-h")
	if strings.Contains(h.stdout+h.stderr, m.SecretKey) || !strings.Contains(h.stderr, "s3-secret-key") {
		t.Fatalf("run -h shows the S3 secret or lacks the flag:\n%s", h.stderr)
	}
}
