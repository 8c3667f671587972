package fathom_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmbolt"
)

// rememberModel plans one step, which saves what follows "REMEMBER " in the goal with
// the remember tool and then answers "noted".
const rememberModel = `{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"note it\"}]}"},
 {"system_match":"FATHOM-ROLE: executor","tool_match":".","response":"noted"},
 {"system_match":"FATHOM-ROLE: executor","match":"REMEMBER","tool_calls":[{"name":"remember","arguments":"{\"text\":{{json (find \"REMEMBER (.*)\" .Goal)}}}"}]}
]}`

// TestGoAPIMemories: a session's remember is a memory of its user that ListMemories,
// SearchMemories and GetMemory return (never to another user, nor to a member of
// another tenant), and a memory_saved of the session: time travel shows it after the
// step that saved it and not before; forks, whether they copy the save or run the step
// again, add no copy; UpdateMemory edits, DeleteMemory and DeleteUserMemories delete;
// a node without long-term memory answers ErrNoLongTermMemory.
func TestGoAPIMemories(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: rememberModel, Edit: func(c *fathom.Config) { c.Memory.LongTerm = true }})
	alice := auth.WithPrincipal(ctx, auth.Principal{Subject: "alice", Tenant: "acme"})
	id, err := n.StartSession(alice, fathom.SessionRequest{ID: "mem-1", Goal: "REMEMBER The CI cache lives at /var/cache/ci-77", UserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	if ms := st.GetMemories(); len(ms) != 1 || ms[0].GetText() != "The CI cache lives at /var/cache/ci-77" || ms[0].GetTenant() != "acme" || ms[0].GetUserId() != "alice" {
		t.Fatalf("the state's memories: %v", ms)
	}
	memID := st.GetMemories()[0].GetMemoryId()
	for step, want := range map[uint32]int{0: 0, 1: 1} {
		past, err := n.StateAt(alice, id, fathom.At{StepIndex: step})
		if err != nil || len(past.GetState().GetMemories()) != want {
			t.Fatalf("state at step %d: %d memories (%v), want %d", step, len(past.GetState().GetMemories()), err, want)
		}
	}

	items, err := n.ListMemories(alice, "", 10)
	if err != nil || len(items) != 1 || items[0].ID != memID || items[0].SessionID != id {
		t.Fatalf("alice's memories: %+v, %v", items, err)
	}
	hits, err := n.SearchMemories(alice, "alice", "ci-77", 5)
	if err != nil || len(hits) != 1 || hits[0].ID != memID {
		t.Fatalf("search: %+v, %v", hits, err)
	}
	bob := auth.WithPrincipal(ctx, auth.Principal{Subject: "bob", Tenant: "acme"})
	if _, err := n.ListMemories(bob, "alice", 10); !errors.Is(err, fathom.ErrPermissionDenied) {
		t.Fatalf("bob lists alice's memories: %v, want ErrPermissionDenied", err)
	}
	if items, err := n.ListMemories(bob, "", 10); err != nil || len(items) != 0 {
		t.Fatalf("bob's memories: %+v, %v", items, err)
	}
	otherAlice := auth.WithPrincipal(ctx, auth.Principal{Subject: "alice", Tenant: "globex"})
	if _, err := n.GetMemory(otherAlice, "", memID); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("globex's alice gets acme's alice's memory: %v, want ErrNotFound", err)
	}

	// Forks: one copies the save (after step 1), one runs the step again (after the
	// plan). Neither adds a memory.
	for i, at := range []fathom.At{{StepIndex: 1}, {StepIndex: 0}} {
		fid, err := n.Fork(alice, id, fathom.ForkRequest{NewID: "mem-fork-" + string(rune('a'+i)), At: at})
		if err != nil {
			t.Fatal(err)
		}
		fst := fathomtest.WaitStatus(ctx, t, n, fid, messages.SessionStatus_SESSION_STATUS_COMPLETED)
		if ms := fst.GetMemories(); len(ms) != 1 || ms[0].GetMemoryId() != memID {
			t.Fatalf("fork at %+v: memories %v", at, ms)
		}
	}
	if items, _ := n.ListMemories(alice, "", 10); len(items) != 1 {
		t.Fatalf("after the forks: %d memories, want 1: %+v", len(items), items)
	}

	// The journals rebuild the store: replaying the session's and the forks' events into
	// an empty store gives the node's memories.
	rebuilt, err := ltmbolt.Open(filepath.Join(t.TempDir(), ltmbolt.File), hashembed.DefaultDimensions)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	for _, sid := range []string{id, "mem-fork-a", "mem-fork-b"} {
		for _, ev := range waitEvent(ctx, t, n, sid, 0, "session_completed") {
			if err := ltm.Replay(ctx, rebuilt, hashembed.New(hashembed.DefaultDimensions), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := rebuilt.List(ctx, ltm.Namespace{Tenant: "acme", User: "alice"}, 10)
	if err != nil || len(got) != 1 || got[0].ID != items[0].ID || got[0].Text != items[0].Text || !got[0].CreatedAt.Equal(items[0].CreatedAt) ||
		got[0].Metadata["kind"] != items[0].Metadata["kind"] || got[0].SessionID == "" {
		t.Fatalf("rebuilt from the journals: %+v, %v; the node's: %+v", got, err, items)
	}

	text := "The CI cache moved to /srv/cache/ci-78"
	if it, err := n.UpdateMemory(alice, "", memID, fathom.MemoryUpdate{Text: &text}); err != nil || it.Text != text || !it.UpdatedAt.After(it.CreatedAt) {
		t.Fatalf("update: %+v, %v", it, err)
	}
	if _, err := n.UpdateMemory(alice, "", "nope", fathom.MemoryUpdate{Text: &text}); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("update of an unknown memory: %v", err)
	}
	if err := n.DeleteMemory(bob, "alice", memID); !errors.Is(err, fathom.ErrPermissionDenied) {
		t.Fatalf("bob deletes alice's memory: %v", err)
	}
	if c, err := n.DeleteUserMemories(alice, "alice"); err != nil || c != 1 {
		t.Fatalf("delete alice's memories: %d, %v", c, err)
	}
	if err := n.DeleteMemory(alice, "", memID); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("delete of a deleted memory: %v", err)
	}

	// One live node at a time in this process: two trip Proto.Actor's grpclog race under -race.
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	plain := fathomtest.StartNode(t, fathomtest.Options{Rules: rememberModel})
	if _, err := plain.ListMemories(alice, "", 10); !errors.Is(err, fathom.ErrNoLongTermMemory) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("a node without long-term memory: %v", err)
	}
}

