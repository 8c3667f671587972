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
	line, data    []byte // reused across events
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
		hasData bool
		pending bool
	)
	r.data = r.data[:0]
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
				ev, pending = Event{}, false
				r.data = r.data[:0]
				continue
			}
			ev.Data, ev.ID = string(r.data), r.lastID
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
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > limit {
				return Event{}, fmt.Errorf("%w: more than %d bytes of data", ErrTooLarge, limit)
			}
			r.data = append(r.data, value...)
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

// readLine returns one line without its terminator (LF, CRLF or CR). The line is only
// valid until the next call (it lives in a buffer the Reader reuses).
func (r *Reader) readLine(limit int) ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) && len(r.line) > 0 {
					return nil, io.ErrUnexpectedEOF // a line cut before its terminator
				}
				return nil, err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		end := bytes.IndexByte(buf, '\n')
		region := buf
		if end >= 0 {
			region = buf[:end]
		}
		if cr := bytes.IndexByte(region, '\r'); cr >= 0 {
			end = cr
		}
		if end < 0 {
			if len(r.line)+len(buf) > limit {
				return nil, fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, limit)
			}
			r.line = append(r.line, buf...)
			_, _ = r.br.Discard(len(buf))
			continue
		}
		if len(r.line)+end > limit {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, limit)
		}
		r.line = append(r.line, buf[:end]...)
		term := buf[end]
		_, _ = r.br.Discard(end + 1)
		if term == '\r' {
			if next, err := r.br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = r.br.Discard(1)
			}
		}
		return r.line, nil
	}
}
