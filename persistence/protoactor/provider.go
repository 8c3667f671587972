// Package protoactor adapts a persistence.Journal to Proto.Actor's persistence.Provider,
// so plain (non-grain) actors written with the standard persistence.Mixin store their
// events and snapshots in Fathom's journal next to the sessions.
//
// Proto.Actor's provider interface cannot return errors. This adapter panics on a
// failed read or write instead of dropping it: the actor's supervisor restarts the actor,
// which replays from the journal, so in-memory state never runs ahead of what is stored.
// Session grains do not use this: they load by identity from the Journal directly (see
// INFRA.md on why the Mixin does not fit grains).
package protoactor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	papersistence "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fathom-agents/fathom/persistence"
)

// Timeout bounds each journal call the adapter makes.
const Timeout = 10 * time.Second

// StreamPrefix is prepended to the actor name to form the journal stream id.
const StreamPrefix = "actor/"

// Provider is a Proto.Actor persistence provider backed by a Journal.
type Provider struct {
	j        persistence.Journal
	interval int
}

var (
	_ papersistence.Provider      = (*Provider)(nil)
	_ papersistence.ProviderState = (*Provider)(nil)
)

// NewProvider returns a provider storing in j that asks for a snapshot every
// snapshotInterval events (values below 1 mean 100).
func NewProvider(j persistence.Journal, snapshotInterval int) *Provider {
	if snapshotInterval < 1 {
		snapshotInterval = 100
	}
	return &Provider{j: j, interval: snapshotInterval}
}

// GetState implements persistence.Provider.
func (p *Provider) GetState() papersistence.ProviderState { return p }

// Restart implements persistence.ProviderState; the journal keeps no per-actor state.
func (p *Provider) Restart() {}

// GetSnapshotInterval implements persistence.ProviderState.
func (p *Provider) GetSnapshotInterval() int { return p.interval }

func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Timeout)
}

// GetSnapshot implements persistence.SnapshotStore.
func (p *Provider) GetSnapshot(actorName string) (any, int, bool) {
	c, cancel := ctx()
	defer cancel()
	snap, ok, err := p.j.LoadSnapshot(c, StreamPrefix+actorName, math.MaxUint64)
	if err != nil {
		panic(fmt.Errorf("protoactor provider: load snapshot of %s: %w", actorName, err))
	}
	if !ok {
		return nil, 0, false
	}
	msg, err := decode(snap.Data)
	if err != nil {
		panic(fmt.Errorf("protoactor provider: snapshot of %s: %w", actorName, err))
	}
	return msg, int(snap.Seq), true
}

// PersistSnapshot implements persistence.SnapshotStore.
//
// The Mixin passes an index that means different things depending on the path (after
// the event on a RequestSnapshot, the next index on a direct call), and replaying from
// it would apply the last event twice. A snapshot is of the actor's current state, which
// includes every event persisted so far, so it is stored at the stream's last sequence
// number and replay resumes right after it; snapshotIndex is ignored.
func (p *Provider) PersistSnapshot(actorName string, _ int, snapshot proto.Message) {
	data, err := encode(snapshot)
	if err == nil {
		c, cancel := ctx()
		defer cancel()
		var last uint64
		if last, err = p.j.LastSeq(c, StreamPrefix+actorName); err == nil {
			err = p.j.SaveSnapshot(c, StreamPrefix+actorName, persistence.Snapshot{Seq: last, Data: data})
		}
	}
	if err != nil {
		panic(fmt.Errorf("protoactor provider: persist snapshot of %s: %w", actorName, err))
	}
}

// DeleteSnapshots implements persistence.SnapshotStore. The journal is append-only:
// snapshots are kept.
func (p *Provider) DeleteSnapshots(string, int) {}

// GetEvents implements persistence.EventStore: events with index in [start, end), end 0
// meaning all. Event index i is journal sequence i+1.
func (p *Provider) GetEvents(actorName string, eventIndexStart int, eventIndexEnd int, callback func(e any)) {
	c, cancel := ctx()
	defer cancel()
	stop := errors.New("end reached")
	err := p.j.Load(c, StreamPrefix+actorName, uint64(eventIndexStart), func(r persistence.Record) error {
		if eventIndexEnd > 0 && r.Seq > uint64(eventIndexEnd) {
			return stop
		}
		msg, err := decode(r.Data)
		if err != nil {
			return fmt.Errorf("event %d: %w", r.Seq, err)
		}
		callback(msg)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		panic(fmt.Errorf("protoactor provider: load events of %s: %w", actorName, err))
	}
}

// PersistEvent implements persistence.EventStore. The write expects eventIndex events
// before it, so a second live incarnation of the same actor is fenced (it panics and
// restarts from the journal).
func (p *Provider) PersistEvent(actorName string, eventIndex int, event proto.Message) {
	data, err := encode(event)
	if err == nil {
		c, cancel := ctx()
		defer cancel()
		_, err = p.j.Append(c, StreamPrefix+actorName, uint64(eventIndex), []persistence.Record{{Type: string(proto.MessageName(event)), Data: data}})
	}
	if err != nil {
		panic(fmt.Errorf("protoactor provider: persist event %d of %s: %w", eventIndex, actorName, err))
	}
}

// DeleteEvents implements persistence.EventStore. The journal is append-only: events
// are kept.
func (p *Provider) DeleteEvents(string, int) {}

// encode stores the message's full name before its bytes so it can be decoded without
// knowing its type in advance: len(name) (1 byte) | name | proto bytes.
func encode(m proto.Message) ([]byte, error) {
	name := string(proto.MessageName(m))
	if name == "" || len(name) > 255 {
		return nil, fmt.Errorf("message type name %q cannot be stored", name)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 1+len(name)+len(b))
	out = append(out, byte(len(name)))
	out = append(out, name...)
	return append(out, b...), nil
}

func decode(data []byte) (proto.Message, error) {
	if len(data) < 1 || len(data) < 1+int(data[0]) {
		return nil, fmt.Errorf("%w: short message", persistence.ErrCorrupt)
	}
	name := protoreflect.FullName(data[1 : 1+data[0]])
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return nil, fmt.Errorf("message type %s: %w", name, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(data[1+data[0]:], m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", persistence.ErrCorrupt, name, err)
	}
	return m, nil
}
