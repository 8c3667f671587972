// Package vectormem is the exact in-process persistence.VectorStore (and
// persistence.TextSearcher: a BM25 inverted index per stream, textindex.go), the
// embedded default: per tenant and stream (keyed by both), the vectors are kept
// normalised, one []float32 each (or, for a sparse vector such as the hash embedder's,
// only its non-zero entries: the same floats, so the same scores), and a search is a
// full scan (dot products, which equal cosine similarities on unit vectors) through a
// bounded min-heap of the best k. Exact, no index to build or tune; a scan of 10,000 ×
// 1,536 floats takes a few milliseconds, far more than a session holds.
//
// Vectors live in memory only: rebuild them from the journal's messages (or re-embed)
// after a restart, as a projection.
package vectormem

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fathom-agents/fathom/persistence"
)

// Store is the exact in-memory vector store. It is safe for concurrent use: searches
// run in parallel, upserts exclude them.
type Store struct {
	dims int

	mu      sync.RWMutex
	streams map[streamKey]*stream
	closed  bool
	// counts is the text index's scratch map (textIndex.set), used under mu's write lock.
	counts map[string]int32
	// norm is Upsert's scratch vector (a normalised vector before it is packed), used
	// under mu's write lock.
	norm []float32
	// metas interns the rows' metadata (shared read-only, see persistence.VectorHit):
	// every message of every session has one of a few, such as {"role": "user"}, and a
	// map of its own per row cost more than the row's other fields. Bounded by
	// maxInterned; past that, a row gets a copy of its own.
	metas map[string]map[string]string
}

// maxInterned bounds Store.metas, and maxInternedMeta the size of an interned map (its
// keys' and values' bytes).
const (
	maxInterned     = 256
	maxInternedMeta = 128
)

// streamKey names a stream of a tenant.
type streamKey struct{ tenant, stream string }

var (
	_ persistence.TextSearcher = (*Store)(nil)
	_ persistence.VectorSeqs   = (*Store)(nil)
)

// stream holds one stream's vectors: row i is vecs[i], for seqs[i].
//
// Every session embeds each of its messages as it goes, so rows are added all the time:
// one growing []float32 of all rows made a new row now and then a copy of all the rows
// before it, in fresh, zeroed, page-faulting memory (a twentieth of a step's CPU). A row
// of its own is one small allocation that never moves.
type stream struct {
	seqs []uint64
	vecs []vec
	meta []map[string]string
	rows map[uint64]int
	text textIndex
}

// New returns an empty store of dims-dimensional vectors.
func New(dims int) (*Store, error) {
	if dims < 1 {
		return nil, fmt.Errorf("vectormem: %w: dimensions must be positive, got %d", persistence.ErrInvalid, dims)
	}
	return &Store{dims: dims, streams: map[streamKey]*stream{}, counts: map[string]int32{}, metas: map[string]map[string]string{}}, nil
}

// vec is one stored, normalised vector: dense (data is the whole vector) or sparse
// (data's first half are the non-zero entries, its second half their indices, as the
// bits of a float32; every other entry is +0). A sparse row holds exactly the dense
// row's floats, so a scan's dot products are the same, bit for bit. One allocation
// either way.
type vec struct {
	data   []float32
	sparse bool
}

// pack stores the normalised vector v (which it does not keep) in old's memory when it
// fits: sparse when that takes less memory (a non-zero entry costs 8 bytes, a dense one
// 4), else dense. Zero is +0: a -0 is kept as an entry.
func pack(old vec, v []float32) vec {
	nz := 0
	for _, f := range v {
		if math.Float32bits(f) != 0 {
			nz++
		}
	}
	if 2*nz >= len(v) {
		return vec{data: append(old.data[:0], v...)}
	}
	out := vec{data: slices.Grow(old.data[:0], 2*nz)[:2*nz], sparse: true}
	j := 0
	for i, f := range v {
		if math.Float32bits(f) != 0 {
			out.data[j], out.data[nz+j] = f, math.Float32frombits(uint32(i))
			j++
		}
	}
	return out
}

// dot is Dot(v, q) for the vector v stands for. scratch (dims zeros, left zero) is where
// a sparse vector is spread out for Dot, so that the sum is the dense one's.
func (v vec) dot(q, scratch []float32) float32 {
	if !v.sparse {
		return Dot(v.data, q)
	}
	nz := len(v.data) / 2
	vals, idx := v.data[:nz], v.data[nz:]
	for i, at := range idx {
		scratch[math.Float32bits(at)] = vals[i]
	}
	d := Dot(scratch, q)
	for _, at := range idx {
		scratch[math.Float32bits(at)] = 0
	}
	return d
}

