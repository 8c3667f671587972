package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/persistence"
)

// Memory is the memory section: how the context's semantic slice is retrieved.
//
//	memory:
//	  retrieval: hybrid          # hybrid | vector | text
//	  retrieval_weights: 1/1     # VECTOR/TEXT weights of the fusion
//	  long_term: true            # long-term memory: remember, recall, forget
//	  ttl: 720h                  # how long a memory lives (default: until deleted)
//
// The flags --memory-retrieval, --memory-retrieval-weights, --long-term-memory and
// --memory-ttl (env FATHOM_MEMORY_RETRIEVAL, FATHOM_MEMORY_RETRIEVAL_WEIGHTS,
// FATHOM_LONG_TERM_MEMORY, FATHOM_MEMORY_TTL) take precedence.
type Memory struct {
	// Retrieval is memory.retrieval ("" when the file does not set it).
	Retrieval string
	// RetrievalWeights is memory.retrieval_weights as written ("" when not set).
	RetrievalWeights string
	// LongTerm is memory.long_term ("" when not set, else "true" or "false").
	LongTerm string
	// TTL is memory.ttl as written ("" when not set): a duration such as 720h or 30d.
	TTL string
}

func init() {
	register("memory", parseMemory)
}

// parseMemory reads the memory section.
func parseMemory(p *parser, f *File, key string, _, v *yaml.Node) error {
	return p.mapping(v, key, func(k string, kn, vn *yaml.Node) error {
		path := join(key, k)
		s, err := p.str(vn, path)
		if err != nil {
			return err
		}
		switch k {
		case "retrieval":
			if err := (persistence.Retrieval{Mode: s}).Validate(); err != nil || s == "" {
				return p.err(vn, path, "want hybrid, vector or text")
			}
			f.Memory.Retrieval = s
		case "retrieval_weights":
			if _, _, err := persistence.ParseRetrievalWeights(s); err != nil {
				return p.err(vn, path, "want VECTOR/TEXT, two non-negative numbers not both 0, e.g. 1/1")
			}
			f.Memory.RetrievalWeights = s
		case "long_term":
			if s != "true" && s != "false" {
				return p.err(vn, path, "want true or false")
			}
			f.Memory.LongTerm = s
		case "ttl":
			if _, err := ParseTTL(s); err != nil {
				return p.err(vn, path, err.Error())
			}
			f.Memory.TTL = s
		default:
			return p.err(kn, path, "unknown key")
		}
		return nil
	})
}

// ParseTTL reads a memory TTL: a positive Go duration (720h) or a number of days (30d).
func ParseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		n, nerr := strconv.Atoi(days)
		d, err = time.Duration(n)*24*time.Hour, nerr
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration (e.g. 720h or 30d)", s)
	}
	return d, nil
}
