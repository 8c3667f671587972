package persistence

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fathom-agents/fathom/auth"
)

// ErrDimension is returned (wrapped) when a vector's length is not the store's
// dimension. Compare with errors.Is.
var ErrDimension = errors.New("vector store: wrong vector dimension")

// Vector is one stored embedding: the vector of one recorded message of a stream.
type Vector struct {
	// Seq identifies the vector in its stream: the sequence number of the event that
	// recorded the message.
	Seq uint64
	// Values is the embedding. Stores keep it normalised to unit length; it must have the
	// store's dimension and must not be all zeros.
	Values []float32
	// Meta is small free-form metadata returned with search hits (e.g. the role).
	Meta map[string]string
	// Text is the message's text, indexed for text search by a TextSearcher (its
	// Tokenize terms; the text itself is not kept). Empty: the message has no terms.
	Text string
}

// VectorHit is one search result.
type VectorHit struct {
	// Seq identifies the vector in its stream.
	Seq uint64
	// Score is the cosine similarity to the query, in [-1, 1]: higher is closer.
	Score float32
	// Meta is the vector's metadata. Callers must not modify it: a store may hand out
	// the map it keeps (the in-process store does, a search being on every model call).
	Meta map[string]string
}

// VectorStore keeps embeddings per tenant and stream (a session of the tenant) and finds
// the nearest ones by cosine similarity. The tenant is part of every vector's key (a key
// column, a map key), so a stream of one tenant never reaches another tenant's vectors,
// even under the same stream id. Implementations are safe for concurrent use and
// validate tenants and vectors the way ValidateUpsert and ValidateSearch do.
//
// A store that kept vectors before tenancy keeps those without a tenant; it finds them
// for their stream under any tenant (a stream id is a session id, which belongs to one
// tenant), and DeleteStream removes them with the tenant's.
type VectorStore interface {
	// Dimensions returns the length of every vector in the store.
	Dimensions() int

	// Upsert stores vecs in tenant's stream, replacing vectors with the same Seq,
	// atomically.
	Upsert(ctx context.Context, tenant, stream string, vecs []Vector) error

	// Search returns the k vectors of tenant's stream closest to query by cosine
	// similarity, best first (equal scores in increasing Seq order). An unknown stream
	// has no vectors. Approximate implementations (an HNSW index) may miss some of the
	// true top k.
	Search(ctx context.Context, tenant, stream string, query []float32, k int) ([]VectorHit, error)

	// DeleteStream removes every vector of tenant's stream. Deleting an unknown stream is
	// not an error.
	DeleteStream(ctx context.Context, tenant, stream string) error

	// Close releases the store's resources. Calls after Close return ErrClosed.
	Close() error
}

// VectorSeqs is a VectorStore that tells which messages of a stream it holds vectors
// for, so that whoever hands a stream's history to be embedded again embeds only the
// messages still missing (memory.EmbedJob.IfMissing: a session activated over a durable
// store, whose earlier embedding jobs may have been lost with a node or a failed
// round). Both stores of the project implement it.
type VectorSeqs interface {
	VectorStore
	// StoredSeqs returns, in increasing order and once each, the seqs of tenant's
	// stream that have a vector Search ranks: all of them, or with among non-nil only
	// those in among (an empty among has none). A vector Search does not rank (pgvector:
	// one of another dimension than the store's) is not stored; one kept before tenancy
	// is, for the stream under any tenant, as Search finds it. An unknown stream has
	// none.
	StoredSeqs(ctx context.Context, tenant, stream string, among []uint64) ([]uint64, error)
}

// ValidateStoredSeqs checks StoredSeqs arguments: a valid tenant and a non-empty stream.
func ValidateStoredSeqs(tenant, stream string) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	}
	return nil
}

// ValidateVector checks one vector the way every VectorStore must: the store's
// dimension, finite components, not all zeros (cosine similarity is undefined for a
// zero vector). Errors wrap ErrDimension or ErrInvalid.
func ValidateVector(v []float32, dims int) error {
	if len(v) != dims {
		return fmt.Errorf("%w: got %d, want %d", ErrDimension, len(v), dims)
	}
	nonZero := false
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: vector has a non-finite component", ErrInvalid)
		}
		if x != 0 {
			nonZero = true
		}
	}
	if !nonZero {
		return fmt.Errorf("%w: zero vector", ErrInvalid)
	}
	return nil
}

// ValidateTenant checks a vector store's tenant: a tenant name (auth.CheckTenant).
// Errors wrap ErrInvalid.
func ValidateTenant(tenant string) error {
	if err := auth.CheckTenant(tenant); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// ValidateSearch checks Search arguments: a valid tenant, a non-empty stream, k ≥ 1 and
// a valid query.
func ValidateSearch(tenant, stream string, query []float32, k, dims int) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	}
	if k < 1 {
		return fmt.Errorf("%w: k must be at least 1, got %d", ErrInvalid, k)
	}
	return ValidateVector(query, dims)
}

// ValidateUpsert checks Upsert arguments: a valid tenant, a non-empty stream and valid
// vectors.
func ValidateUpsert(tenant, stream string, vecs []Vector, dims int) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	}
	for _, v := range vecs {
		if err := ValidateVector(v.Values, dims); err != nil {
			return fmt.Errorf("vector %d: %w", v.Seq, err)
		}
	}
	return nil
}

// Normalize returns v scaled to unit length (a new slice). v must not be all zeros.
func Normalize(v []float32) []float32 {
	out := make([]float32, len(v))
	NormalizeInto(out, v)
	return out
}

// NormalizeInto writes v scaled to unit length into dst (len(dst) == len(v)).
func NormalizeInto(dst, v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		dst[i] = float32(float64(x) * inv)
	}
}
