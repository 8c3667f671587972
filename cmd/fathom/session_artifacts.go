package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/artifact"
)

// runSessionArtifacts lists a session's artifacts from its state projection (the
// journal, or a node's gateway with --addr) and, with --out DIR, downloads their
// content from the artifact store into DIR/{type}/{filename}.
func runSessionArtifacts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("session artifacts", sessionSubcommands["artifacts"], stderr)
	var store storeFlags
	store.register(fs, ".fathom")
	var arts artifactFlags
	arts.register(fs)
	jsonOut := fs.Bool("json", false, "print one JSON object per artifact")
	out := fs.String("out", "", "download every artifact into this directory as DIR/{type}/{filename}")
	addr := fs.String("addr", os.Getenv("FATHOM_ADDR"), "read the session's state from a node's gateway (host:port or URL) instead of the journal (env FATHOM_ADDR)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token for --addr (env FATHOM_TOKEN)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("session artifacts needs exactly one session ID")
	}
	id := pos[0]
	var (
		list   []*messages.ArtifactWritten
		tenant string
	)
	if *addr != "" {
		list, err = remoteArtifacts(ctx, *addr, *token, id)
	} else {
		list, tenant, err = journalArtifacts(ctx, store, id)
	}
	if err != nil {
		return err
	}
	if *jsonOut {
		err = printArtifactsJSON(list, stdout)
	} else {
		err = printArtifacts(id, list, stdout)
	}
	if err != nil || *out == "" || len(list) == 0 {
		return err
	}
	report := stdout
	if *jsonOut {
		report = stderr // keep stdout JSON
	}
	if *addr != "" {
		return downloadArtifacts(ctx, remoteArtifactReader(*addr, *token), list, *out, report)
	}
	cfg, err := arts.config()
	if err != nil {
		return err
	}
	st, _, _, err := backends.OpenArtifacts(store.dataDir, cfg)
	if err != nil {
		return err
	}
	if st == nil {
		return usageError("--out needs the artifact store: --data-dir or --s3-endpoint")
	}
	defer st.Close()
	return downloadArtifacts(ctx, storeArtifactReader(st, tenant), list, *out, report)
}

// journalArtifacts reads session id's artifact projection and tenant (whose part of
// the artifact store holds them) from the journal.
func journalArtifacts(ctx context.Context, store storeFlags, id string) ([]*messages.ArtifactWritten, string, error) {
	j, err := openJournalReadOnly(ctx, store)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", &exitError{code: 1, msg: fmt.Sprintf("session %q not found: %v", id, err)}
	}
	if err != nil {
		return nil, "", err
	}
	defer j.Close()
	s, _, err := replay.Load(ctx, j, id, 0)
	if err != nil {
		return nil, "", err
	}
	if s.GetSeq() == 0 {
		return nil, "", &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	tenant := s.GetTenant()
	if tenant == "" {
		tenant = auth.DefaultTenant // a session from before tenancy
	}
	return s.GetArtifacts(), tenant, nil
}

// remoteArtifacts reads session id's artifact projection from its state on a node.
func remoteArtifacts(ctx context.Context, addr, token, id string) ([]*messages.ArtifactWritten, error) {
	s, err := remoteState(ctx, addr, token, id)
	if err != nil {
		return nil, err
	}
	return s.GetArtifacts(), nil
}

// remoteState reads session id's state from a node's gateway; an unknown session is
// an exit error with the node's 404.
func remoteState(ctx context.Context, addr, token, id string) (*messages.SessionState, error) {
	var buf strings.Builder
	if err := remoteGet(ctx, addr, token, "/v1/sessions/"+url.PathEscape(id)+"/state", &buf); err != nil {
		return nil, err
	}
	var resp messages.GetStateResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(buf.String()), &resp); err != nil {
		return nil, fmt.Errorf("session %s: the node's state answer does not decode: %w", id, err)
	}
	return resp.GetState(), nil
}

