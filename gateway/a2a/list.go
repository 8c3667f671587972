package a2a

import (
	"context"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/listing"
)

// ListTasks: the caller's tasks are its sessions, as the gateway's session index lists
// them for its principal (GET /v1/sessions's scope: only the caller's tenant, and only
// its own sessions where members read their own). The index is read in pages, newest
// first, and filtered here; a listing reads at most maxListScan sessions.

// Bounds of ListTasks (A2A §3.1.4).
const (
	// DefaultPageSize is the page size of a ListTasks without pageSize.
	DefaultPageSize = 50
	// MaxPageSize is the largest pageSize.
	MaxPageSize = 100
	// maxListScan bounds the sessions one ListTasks reads from the index: a caller with
	// more sees its newest maxListScan (GET /v1/sessions lists them all).
	maxListScan = 10000
)

// ListTasksRequest is the params of ListTasks.
type ListTasksRequest struct {
	Tenant               string `json:"tenant,omitempty"`
	ContextID            string `json:"contextId,omitempty"`
	Status               string `json:"status,omitempty"`
	PageSize             *int32 `json:"pageSize,omitempty"`
	PageToken            string `json:"pageToken,omitempty"`
	HistoryLength        *int32 `json:"historyLength,omitempty"`
	StatusTimestampAfter string `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     bool   `json:"includeArtifacts,omitempty"`
}

// ListTasksResponse is the result of ListTasks. NextPageToken is always present ("" on
// the last page).
type ListTasksResponse struct {
	Tasks         []*Task `json:"tasks"`
	NextPageToken string  `json:"nextPageToken"`
	PageSize      int32   `json:"pageSize"`
	TotalSize     int32   `json:"totalSize"`
}

// indexStatuses are the session index's statuses of each task state.
var indexStatuses = map[string][]string{
	StateWorking:       {"running", "interrupted"},
	StateInputRequired: {"awaiting_human"},
	StateCompleted:     {"completed"},
	StateFailed:        {"failed"},
	StateCanceled:      {"cancelled"},
	StateSubmitted:     nil, StateRejected: nil, "TASK_STATE_AUTH_REQUIRED": nil,
}

// indexState is the task state of a session index status.
func indexState(status string) string {
	for state, ss := range indexStatuses {
		for _, s := range ss {
			if s == status {
				return state
			}
		}
	}
	return StateWorking
}

// checkList validates p and fills its defaults; it returns the statusTimestampAfter
// time (zero: none).
func checkList(p *ListTasksRequest) (time.Time, *rpcError) {
	if p.PageSize == nil {
		n := int32(DefaultPageSize)
		p.PageSize = &n
	}
	if n := *p.PageSize; n < 1 || n > MaxPageSize {
		return time.Time{}, rpcErr(CodeInvalidParams, "pageSize must be 1 to %d, got %d", MaxPageSize, n)
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return time.Time{}, rpcErr(CodeInvalidParams, "historyLength must be 0 or more")
	}
	if p.Status == "TASK_STATE_UNSPECIFIED" {
		p.Status = ""
	}
	if _, ok := indexStatuses[p.Status]; p.Status != "" && !ok {
		return time.Time{}, rpcErr(CodeInvalidParams, "status %q is not a task state (TASK_STATE_WORKING, TASK_STATE_COMPLETED, ...)", truncate(p.Status, 40))
	}
	var after time.Time
	if p.StatusTimestampAfter != "" {
		t, err := time.Parse(time.RFC3339Nano, p.StatusTimestampAfter)
		if err != nil {
			return time.Time{}, rpcErr(CodeInvalidParams, "statusTimestampAfter must be an RFC 3339 time (2026-10-27T10:00:00Z): %q", truncate(p.StatusTimestampAfter, 40))
		}
		after = t
	}
	if p.PageToken != "" {
		if _, _, ok := listing.DecodeCursor(pageTokens, p.PageToken); !ok {
			return time.Time{}, rpcErr(CodeInvalidParams, "pageToken is not one ListTasks returned: %q", truncate(p.PageToken, 40))
		}
	}
	return after, nil
}

// listTasks is ListTasks: the caller's sessions the filters select, newest first (by
// creation: the session index's order), a page of them from pageToken on. Each task is
// its index row (id, state, the time of its last event); with historyLength > 0 or
// includeArtifacts it is read in full, as GetTask reads it.
func (s *Server) listTasks(ctx context.Context, p *ListTasksRequest) (*ListTasksResponse, error) {
	after, e := checkList(p)
	if e != nil {
		return nil, e
	}
	matches, err := s.scan(ctx, p, after)
	if err != nil {
		return nil, err
	}
	out := &ListTasksResponse{Tasks: []*Task{}, PageSize: *p.PageSize, TotalSize: int32(len(matches))}
	start := 0
	if p.PageToken != "" {
		at, id, _ := listing.DecodeCursor(pageTokens, p.PageToken)
		for start < len(matches) && !listing.Follows(matches[start], at, id) {
			start++
		}
	}
	end := min(start+int(*p.PageSize), len(matches))
	for _, m := range matches[start:end] {
		t, err := s.listed(ctx, m, p)
		if err != nil {
			return nil, err
		}
		out.Tasks = append(out.Tasks, t)
	}
	if end < len(matches) {
		out.NextPageToken = listing.EncodeCursor(pageTokens, matches[end-1])
	}
	return out, nil
}

// scan reads the caller's sessions the filters of p select from the session index, in
// its order, at most maxListScan of them read.
func (s *Server) scan(ctx context.Context, p *ListTasksRequest, after time.Time) ([]gateway.SessionSummary, error) {
	statuses := indexStatuses[p.Status]
	if p.Status != "" && len(statuses) == 0 {
		return nil, nil // a state no session is in (submitted, rejected, auth-required)
	}
	q := gateway.ListQuery{Limit: listing.MaxLimit}
	if len(statuses) == 1 {
		q.Status = statuses[0]
	}
	var out []gateway.SessionSummary
	for read := 0; read < maxListScan; {
		page, err := s.gw.List(ctx, q)
		if err != nil {
			return nil, fromGateway(err, "")
		}
		for _, m := range page.Sessions {
			if (p.ContextID == "" || m.SessionID == p.ContextID) && (p.Status == "" || indexState(m.Status) == p.Status) &&
				(after.IsZero() || !m.UpdatedAt.Before(after)) {
				out = append(out, m)
			}
		}
		read += len(page.Sessions)
		if page.NextCursor == "" {
			break
		}
		if err := listing.SetCursor(&q, page.NextCursor); err != nil {
			return nil, rpcErr(CodeInternalError, "continue the session listing: %v", err)
		}
	}
	return out, nil
}

// listed is session m as a task of ListTasks.
func (s *Server) listed(ctx context.Context, m gateway.SessionSummary, p *ListTasksRequest) (*Task, error) {
	if p.IncludeArtifacts || p.HistoryLength != nil && *p.HistoryLength > 0 {
		t, _, err := s.task(ctx, m.SessionID, p.HistoryLength)
		if err != nil {
			return nil, err
		}
		if !p.IncludeArtifacts {
			t.Artifacts = nil
		} else if t.Artifacts == nil {
			t.Artifacts = []Artifact{}
		}
		return t, nil
	}
	t := &Task{ID: m.SessionID, ContextID: m.SessionID, Status: TaskStatus{State: indexState(m.Status)},
		Metadata: map[string]any{"fathom": map[string]any{"seq": m.Seq}}}
	if !m.UpdatedAt.IsZero() {
		t.Status.Timestamp = m.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	return t, nil
}

// pageTokens is the cursor namespace of ListTasks' page tokens: a page token is
// internal/listing's cursor of the last task of a page, in a namespace of its own (a
// GET /v1/sessions cursor is not a page token, nor the other way round).
const pageTokens = "t1"
