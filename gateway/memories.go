package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/internal/errcode"
)

// MaxMemoryLimit bounds the limit of GET /v1/memories (persistence/ltm.MaxSearch).
const MaxMemoryLimit = 1000

// Memories serves /v1/memories: the long-term memory of the node's users
// (internal/node.Node implements it). Every call acts for the ctx's principal: a user
// of its tenant, the principal's own unless it is an admin or operator (errors wrap
// errcode.ErrMemoryPermission); a node without long-term memory answers
// errcode.ErrNoLongTermMemory.
type Memories interface {
	// ListMemories returns user's newest memories, at most limit.
	ListMemories(ctx context.Context, user string, limit int) ([]Memory, error)
	// SearchMemories ranks user's memories for query (the newest for ""), at most
	// limit, each with its Score.
	SearchMemories(ctx context.Context, user, query string, limit int) ([]Memory, error)
	// GetMemory returns user's memory id (wrapping errcode.ErrMemoryNotFound when there
	// is none).
	GetMemory(ctx context.Context, user, id string) (Memory, error)
	// EditMemory replaces the fields of e that are set and returns the memory.
	EditMemory(ctx context.Context, user, id string, e MemoryEdit) (Memory, error)
	// DeleteMemory deletes user's memory id.
	DeleteMemory(ctx context.Context, user, id string) error
	// DeleteUserMemories deletes every memory of user and returns how many.
	DeleteUserMemories(ctx context.Context, user string) (int, error)
}

// MemoryEdit is the body of PATCH /v1/memories/{id}: the fields given replace the
// memory's.
type MemoryEdit struct {
	// Text replaces the text (and its embedding).
	Text *string `json:"text,omitempty"`
	// Metadata replaces the metadata.
	Metadata map[string]string `json:"metadata,omitempty"`
	// ExpiresAt replaces the expiry: an RFC 3339 time, or "" for never.
	ExpiresAt *string `json:"expires_at,omitempty"`
}

// Memory is a memory as /v1/memories answers it.
type Memory struct {
	ID        string            `json:"id"`
	Tenant    string            `json:"tenant"`
	User      string            `json:"user"`
	Agent     string            `json:"agent,omitempty"`
	Text      string            `json:"text"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	SessionID string            `json:"session_id,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	// Score is a search hit's rank score (absent in lists).
	Score *float32 `json:"score,omitempty"`
}

// MemoryList is the body of GET /v1/memories.
type MemoryList struct {
	Memories []Memory `json:"memories"`
}

// DeletedMemories is the body of DELETE /v1/memories and /v1/memories/{id}.
type DeletedMemories struct {
	User    string `json:"user"`
	ID      string `json:"id,omitempty"`
	Deleted int    `json:"deleted"`
}

// memoryRoutes registers /v1/memories.
func (h *Handler) memoryRoutes() {
	h.handle("GET /v1/memories", h.require(ScopeRead, h.listMemories))
	h.handle("DELETE /v1/memories", h.require(ScopeWrite, h.deleteUserMemories))
	h.handle("GET /v1/memories/{id}", h.require(ScopeRead, h.getMemory))
	h.handle("PATCH /v1/memories/{id}", h.require(ScopeWrite, h.editMemory))
	h.handle("DELETE /v1/memories/{id}", h.require(ScopeWrite, h.deleteMemory))
}

// memoryError answers a Memories error.
func memoryError(w http.ResponseWriter, err error) {
	switch errcode.Of(err) {
	case CodeNotFound:
		writeError(w, errorf(CodeNotFound, "memory not found"))
	case CodeInvalidArgument:
		writeError(w, errorf(CodeInvalidArgument, "%v", err))
	case CodePermissionDenied:
		writeError(w, errorf(CodePermissionDenied, "%v", err))
	case CodeUnsupported:
		writeError(w, errorf(CodeUnsupported, "%v", err))
	case CodeTimeout:
		writeError(w, hidden(CodeTimeout, msgTimeout, err))
	default:
		writeError(w, hidden(CodeUnavailable, "the memory store could not serve the request; retry", err))
	}
}