// intern returns the store's shared copy of meta (a copy of its own when meta is too
// large or the store interns too many). Called under mu's write lock.
func (s *Store) intern(meta map[string]string) map[string]string {
	if meta == nil {
		return nil
	}
	size := 0
	for k, v := range meta {
		size += len(k) + len(v)
	}
	if size > maxInternedMeta {
		return maps.Clone(meta)
	}
	keys := slices.Sorted(maps.Keys(meta))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Quote(k))
		b.WriteString(strconv.Quote(meta[k]))
	}
	if m, ok := s.metas[b.String()]; ok {
		return m
	}
	m := maps.Clone(meta)
	if len(s.metas) < maxInterned {
		s.metas[b.String()] = m
	}
	return m
}

// Dimensions implements persistence.VectorStore.
func (s *Store) Dimensions() int { return s.dims }

// Upsert implements persistence.VectorStore. Vectors are copied and normalised.
func (s *Store) Upsert(ctx context.Context, tenant, name string, vecs []persistence.Vector) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := persistence.ValidateUpsert(tenant, name, vecs, s.dims); err != nil {
		return fmt.Errorf("vectormem: upsert: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("vectormem: upsert: %w", persistence.ErrClosed)
	}
	key := streamKey{tenant, name}
	st := s.streams[key]
	if st == nil {
		st = &stream{rows: map[uint64]int{}}
		s.streams[key] = st
	}
	// The rows replaced lose their postings in one pass over the text index.
	var replaced []int
	for _, v := range vecs {
		if row, ok := st.rows[v.Seq]; ok {
			replaced = append(replaced, row)
		}
	}
	st.text.forget(replaced)
	for _, v := range vecs {
		row, ok := st.rows[v.Seq]
		if !ok {
			row = len(st.seqs)
			st.rows[v.Seq] = row
			st.seqs = append(st.seqs, v.Seq)
			st.meta = append(st.meta, nil)
			st.vecs = append(st.vecs, vec{})
		}
		if s.norm == nil {
			s.norm = make([]float32, s.dims)
		}
		persistence.NormalizeInto(s.norm, v.Values)
		st.vecs[row] = pack(st.vecs[row], s.norm)
		st.meta[row] = s.intern(v.Meta)
		st.text.set(row, v.Text, s.counts)
	}
	st.text.prune()
	return nil
}

// Search implements persistence.VectorStore: an exact scan.
func (s *Store) Search(ctx context.Context, tenant, name string, query []float32, k int) ([]persistence.VectorHit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := persistence.ValidateSearch(tenant, name, query, k, s.dims); err != nil {
		return nil, fmt.Errorf("vectormem: search: %w", err)
	}
	q := persistence.Normalize(query)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("vectormem: search: %w", persistence.ErrClosed)
	}
	st := s.streams[streamKey{tenant, name}]
	if st == nil {
		return nil, nil
	}
	h := make(minHeap, 0, min(k, len(st.seqs)))
	var scratch []float32
	for row, v := range st.vecs {
		if v.sparse && scratch == nil {
			scratch = make([]float32, s.dims)
		}
		h.offer(row, v.dot(q, scratch))
	}
	top := h.sorted()
	out := make([]persistence.VectorHit, len(top))
	for i, h := range top {
		// Meta is shared read-only (persistence.VectorHit): Upsert stores a copy and
		// replaces it, never writes into it.
		out[i] = persistence.VectorHit{Seq: st.seqs[h.Row], Score: h.Score, Meta: st.meta[h.Row]}
	}
	// TopK breaks ties by row; the contract breaks them by Seq.
	slices.SortStableFunc(out, func(a, b persistence.VectorHit) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out, nil
}

