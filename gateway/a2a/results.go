package a2a

import (
	"encoding/json"
	"fmt"

	"github.com/fathom-agents/fathom/internal/rendercache"
	"github.com/fathom-agents/fathom/messages"
)

// resultCache renders the stream responses of an event once however many streams of
// its task send them: a frame's "result" depends only on the event, the dialect (legacy)
// and, for 0.3, whether it ends the stream (final); each stream adds its own JSON-RPC
// id around it. Events are immutable, so a key names its results for good. It keeps the
// newest size entries.
type resultCache = rendercache.Cache[resultKey, [][]byte]

type resultKey struct {
	task   string
	seq    uint64
	legacy bool
	final  bool
}

func newResultCache(size int) *resultCache { return rendercache.New[resultKey, [][]byte](size) }

// eventResults are the JSON "result"s of event ev's stream responses on task id (see
// updates), in the dialect legacy says; final marks the last of them as the one that
// ends a 0.3 stream. Rendered once per event for all the task's streams.
func (s *Server) eventResults(id string, ev *messages.Event, legacy, final bool) ([][]byte, error) {
	k := resultKey{task: id, seq: ev.GetSeq(), legacy: legacy, final: final && legacy}
	return s.results.Get(k, func() ([][]byte, error) {
		resps, err := s.updates(id, ev)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, len(resps))
		for i, resp := range resps {
			if out[i], err = marshalResult(resp, legacy, final && i == len(resps)-1); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// marshalResult is the JSON of stream response resp as a frame's "result".
func marshalResult(resp StreamResponse, legacy, final bool) ([]byte, error) {
	var result any = resp
	if legacy {
		result = legacyStream(resp, final)
	}
	b, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("encode a stream response: %w", err)
	}
	return b, nil
}

// framePrefix is the start of a stream's JSON-RPC frames up to their result,
// `{"id":ID,"jsonrpc":"2.0","result":`: the bytes json.Marshal gives the frame's map
// (keys sorted), so a frame is the prefix, the result and "}".
func framePrefix(rpcID json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nullID(rpcID)})
	if err != nil {
		return nil, fmt.Errorf("encode a stream response: %w", err)
	}
	return append(b[:len(b)-1], `,"result":`...), nil
}
