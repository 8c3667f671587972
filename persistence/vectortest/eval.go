package vectortest

import (
	"context"
	_ "embed" // the evaluation set
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/persistence"
)

// evalJSON is the retrieval evaluation set, written by ./evalgen.
//
//go:embed testdata/retrieval-eval.json
var evalJSON []byte

// EvalSet is the retrieval evaluation set: sessions of messages (message i has Seq
// i+1) and queries asked in them, each with the messages that answer it.
type EvalSet struct {
	Sessions []struct {
		ID       string   `json:"id"`
		Messages []string `json:"messages"`
	} `json:"sessions"`
	Queries []EvalQuery `json:"queries"`
}

// EvalQuery is one query of the set.
type EvalQuery struct {
	// Session is the session asked.
	Session string `json:"session"`
	// Kind is identifier (the query names the message's identifier), paraphrase (it
	// does not) or mixed.
	Kind string `json:"kind"`
	// Query is the text asked.
	Query string `json:"query"`
	// Relevant are the Seqs of the messages that answer it.
	Relevant []uint64 `json:"relevant"`
}

// LoadEval returns the committed evaluation set.
func LoadEval() (EvalSet, error) {
	var s EvalSet
	if err := json.Unmarshal(evalJSON, &s); err != nil {
		return EvalSet{}, fmt.Errorf("read the evaluation set: %w", err)
	}
	return s, nil
}

// Halves splits the queries in two halves of facts, for choosing settings (fusion
// weights) on one and reporting on the other: each fact of a domain (support, incident,
// code, data: the session id's prefix) is asked in every session of that domain, with
// the same paraphrase, so a fact's queries of every session go to the same half.
// Within each domain the facts, in the order of their paraphrase queries' text, go to
// tune and heldOut in turn. Nothing of the split looks at results; both halves keep
// every session.
func (e EvalSet) Halves() (tune, heldOut EvalSet) {
	type at struct {
		session string
		seq     uint64
	}
	fact := map[at]string{} // a fact's paraphrase query, its key across sessions
	for _, q := range e.Queries {
		if q.Kind == "paraphrase" && len(q.Relevant) > 0 {
			fact[at{q.Session, q.Relevant[0]}] = q.Query
		}
	}
	domain := func(session string) string { d, _, _ := strings.Cut(session, "-"); return d }
	keys := map[string][]string{} // domain → its facts' keys, sorted
	for k, para := range fact {
		d := domain(k.session)
		if !slices.Contains(keys[d], para) {
			keys[d] = append(keys[d], para)
		}
	}
	for _, ks := range keys {
		slices.Sort(ks)
	}
	tune.Sessions, heldOut.Sessions = e.Sessions, e.Sessions
	for _, q := range e.Queries {
		var para string
		if len(q.Relevant) > 0 {
			para = fact[at{q.Session, q.Relevant[0]}]
		}
		if slices.Index(keys[domain(q.Session)], para)%2 == 0 {
			tune.Queries = append(tune.Queries, q)
		} else {
			heldOut.Queries = append(heldOut.Queries, q)
		}
	}
	return tune, heldOut
}

// Embed embeds texts (a memory.Embedder's Embed).
type Embed func(ctx context.Context, texts []string) ([][]float32, error)

// Load stores the set's sessions in s under Tenant, one stream per session, each
// message with its embedding and text.
func (e EvalSet) Load(ctx context.Context, s persistence.VectorStore, embed Embed) error {
	for _, sess := range e.Sessions {
		vecs, err := embed(ctx, sess.Messages)
		if err != nil {
			return fmt.Errorf("embed session %s: %w", sess.ID, err)
		}
		batch := make([]persistence.Vector, len(vecs))
		for i, v := range vecs {
			batch[i] = persistence.Vector{Seq: uint64(i + 1), Values: v, Text: sess.Messages[i]}
		}
		if err := s.Upsert(ctx, Tenant, sess.ID, batch); err != nil {
			return fmt.Errorf("store session %s: %w", sess.ID, err)
		}
	}
	return nil
}