// SearchText implements persistence.TextSearcher: BM25 over the stream's inverted
// index (textIndex).
func (s *Store) SearchText(ctx context.Context, tenant, name, query string, k int) ([]persistence.VectorHit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := persistence.ValidateTextSearch(tenant, name, k); err != nil {
		return nil, fmt.Errorf("vectormem: search text: %w", err)
	}
	terms := persistence.QueryTerms(query)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("vectormem: search text: %w", persistence.ErrClosed)
	}
	st := s.streams[streamKey{tenant, name}]
	if st == nil || len(terms) == 0 {
		return nil, nil
	}
	top := st.text.search(terms, k)
	out := make([]persistence.VectorHit, len(top))
	for i, h := range top {
		out[i] = persistence.VectorHit{Seq: st.seqs[h.Row], Score: h.Score, Meta: st.meta[h.Row]}
	}
	slices.SortStableFunc(out, func(a, b persistence.VectorHit) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out, nil
}

// StoredSeqs implements persistence.VectorSeqs.
func (s *Store) StoredSeqs(ctx context.Context, tenant, name string, among []uint64) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := persistence.ValidateStoredSeqs(tenant, name); err != nil {
		return nil, fmt.Errorf("vectormem: stored seqs: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("vectormem: stored seqs: %w", persistence.ErrClosed)
	}
	st := s.streams[streamKey{tenant, name}]
	if st == nil {
		return nil, nil
	}
	var out []uint64
	if among == nil {
		out = slices.Clone(st.seqs)
	} else {
		for _, seq := range among {
			if _, ok := st.rows[seq]; ok {
				out = append(out, seq)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// DeleteStream implements persistence.VectorStore.
func (s *Store) DeleteStream(ctx context.Context, tenant, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := persistence.ValidateTenant(tenant); err != nil {
		return fmt.Errorf("vectormem: delete stream: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("vectormem: delete stream: %w", persistence.ErrClosed)
	}
	delete(s.streams, streamKey{tenant, name})
	return nil
}

// Close implements persistence.VectorStore: it drops every vector.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("vectormem: close: %w", persistence.ErrClosed)
	}
	s.closed, s.streams = true, nil
	return nil
}

// Hit is one TopK result: a row of the matrix and its dot product with the query.
type Hit struct {
	Row   int
	Score float32
}

// TopK returns the k rows of data (row-major, dims columns) with the largest dot
// product with q, best first (ties: lower row first). On unit vectors the dot product is
// the cosine similarity. It allocates only the heap of k hits.
func TopK(data []float32, dims int, q []float32, k int) []Hit {
	n := len(data) / dims
	k = min(k, n)
	if k <= 0 {
		return nil
	}
	h := make(minHeap, 0, k)
	q = q[:dims]
	for row := 0; row < n; row++ {
		h.offer(row, Dot(data[row*dims:(row+1)*dims:(row+1)*dims], q))
	}
	return h.sorted()
}

// offer gives h a row's score: h keeps the best cap(h) rows offered (offered in
// increasing row order, an equal score keeps the earlier row).
func (h *minHeap) offer(row int, score float32) {
	if len(*h) < cap(*h) {
		h.push(Hit{Row: row, Score: score})
	} else if len(*h) > 0 && score > (*h)[0].Score {
		(*h)[0] = Hit{Row: row, Score: score}
		h.down(0)
	}
}

// sorted empties h into its hits, best first.
func (h *minHeap) sorted() []Hit {
	if len(*h) == 0 {
		return nil
	}
	out := make([]Hit, len(*h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = h.pop()
	}
	return out
}

// Dot returns the dot product of a and b (len(b) ≥ len(a)). On amd64 with AVX2 and FMA
// it runs in dot_amd64.s (four 8-lane fused multiply-add accumulators: memory speed);
// elsewhere in dotGo.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	if useAVX2 && len(a) >= 8 {
		return dotAVX2(a, b)
	}
	return dotGo(a, b)
}

// dotGo is Dot in Go, unrolled eight ways into four accumulators so the loop runs at
// memory speed rather than add latency.
func dotGo(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0]*bb[0] + aa[4]*bb[4]
		s1 += aa[1]*bb[1] + aa[5]*bb[5]
		s2 += aa[2]*bb[2] + aa[6]*bb[6]
		s3 += aa[3]*bb[3] + aa[7]*bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// minHeap keeps the k best hits seen so far with the worst at the root. "Worse" is a
// lower score, or an equal score at a higher row (so ties keep the lower rows).
type minHeap []Hit

func worse(a, b Hit) bool { return a.Score < b.Score || (a.Score == b.Score && a.Row > b.Row) }

func (h *minHeap) push(x Hit) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !worse(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *minHeap) pop() Hit {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h minHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && worse(h[r], h[l]) {
			m = r
		}
		if !worse(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
