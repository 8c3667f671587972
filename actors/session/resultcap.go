package session

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/tools"
)

// resultStoreTimeout bounds the write of one oversized result to the artifact store.
const resultStoreTimeout = 30 * time.Second

// resultContentType is the content type of a stored result: tools answer in text.
const resultContentType = "text/plain; charset=utf-8"

// capResult keeps a tool call's result under the node's cap (Config.MaxToolResult).
// Every tool call passes here — built-in and sandbox tools, MCP tools, the program's own
// Go tools — before its result is decided into a tool_result event. A larger result is
// stored whole, as the model would have read it, as the session's artifact
// results/{call_id} (recorded by an artifact_written event before the tool_result); the
// model reads its head and tail around a note with the artifact's path and the full
// size, and can read the rest with read_artifact. Without an artifact store, or when the
// store refuses it (over its size limit), the note says the full result was not kept.
func capResult(ctx context.Context, d *Deps, sessionID, callID string, res tools.Result) tools.Result {
	max := d.Config.MaxToolResult()
	if core.ToolResultBytes(res) <= max {
		return res
	}
	full := res.Content()
	if d.Artifacts == nil {
		return core.TruncateToolResult(res, max, fmt.Sprintf("%d bytes; the full result was not kept (this node has no artifact store)", len(full)))
	}
	ref := artifact.Ref{Tenant: auth.TenantOf(ctx), SessionID: sessionID, Type: artifact.TypeResults, Filename: resultFilename(callID)}
	wctx, cancel := context.WithTimeout(ctx, resultStoreTimeout)
	defer cancel()
	info, err := d.Artifacts.Write(wctx, ref, []byte(full), resultContentType)
	if err != nil {
		d.Logger.Warn("tool result over the cap could not be stored", "session_id", sessionID, "call_id", callID, "bytes", len(full), "error", err)
		return core.TruncateToolResult(res, max, fmt.Sprintf("%d bytes; the full result could not be stored: %v", len(full), err))
	}
	res.Artifacts = append(res.Artifacts, tools.Artifact{
		Path: info.Path, Type: info.Type, Filename: info.Filename, ContentType: info.ContentType,
		Size: info.Size, SHA256: info.SHA256, Overwrote: info.Overwrote,
	})
	return core.TruncateToolResult(res, max, fmt.Sprintf("%d bytes; full result stored as artifact %s (read it with read_artifact)", len(full), info.Path))
}

// resultFilename is the artifact filename of call callID's result: the id, with what a
// filename may not hold (artifact.ValidateFilename) replaced by "_".
func resultFilename(callID string) string {
	var b strings.Builder
	for i, r := range callID {
		switch {
		case r == '/' || r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || (i == 0 && r == '.'):
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
		if b.Len() >= artifact.MaxNameBytes-4 {
			break
		}
	}
	if b.Len() == 0 {
		return "call"
	}
	return b.String()
}
