// Package artifact is the workspace of deep agents: files a session's agents write
// (research notes, code, drafts, data, logs) and later refer to by path instead of
// carrying their contents in the model's context.
//
// # Paths
//
// Every artifact lives at "{session_id}/{type}/{filename}" where type is one of
// research, code, drafts, data, logs (and results, stored by the node), within the
// tenant of its session: stores keep it at "tenants/{tenant}/{session_id}/{type}/{filename}"
// (Ref.Key), so the same path under another tenant is another artifact. ParsePath and Ref.Validate enforce the rules every
// Store applies and the artifact tools check first: no absolute paths, no backslashes,
// no ".." (traversal), no empty, "." or hidden (leading ".") names, no control
// characters, names of at most 255 bytes, no directories inside a type (a filename is
// one segment) and only the five types. Content is limited to 10 MiB by default
// (configurable per store); CheckSize reports the excess.
//
// # Stores
//
// [Store] is the interface (ctx in, errors out, sentinel errors for errors.Is).
// Implementations live in subpackages and pass one conformance suite
// (persistence/artifact/artifacttest):
//
//   - persistence/artifact/local: a directory (the embedded default, DATA_DIR/artifacts),
//     atomic writes by rename, metadata in JSON sidecars.
//   - persistence/artifact/s3: an S3-compatible bucket through minio-go (MinIO in tests),
//     the bucket created on first use.
//
// # Example
//
//	s, err := local.Open(filepath.Join(dataDir, "artifacts"), local.DefaultConfig())
//	if err != nil { ... }
//	defer s.Close()
//	ref := artifact.Ref{Tenant: "acme", SessionID: "s-1", Type: artifact.TypeResearch, Filename: "notes.md"}
//	info, err := s.Write(ctx, ref, []byte("# Notes"), "text/markdown")
//	if errors.Is(err, artifact.ErrTooLarge) { ... }
//	content, info, err := s.Read(ctx, "acme", info.Path)
//	if errors.Is(err, artifact.ErrNotFound) { ... }
package artifact