// Recall is recall@k of one retrieval over the set: overall and by query kind.
type Recall struct {
	All    float64
	ByKind map[string]float64
	// Misses are the queries whose relevant messages were not all found.
	Misses []EvalQuery
}

// Recall runs every query through persistence.HybridSearch with r and returns the share
// of relevant messages among the top k (averaged over queries).
func (e EvalSet) Recall(ctx context.Context, s persistence.VectorStore, embed Embed, r persistence.Retrieval, k int) (Recall, error) {
	sum, n := 0.0, 0
	kindSum, kindN := map[string]float64{}, map[string]int{}
	var misses []EvalQuery
	for _, q := range e.Queries {
		vecs, err := embed(ctx, []string{q.Query})
		if err != nil {
			return Recall{}, fmt.Errorf("embed query: %w", err)
		}
		hits, err := persistence.HybridSearch(ctx, s, r, Tenant, q.Session, q.Query, vecs[0], k)
		if err != nil {
			return Recall{}, fmt.Errorf("search %q: %w", q.Query, err)
		}
		found := 0
		for _, rel := range q.Relevant {
			if slices.ContainsFunc(hits, func(h persistence.VectorHit) bool { return h.Seq == rel }) {
				found++
			}
		}
		rec := float64(found) / float64(len(q.Relevant))
		if found < len(q.Relevant) {
			misses = append(misses, q)
		}
		sum += rec
		n++
		kindSum[q.Kind] += rec
		kindN[q.Kind]++
	}
	out := Recall{All: sum / float64(n), ByKind: map[string]float64{}, Misses: misses}
	for kd, v := range kindSum {
		out.ByKind[kd] = v / float64(kindN[kd])
	}
	return out, nil
}

// Percentile returns the p-th percentile (0..1) of lat (sorted in place).
func Percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	return lat[min(len(lat)-1, int(p*float64(len(lat))))]
}

// Stream is one stream of a scaled corpus: its id and its messages with embeddings and
// text.
type Stream struct {
	ID   string
	Vecs []persistence.Vector
}

// Scaled returns a corpus of streams × perStream messages for latency benchmarks: the
// set's messages in turn, each with a reference of its own appended (an order id), so
// every stream has the set's vocabulary and identifiers that differ. Stream i is
// "scaled-i".
func (e EvalSet) Scaled(ctx context.Context, embed Embed, streams, perStream int) ([]Stream, error) {
	var all []string
	for _, s := range e.Sessions {
		all = append(all, s.Messages...)
	}
	out := make([]Stream, streams)
	for i := range out {
		texts := make([]string, perStream)
		for j := range texts {
			texts[j] = fmt.Sprintf("%s (ref ORD-%d-%05d)", all[(i*7+j)%len(all)], 2000+i, j)
		}
		vecs, err := embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		st := Stream{ID: fmt.Sprintf("scaled-%d", i), Vecs: make([]persistence.Vector, perStream)}
		for j, v := range vecs {
			st.Vecs[j] = persistence.Vector{Seq: uint64(j + 1), Values: v, Text: texts[j]}
		}
		out[i] = st
	}
	return out, nil
}

// BenchLatency measures retrieval of the set's queries (their embedding included) in
// mode r against streams of a corpus s holds (Scaled's), k = 5, one stream per query in
// turn, and reports p50-µs and p99-µs.
func (e EvalSet) BenchLatency(b interface {
	Loop() bool
	Fatal(...any)
	ReportMetric(float64, string)
}, s persistence.VectorStore, embed Embed, r persistence.Retrieval, streams int) {
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		q := e.Queries[i%len(e.Queries)]
		t0 := time.Now()
		vecs, err := embed(ctx, []string{q.Query})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := persistence.HybridSearch(ctx, s, r, Tenant, fmt.Sprintf("scaled-%d", i%streams), q.Query, vecs[0], 5); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	b.ReportMetric(float64(Percentile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(Percentile(lat, 0.99).Microseconds()), "p99-µs")
}
