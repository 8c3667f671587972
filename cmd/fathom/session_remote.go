package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// remoteTimeout bounds one HTTP call to a node and the WebSocket handshake.
const remoteTimeout = 15 * time.Second

// nodeURL turns --addr (host:port or a URL) into the node's base URL.
func nodeURL(addr string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return nil, usageError("--addr %q is not host:port or an http(s) URL", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// remoteGet calls GET path on the node and copies the JSON answer to w.
func remoteGet(ctx context.Context, addr, token, path string, w io.Writer) error {
	return remoteCall(ctx, http.MethodGet, addr, token, path, nil, w)
}

// remoteCall sends a request to path on the node (body, when not nil, as JSON) and
// copies the JSON answer to w; an answer other than 2xx is an exit error with the node's
// message. The call is bounded by remoteTimeout and the answer by 64 MiB.
func remoteCall(ctx context.Context, method, addr, token, path string, body any, w io.Writer) error {
	u, err := nodeURL(addr)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String()+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask node %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of node %s: %w", u.Host, err)
	}
	if resp.StatusCode/100 != 2 {
		return &exitError{code: 1, msg: fmt.Sprintf("node %s: %s: %s", u.Host, resp.Status, strings.TrimSpace(string(out)))}
	}
	_, err = fmt.Fprintf(w, "%s\n", strings.TrimSpace(string(out)))
	return err
}

// timelineRemote prints session id's stored events from a node's gateway (GET
// /v1/sessions/{id}/events?follow=false) as `session timeline` prints the journal's.
func timelineRemote(ctx context.Context, addr, token, id string, jsonOut bool, w io.Writer) error {
	var body bytes.Buffer
	path := "/v1/sessions/" + url.PathEscape(id) + "/events?follow=false&deltas=false"
	if err := remoteGet(ctx, addr, token, path, &body); err != nil {
		return err
	}
	t := newTimelinePrinter(w, jsonOut)
	for _, line := range bytes.Split(body.Bytes(), []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var f watchFrame
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("timeline %s: bad frame: %w", id, err)
		}
		switch f.Op {
		case "error":
			return &exitError{code: 1, msg: fmt.Sprintf("timeline %s: %s: %s", id, f.Code, f.Message)}
		case "event":
			ev, err := messages.UnmarshalEventJSON(line)
			if err != nil {
				return fmt.Errorf("timeline %s: %w", id, err)
			}
			if err := t.row(ev); err != nil {
				return err
			}
		}
	}
	return t.done(id)
}

// watchFrame is what watch reads from the gateway: event, delta and error frames.
type watchFrame struct {
	Op      string `json:"op"`
	Kind    string `json:"kind"`
	CallID  string `json:"call_id"`
	StepID  string `json:"step_id"`
	Index   uint32 `json:"index"`
	Attempt uint32 `json:"attempt"`
	Text    string `json:"text"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// watchRemote subscribes to session id on a node's gateway from seq from and prints its
// events (and live text and tool output in text mode) until the session ends.
func watchRemote(ctx context.Context, addr, token, id string, from uint64, p *printer) error {
	u, err := nodeURL(addr)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	// Ask for the state first: an unknown session is an error (404) before the socket
	// opens, and a resumed watch prints where it stands.
	st, err := remoteState(ctx, addr, token, id)
	if err != nil {
		return err
	}
	if from > 0 {
		p.resume(st)
	}
	u.Path += "/v1/ws"
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	dialer := websocket.Dialer{HandshakeTimeout: remoteTimeout}
	conn, resp, err := dialer.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("connect to %s: %s", u.Host, resp.Status)}
		}
		return fmt.Errorf("connect to %s: %w", u.Host, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() }) // Ctrl-C ends the read
	defer stop()
	sub := map[string]any{"op": "subscribe", "id": "watch", "session_id": id, "from_seq": from, "deltas": !p.json}
	if err := conn.WriteJSON(sub); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watch %s: connection lost (resume with --from %d): %w", id, p.lastSeq, err)
		}
		var f watchFrame
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("watch %s: bad frame: %w", id, err)
		}
		switch f.Op {
		case "error":
			return &exitError{code: 1, msg: fmt.Sprintf("watch %s: %s: %s", id, f.Code, f.Message)}
		case "delta":
			if err := p.delta(feed.Delta{Kind: f.Kind, CallID: f.CallID, StepID: f.StepID, Index: f.Index, Attempt: f.Attempt, Text: f.Text}); err != nil {
				return err
			}
		case "event":
			ev, err := messages.UnmarshalEventJSON(b)
			if err != nil {
				return fmt.Errorf("watch %s: %w", id, err)
			}
			if done, err := p.printWatched(ev); done || err != nil {
				return err
			}
		}
	}
}

// watchJournal prints session id's stored events from seq from and follows it by
// polling the journal until the session ends. The embedded journal is locked by a node
// that has it open: watch a running node with --addr instead.
func watchJournal(ctx context.Context, open func() (persistence.Journal, error), id string, from uint64, p *printer) error {
	p.lastSeq = from
	for first := true; ; first = false {
		j, err := open()
		if errors.Is(err, os.ErrNotExist) {
			return &exitError{code: 1, msg: fmt.Sprintf("session %q not found: %v", id, err)}
		}
		if err != nil {
			return err
		}
		if first {
			if err := p.resumeFromJournal(ctx, j, id, from); err != nil {
				_ = j.Close()
				return err
			}
		}
		var done bool
		err = replay.Events(ctx, j, id, p.lastSeq, func(ev *messages.Event) error {
			var err error
			done, err = p.printWatched(ev)
			return err
		})
		_ = j.Close()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// resumeFromJournal checks that session id exists and, when watching starts past its
// beginning, gives the printer the plan and start time the skipped events carried.
func (p *printer) resumeFromJournal(ctx context.Context, j persistence.Journal, id string, from uint64) error {
	last, err := j.LastSeq(ctx, id)
	if err != nil {
		return err
	}
	if last == 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	if from == 0 {
		return nil
	}
	s, _, err := replay.Load(ctx, j, id, from)
	if err != nil {
		return err
	}
	p.resume(s)
	return nil
}

// printWatched prints ev and reports whether it ends the session. A failed session is
// exit code 1, as for fathom run.
func (p *printer) printWatched(ev *messages.Event) (bool, error) {
	if ev.GetSeq() <= p.lastSeq && p.lastSeq != 0 {
		return false, nil
	}
	p.lastSeq = ev.GetSeq()
	if err := p.print(ev); err != nil {
		return false, err
	}
	switch ev.GetPayload().(type) {
	case *messages.Event_SessionCompleted:
		return true, nil
	case *messages.Event_SessionFailed, *messages.Event_SessionCancelled:
		return true, &exitError{code: 1}
	}
	return false, nil
}
