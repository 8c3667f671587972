package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// runSession inspects stored sessions straight from the journal (no node needed).
func runSession(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "timeline" && args[0] != "state") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "Usage: fathom session list|timeline ID|state ID [flags]")
			return nil
		}
		return usageError("want a subcommand: list, timeline ID or state ID")
	}
	sub := args[0]
	synopsis := map[string]string{"list": "[flags]", "timeline": "[flags] ID", "state": "[flags] ID"}[sub]
	fs := newFlagSet("session "+sub, synopsis, stderr)
	var store storeFlags
	store.register(fs, ".fathom")
	jsonOut := fs.Bool("json", false, "print JSON")
	at := fs.Uint64("at", 0, "state: fold the events only through this seq (0 = all)")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if sub != "list" && len(pos) != 1 {
		return usageError("session %s needs exactly one session ID", sub)
	}
	j, err := openJournalReadOnly(ctx, store)
	if err != nil {
		return err
	}
	defer j.Close()
	switch sub {
	case "list":
		return sessionList(ctx, j, stdout, *jsonOut)
	case "timeline":
		return sessionTimeline(ctx, j, pos[0], stdout, *jsonOut)
	default:
		return sessionState(ctx, j, pos[0], *at, stdout)
	}
}

func openJournalReadOnly(ctx context.Context, store storeFlags) (persistence.Journal, error) {
	return node.OpenJournal(ctx, store.dataDir, store.postgres, slog.Default())
}

func sessionList(ctx context.Context, j persistence.Journal, w io.Writer, jsonOut bool) error {
	streams, err := j.ListStreams(ctx, "")
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(w)
		for _, s := range streams {
			if err := enc.Encode(map[string]any{"session_id": s.ID, "last_seq": s.LastSeq, "created_at": s.CreatedAt.UTC().Format(time.RFC3339Nano), "updated_at": s.UpdatedAt.UTC().Format(time.RFC3339Nano)}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tEVENTS\tCREATED\tUPDATED")
	for _, s := range streams {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.ID, s.LastSeq, s.CreatedAt.UTC().Format(time.RFC3339), s.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func sessionTimeline(ctx context.Context, j persistence.Journal, id string, w io.Writer, jsonOut bool) error {
	n := 0
	p := newPrinter(w, jsonOut)
	err := session.Events(ctx, j, id, 0, func(ev *messages.Event) error {
		n++
		if jsonOut {
			return p.print(ev)
		}
		t := p.text(ev)
		if t == "" {
			t = "\n"
		}
		_, err := fmt.Fprintf(w, "%4d  %s  %-18s %s", ev.GetSeq(), ev.At().Format("15:04:05.000"), ev.Type(), t)
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	return nil
}

func sessionState(ctx context.Context, j persistence.Journal, id string, at uint64, w io.Writer) error {
	s, _, err := session.Load(ctx, j, id, at)
	if err != nil {
		return err
	}
	if s.GetSeq() == 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true, Indent: "  "}.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