func printArtifacts(id string, list []*messages.ArtifactWritten, w io.Writer) error {
	if len(list) == 0 {
		_, err := fmt.Fprintf(w, "session %s has no artifacts\n", id)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tTYPE\tSIZE\tCONTENT TYPE\tSTEP\tSUB-AGENT")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", a.GetPath(), a.GetArtifactType(), a.GetSize(), a.GetContentType(),
			dashIfEmpty(a.GetStepId()), dashIfEmpty(a.GetSubAgentId()))
	}
	return tw.Flush()
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printArtifactsJSON prints one object per artifact: the artifact_written record's
// fields as events render them (proto names, numbers as numbers): path, artifact_type,
// filename, content_type, size, step_id, sub_agent_id, call_id, idempotency_key,
// sha256, overwrote.
func printArtifactsJSON(list []*messages.ArtifactWritten, w io.Writer) error {
	for _, a := range list {
		fields, err := messages.EventJSONFields(&messages.Event{Payload: &messages.Event_ArtifactWritten{ArtifactWritten: a}})
		if err != nil {
			return err
		}
		var line bytes.Buffer
		line.WriteByte('{')
		for i, k := range fields.Keys() {
			if i > 0 {
				line.WriteByte(',')
			}
			kb, err := json.Marshal(k)
			if err != nil {
				return err
			}
			line.Write(kb)
			line.WriteByte(':')
			line.Write(fields.Get(k))
		}
		line.WriteString("}\n")
		if _, err := w.Write(line.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// downloadArtifacts copies each artifact's content from st into dir/{type}/{filename}
// and checks it against the digest recorded when it was written.
// artifactReader reads an artifact's content and its sha256 from wherever it is kept.
type artifactReader func(ctx context.Context, path string) (content []byte, sha256 string, err error)

// storeArtifactReader reads tenant's artifacts from an artifact store (the data dir's,
// or S3).
func storeArtifactReader(st artifact.Store, tenant string) artifactReader {
	return func(ctx context.Context, path string) ([]byte, string, error) {
		content, info, err := st.Read(ctx, tenant, path)
		return content, info.SHA256, err
	}
}

// remoteArtifactReader reads through a node's gateway
// (GET /v1/sessions/{id}/artifacts/{type}/{filename}).
func remoteArtifactReader(addr, token string) artifactReader {
	return func(ctx context.Context, path string) ([]byte, string, error) {
		ref, err := artifact.ParsePath(path)
		if err != nil {
			return nil, "", err
		}
		var buf bytes.Buffer
		route := "/v1/sessions/" + url.PathEscape(ref.SessionID) + "/artifacts/" + url.PathEscape(ref.Type) + "/" + url.PathEscape(ref.Filename)
		if err := remoteGet(ctx, addr, token, route, &buf); err != nil {
			return nil, "", err
		}
		sum := sha256.Sum256(buf.Bytes())
		return buf.Bytes(), hex.EncodeToString(sum[:]), nil
	}
}

func downloadArtifacts(ctx context.Context, read artifactReader, list []*messages.ArtifactWritten, dir string, report io.Writer) error {
	var errs []error
	for _, a := range list {
		ref, err := artifact.ParsePath(a.GetPath()) // never trust a path to name a local file unchecked
		if err != nil {
			errs = append(errs, err)
			continue
		}
		content, sum, err := read(ctx, a.GetPath())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a.GetSha256() != "" && sum != a.GetSha256() {
			fmt.Fprintf(report, "warning: %s changed since it was recorded (sha256 %s, recorded %s)\n", a.GetPath(), sum, a.GetSha256())
		}
		target := filepath.Join(dir, ref.Type, ref.Filename)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("download artifacts: %w", err)
		}
		if err := os.WriteFile(target, content, 0o644); err != nil {
			return fmt.Errorf("download artifacts: %w", err)
		}
		fmt.Fprintf(report, "wrote %s (%d bytes)\n", target, len(content))
	}
	if err := errors.Join(errs...); err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("%d of %d artifacts not downloaded: %v", len(errs), len(list), err)}
	}
	return nil
}
