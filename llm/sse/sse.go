// Package sse reads Server-Sent Events (the text/event-stream format that OpenAI- and
// Anthropic-style streaming APIs use) incrementally from an io.Reader, one event at a
// time, with a bound on line and event size so a hostile or broken stream cannot grow
// memory without limit.
//
// It follows the WHATWG parsing rules that matter for model APIs: lines end in LF, CRLF
// or CR; a line starting with ':' is a comment; "field: value" drops one leading space
// of the value; several data lines of one event are joined with '\n'; an empty line
// dispatches the event; unknown fields are ignored. A stream cut before the blank line
// that would dispatch an event yields io.ErrUnexpectedEOF, so truncated streams are
// never mistaken for complete ones.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// DefaultMaxEventBytes bounds one event's data when Reader.MaxEventBytes is 0.
const DefaultMaxEventBytes = 4 << 20

// ErrTooLarge is returned when a line or an event exceeds the size bound.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched event.
type Event struct {
	// Type is the "event" field ("" for the default "message").
	Type string
	// Data is the event's data lines joined with '\n'.
	Data string
	// ID is the last "id" field seen.
	ID string
	// Retry is the "retry" field in milliseconds, 0 if absent.
	Retry int
}

// Reader reads events from a stream.
type Reader struct {
	br *bufio.Reader
	// MaxEventBytes bounds a line and an event's data; 0 means DefaultMaxEventBytes.
	MaxEventBytes int
	lastID        string
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next event. At a clean end of stream (nothing pending) it returns
// io.EOF; if the stream ends inside an event, io.ErrUnexpectedEOF.
func (r *Reader) Next() (Event, error) {
	limit := r.MaxEventBytes
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	var (
		ev      Event
		data    bytes.Buffer
		hasData bool
		pending bool
	)
	for {
		line, err := r.readLine(limit)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if pending {
					return Event{}, io.ErrUnexpectedEOF
				}
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if len(line) == 0 { // dispatch
			if !hasData {
				ev, data, pending = Event{}, bytes.Buffer{}, false
				continue
			}
			ev.Data, ev.ID = data.String(), r.lastID
			return ev, nil
		}
		pending = true
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > limit {
				return Event{}, fmt.Errorf("%w: more than %d bytes of data", ErrTooLarge, limit)
			}
			data.Write(value)
			hasData = true
		case "event":
			ev.Type = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		case "retry":
			if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 {
				ev.Retry = n
			}
		}
	}
}

// readLine returns one line without its terminator (LF, CRLF or CR).
func (r *Reader) readLine(limit int) ([]byte, error) {
	var line []byte
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF // a line cut before its terminator
			}
			return nil, err
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			if next, err := r.br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = r.br.ReadByte()
			}
			return line, nil
		}
		if len(line) >= limit {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, limit)
		}
		line = append(line, b)
	}
}