// memoryCtx checks the gateway serves memories and bounds the call.
func (h *Handler) memoryCtx(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	if h.cfg.Memories == nil {
		writeError(w, errorf(CodeUnsupported, "%v", errcode.ErrNoLongTermMemory))
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	return ctx, cancel, true
}

// listMemories serves GET /v1/memories?user=&q=&limit=: the user's newest memories,
// or with q (even empty) a hybrid search.
func (h *Handler) listMemories(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := h.memoryCtx(w, r)
	if !ok {
		return
	}
	defer cancel()
	qs := r.URL.Query()
	limit := 20
	if s := qs.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxMemoryLimit {
			writeError(w, errorf(CodeInvalidArgument, "limit must be 1..%d", MaxMemoryLimit))
			return
		}
		limit = n
	}
	user := qs.Get("user")
	out := MemoryList{Memories: []Memory{}}
	if qs.Has("q") {
		hits, err := h.cfg.Memories.SearchMemories(ctx, user, qs.Get("q"), limit)
		if err != nil {
			memoryError(w, err)
			return
		}
		out.Memories = append(out.Memories, hits...)
	} else {
		items, err := h.cfg.Memories.ListMemories(ctx, user, limit)
		if err != nil {
			memoryError(w, err)
			return
		}
		out.Memories = append(out.Memories, items...)
	}
	writeJSON(w, http.StatusOK, out)
}

// getMemory serves GET /v1/memories/{id}?user=.
func (h *Handler) getMemory(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := h.memoryCtx(w, r)
	if !ok {
		return
	}
	defer cancel()
	it, err := h.cfg.Memories.GetMemory(ctx, r.URL.Query().Get("user"), r.PathValue("id"))
	if err != nil {
		memoryError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// editMemory serves PATCH /v1/memories/{id}?user=.
func (h *Handler) editMemory(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := h.memoryCtx(w, r)
	if !ok {
		return
	}
	defer cancel()
	var e MemoryEdit
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		writeError(w, errorf(CodeInvalidArgument, "the body must be a JSON object with text, metadata or expires_at: %v", err))
		return
	}
	if e.ExpiresAt != nil && *e.ExpiresAt != "" {
		if _, err := time.Parse(time.RFC3339, *e.ExpiresAt); err != nil {
			writeError(w, errorf(CodeInvalidArgument, "expires_at must be an RFC 3339 time or \"\" (never): %v", err))
			return
		}
	}
	it, err := h.cfg.Memories.EditMemory(ctx, r.URL.Query().Get("user"), r.PathValue("id"), e)
	if err != nil {
		memoryError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// deleteMemory serves DELETE /v1/memories/{id}?user=.
func (h *Handler) deleteMemory(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := h.memoryCtx(w, r)
	if !ok {
		return
	}
	defer cancel()
	user, id := r.URL.Query().Get("user"), r.PathValue("id")
	if err := h.cfg.Memories.DeleteMemory(ctx, user, id); err != nil {
		memoryError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, DeletedMemories{User: user, ID: id, Deleted: 1})
}

// deleteUserMemories serves DELETE /v1/memories?user=: every memory of the user (a
// user's deletion). The user must be named: a delete of everything is never implied.
func (h *Handler) deleteUserMemories(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := h.memoryCtx(w, r)
	if !ok {
		return
	}
	defer cancel()
	user := r.URL.Query().Get("user")
	if user == "" {
		writeError(w, errorf(CodeInvalidArgument, "name the user whose memories to delete: ?user="))
		return
	}
	n, err := h.cfg.Memories.DeleteUserMemories(ctx, user)
	if err != nil {
		memoryError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, DeletedMemories{User: user, Deleted: n})
}

// ParseMemoryExpiry reads a MemoryEdit's expires_at: the time, or the zero time for ""
// (never).
func ParseMemoryExpiry(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: expires_at: %v", errcode.ErrInvalidMemory, err)
	}
	return t, nil
}