// TestSubAgentMemoryPerSpec: a sub-agent has the user's memories in its context, and
// recall among its tools, only when its agent's spec allows it (memory: read); an
// agent without the setting gets neither.
func TestSubAgentMemoryPerSpec(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, err := mock.ParseScript([]byte(`{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator","match":"REMEMBER","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"note it\"}]}"},
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"reader\",\"description\":\"read\"},{\"id\":\"m\",\"type\":\"mute\",\"description\":\"work\"}]}"},
 {"system_match":"FATHOM-ROLE: executor","tool_match":".","response":"noted"},
 {"system_match":"FATHOM-ROLE: executor","match":"REMEMBER","tool_calls":[{"name":"remember","arguments":"{\"text\":{{json (find \"REMEMBER (.*)\" .Goal)}}}"}]},
 {"system_match":"FATHOM-ROLE: (reader|mute)","response":"{\"status\":\"completed\",\"summary\":\"done\"}"}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := mock.New(mock.Config{Script: script, Record: 100})
	srv := httptest.NewServer(model.Handler())
	t.Cleanup(srv.Close)
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "mock-model"}
	cfg.Memory.LongTerm = true
	handoff := "\n{{template \"_shared/handoff\" .}}"
	cfg.Agents = []fathom.Agent{
		{Name: "reader", Description: "reads", Prompt: "FATHOM-ROLE: reader" + handoff, Memory: "read"},
		{Name: "mute", Description: "works", Prompt: "FATHOM-ROLE: mute" + handoff},
	}
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	for _, goal := range []string{"REMEMBER The staging password hint is HINT-3141", "Do the work"} {
		id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: goal, UserID: "u"})
		if err != nil {
			t.Fatal(err)
		}
		fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
	}
	seen := map[string]int{}
	for _, r := range model.Recorded() {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(r.Body, &req); err != nil || len(req.Messages) == 0 {
			continue
		}
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Function.Name)
		}
		for _, role := range []string{"reader", "mute"} {
			if !strings.Contains(req.Messages[0].Content, "FATHOM-ROLE: "+role) {
				continue
			}
			seen[role]++
			knows := strings.Contains(string(r.Body), "HINT-3141")
			recall := slices.Contains(tools, "recall")
			if want := role == "reader"; knows != want || recall != want {
				t.Errorf("%s's call: memory in context %v, recall offered %v (tools %v); want %v", role, knows, recall, tools, want)
			}
			if slices.Contains(tools, "remember") {
				t.Errorf("%s was offered remember: %v", role, tools)
			}
		}
	}
	if seen["reader"] == 0 || seen["mute"] == 0 {
		t.Fatalf("sub-agent calls seen: %v", seen)
	}
}
