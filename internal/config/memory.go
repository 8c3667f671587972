package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/persistence"
)

// Memory is the memory section: how the context's semantic slice is retrieved.
//
//	memory:
//	  retrieval: hybrid          # hybrid | vector | text
//	  retrieval_weights: 1/1     # VECTOR/TEXT weights of the fusion
//
// The flags --memory-retrieval and --memory-retrieval-weights (env
// FATHOM_MEMORY_RETRIEVAL, FATHOM_MEMORY_RETRIEVAL_WEIGHTS) take precedence.
type Memory struct {
	// Retrieval is memory.retrieval ("" when the file does not set it).
	Retrieval string
	// RetrievalWeights is memory.retrieval_weights as written ("" when not set).
	RetrievalWeights string
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
		default:
			return p.err(kn, path, "unknown key")
		}
		return nil
	})
}
