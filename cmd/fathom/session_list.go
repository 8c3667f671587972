package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/persistence"
)

// listFlags are `fathom session list`'s filters: the same as GET /v1/sessions's, applied
// to the journal's session index, or sent to a node's gateway with --addr.
type listFlags struct {
	status, user, goal string
	since, until       string
	limit              int
	cursor             string
}

func (f *listFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.status, "status", "", "only sessions with this status ("+strings.Join(gateway.Statuses, ", ")+")")
	fs.StringVar(&f.user, "user", "", "only sessions started by this user_id")
	fs.StringVar(&f.goal, "goal", "", "only sessions whose goal contains this text (ignoring case)")
	fs.StringVar(&f.since, "since", "", "only sessions created at or after this time (RFC 3339, or a duration ago: 2h)")
	fs.StringVar(&f.until, "until", "", "only sessions created before this time (RFC 3339, or a duration ago)")
	fs.IntVar(&f.limit, "limit", 0, fmt.Sprintf("at most this many sessions (with --addr: one page, 1-%d, default %d)", gateway.MaxListLimit, gateway.DefaultListLimit))
	fs.StringVar(&f.cursor, "cursor", "", "with --addr: continue from a page's next_cursor")
}

// check refuses bad filters before anything is opened (sub: the subcommand).
func (f *listFlags) check(sub string) error {
	if sub != "list" {
		return nil
	}
	_, err := f.query(time.Now())
	return err
}

// filtered reports whether any filter is set.
func (f *listFlags) filtered() bool {
	return f.status != "" || f.user != "" || f.goal != "" || f.since != "" || f.until != ""
}

// query checks the flags and turns them into GET /v1/sessions's parameters.
func (f *listFlags) query(now time.Time) (url.Values, error) {
	q := url.Values{}
	if f.status != "" {
		if !persistence.ValidStatus(f.status) {
			return nil, usageError("--status must be one of %s, not %q", strings.Join(gateway.Statuses, ", "), f.status)
		}
		q.Set("status", f.status)
	}
	if f.limit < 0 || f.limit > gateway.MaxListLimit {
		return nil, usageError("--limit must be 1 to %d", gateway.MaxListLimit)
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("user_id", f.user)
	set("goal", f.goal)
	set("cursor", f.cursor)
	if f.limit > 0 {
		q.Set("limit", strconv.Itoa(f.limit))
	}
	for _, p := range []struct{ name, v string }{{"since", f.since}, {"until", f.until}} {
		if p.v == "" {
			continue
		}
		t, err := parseWhen(p.v, now)
		if err != nil {
			return nil, usageError("--%s: %v", p.name, err)
		}
		q.Set(p.name, t.UTC().Format(time.RFC3339Nano))
	}
	return q, nil
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a positive duration", v)
	}
	return now.Add(-d), nil
}

// listRow is one session of `session list`.
type listRow struct {
	SessionID string    `json:"session_id"`
	Status    string    `json:"status,omitempty"`
	LastSeq   uint64    `json:"last_seq"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	UserID    string    `json:"user_id,omitempty"`
	CostUSD   float64   `json:"cost_usd"`
	Goal      string    `json:"goal,omitempty"`
}

// sessionList lists the journal's sessions with their index rows: all streams, newest
// first, or with a filter only the indexed sessions it selects.
func sessionList(ctx context.Context, j persistence.SessionStore, f listFlags, w io.Writer, jsonOut bool) error {
	q, err := f.query(time.Now())
	if err != nil {
		return err
	}
	if f.cursor != "" {
		return usageError("--cursor pages a node's list: use it with --addr")
	}
	rows := map[string]*listRow{}
	var order []*listRow
	lq := persistence.ListQuery{Status: q.Get("status"), UserID: f.user, GoalContains: f.goal}
	lq.Since, _ = time.Parse(time.RFC3339Nano, q.Get("since"))
	lq.Until, _ = time.Parse(time.RFC3339Nano, q.Get("until"))
	es, err := j.ListSessions(ctx, lq)
	if err != nil {
		return err
	}
	for _, e := range es {
		r := &listRow{SessionID: e.SessionID, Status: e.Status, LastSeq: e.Seq, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
			UserID: e.UserID, CostUSD: e.CostUSD, Goal: e.Goal}
		rows[e.SessionID] = r
		order = append(order, r)
	}
	if !f.filtered() {
		// Streams the index does not know (written before it existed) are listed too.
		streams, err := j.ListStreams(ctx, "")
		if err != nil {
			return err
		}
		for _, s := range streams {
			r := rows[s.ID]
			if r == nil {
				r = &listRow{SessionID: s.ID}
				order = append(order, r)
			}
			r.LastSeq, r.CreatedAt, r.UpdatedAt = s.LastSeq, s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		}
		sortRows(order)
	}
	if f.limit > 0 && len(order) > f.limit {
		order = order[:f.limit]
	}
	return printList(order, "", w, jsonOut)
}

// sortRows orders rows newest first, like GET /v1/sessions.
func sortRows(rows []*listRow) {
	sort.Slice(rows, func(i, k int) bool {
		a, b := rows[i], rows[k]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.SessionID > b.SessionID
	})
}

// sessionListRemote lists one page of a node's sessions through GET /v1/sessions.
func sessionListRemote(ctx context.Context, addr, token string, f listFlags, w io.Writer, jsonOut bool) error {
	q, err := f.query(time.Now())
	if err != nil {
		return err
	}
	var buf strings.Builder
	path := "/v1/sessions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if err := remoteGet(ctx, addr, token, path, &buf); err != nil {
		return err
	}
	var page gateway.SessionList
	if err := json.Unmarshal([]byte(buf.String()), &page); err != nil {
		return fmt.Errorf("read the node's session list: %w", err)
	}
	rows := make([]*listRow, len(page.Sessions))
	for i, s := range page.Sessions {
		rows[i] = &listRow{SessionID: s.SessionID, Status: s.Status, LastSeq: s.Seq, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
			UserID: s.UserID, CostUSD: s.CostUSD, Goal: s.Goal}
	}
	return printList(rows, page.NextCursor, w, jsonOut)
}

// printList prints rows as a table (goal cut to one line) or JSON lines; a next page's
// cursor goes last (a table line, or {"next_cursor": ...}).
func printList(rows []*listRow, next string, w io.Writer, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		if next != "" {
			return enc.Encode(map[string]string{"next_cursor": next})
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATUS\tEVENTS\tCREATED\tUPDATED\tCOST\tGOAL")
	for _, r := range rows {
		status := r.Status
		if status == "" {
			status = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t$%.4f\t%s\n", r.SessionID, status, r.LastSeq, r.CreatedAt.UTC().Format(time.RFC3339),
			r.UpdatedAt.UTC().Format(time.RFC3339), r.CostUSD, oneLine(r.Goal, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		_, err := fmt.Fprintf(w, "next page: --cursor %s\n", next)
		return err
	}
	return nil
}

// oneLine cuts s to its first line and n runes.
func oneLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	r := []rune(s)
	if len(r) > n {
		r, cut = r[:n], true
	}
	if cut {
		return string(r) + "…"
	}
	return string(r)
}
