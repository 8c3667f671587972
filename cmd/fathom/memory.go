package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/gateway"
)

// memoryUsage is `fathom memory`'s synopsis.
const memoryUsage = `list|search|delete [--user U] [--addr NODE --token T] [--json] [flags] [QUERY | ID... | --all]

  list    the user's newest memories
  search  the user's memories for QUERY (text and vector search fused, as recall does)
  delete  the memories ID..., or with --all every memory of the user`

// runMemory lists, searches and deletes long-term memories: through a node's gateway
// (/v1/memories) with --addr, else on an in-process node over the data dir's
// memories.db or PostgreSQL.
func runMemory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("fathom memory %s", memoryUsage)
	}
	sub := args[0]
	switch sub {
	case "list", "search", "delete":
	default:
		return usageError("unknown memory command %q: fathom memory %s", sub, memoryUsage)
	}
	fs := newFlagSet("memory "+sub, memoryUsage, stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "warn")
	user := fs.String("user", os.Getenv("FATHOM_USER"), "whose memories (a session's user_id); with --addr, default: the token's subject (env FATHOM_USER)")
	limit := fs.Int("limit", 20, "list or search at most this many")
	all := fs.Bool("all", false, "delete: every memory of the user")
	jsonOut := fs.Bool("json", false, "print JSON")
	addr := fs.String("addr", os.Getenv("FATHOM_ADDR"), "ask a node's gateway (host:port or URL) instead of running an in-process node (env FATHOM_ADDR)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token for --addr (env FATHOM_TOKEN)")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usageError("--limit must be 1..1000")
	}
	if sub == "delete" && (*all == (len(pos) > 0)) {
		return usageError("memory delete takes memory IDs, or --all for every memory of the user")
	}
	if sub == "delete" && *all && *user == "" {
		return usageError("memory delete --all needs --user: name whose memories to delete")
	}
	if sub == "list" && len(pos) > 0 {
		return usageError("memory list takes no arguments")
	}
	if *addr != "" {
		return memoryRemote(ctx, *addr, *token, sub, *user, strings.Join(pos, " "), pos, *all, *limit, *jsonOut, stdout)
	}
	if *user == "" {
		return usageError("name whose memories: --user U")
	}
	nf.memory.longTerm = optBool{v: true, set: true}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n, log, err := startLocalNode(ctx, &nf, "memory "+sub, stderr)
	if err != nil {
		return err
	}
	defer stopLocalNode(n, log)
	var list []gateway.Memory
	switch {
	case sub == "list":
		items, err := n.ListMemories(ctx, *user, *limit)
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		for _, it := range items {
			list = append(list, fathomapi.MemoryJSON(it))
		}
	case sub == "search":
		hits, err := n.SearchMemories(ctx, *user, strings.Join(pos, " "), *limit)
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		for _, h := range hits {
			m := fathomapi.MemoryJSON(h.Item)
			sc := h.Score
			m.Score = &sc
			list = append(list, m)
		}
	case *all:
		c, err := n.DeleteUserMemories(ctx, *user)
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		return printDeleted(stdout, gateway.DeletedMemories{User: *user, Deleted: c}, *jsonOut)
	default:
		for _, id := range pos {
			if err := n.DeleteMemory(ctx, *user, id); err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			if err := printDeleted(stdout, gateway.DeletedMemories{User: *user, ID: id, Deleted: 1}, *jsonOut); err != nil {
				return err
			}
		}
		return nil
	}
	return printMemories(stdout, list, *jsonOut)
}

// memoryRemote runs a memory command through a node's gateway.
func memoryRemote(ctx context.Context, addr, token, sub, user, query string, ids []string, all bool, limit int, jsonOut bool, stdout io.Writer) error {
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	switch {
	case sub == "delete" && all:
		var buf bytes.Buffer
		if err := remoteCall(ctx, http.MethodDelete, addr, token, "/v1/memories?"+q.Encode(), nil, &buf); err != nil {
			return err
		}
		return reprint(buf.Bytes(), jsonOut, stdout, func(d gateway.DeletedMemories) error { return printDeleted(stdout, d, false) })
	case sub == "delete":
		for _, id := range ids {
			var buf bytes.Buffer
			if err := remoteCall(ctx, http.MethodDelete, addr, token, "/v1/memories/"+url.PathEscape(id)+"?"+q.Encode(), nil, &buf); err != nil {
				return err
			}
			if err := reprint(buf.Bytes(), jsonOut, stdout, func(d gateway.DeletedMemories) error { return printDeleted(stdout, d, false) }); err != nil {
				return err
			}
		}
		return nil
	}
	q.Set("limit", strconv.Itoa(limit))
	if sub == "search" {
		q.Set("q", query)
	}
	var buf bytes.Buffer
	if err := remoteCall(ctx, http.MethodGet, addr, token, "/v1/memories?"+q.Encode(), nil, &buf); err != nil {
		return err
	}
	return reprint(buf.Bytes(), false, stdout, func(l gateway.MemoryList) error { return printMemories(stdout, l.Memories, jsonOut) })
}

// reprint prints a gateway answer as is (raw) or decoded into T by show.
func reprint[T any](body []byte, raw bool, stdout io.Writer, show func(T) error) error {
	if raw {
		_, err := stdout.Write(body)
		return err
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("decode the node's answer: %w", err)
	}
	return show(v)
}

// printMemories prints one line per memory (id, date, text), or one JSON object per
// memory.
func printMemories(w io.Writer, list []gateway.Memory, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		for _, m := range list {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no memories")
		return err
	}
	for _, m := range list {
		line := fmt.Sprintf("%s  %s  %s", m.ID, m.UpdatedAt.Format("2006-01-02 15:04"), m.Text)
		if m.ExpiresAt != nil {
			line += fmt.Sprintf("  (expires %s)", m.ExpiresAt.Format("2006-01-02"))
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

func printDeleted(w io.Writer, d gateway.DeletedMemories, jsonOut bool) error {
	if jsonOut {
		return json.NewEncoder(w).Encode(d)
	}
	var err error
	if d.ID != "" {
		_, err = fmt.Fprintf(w, "deleted memory %s of user %s\n", d.ID, d.User)
	} else {
		_, err = fmt.Fprintf(w, "deleted %d memories of user %s\n", d.Deleted, d.User)
	}
	return err
}
