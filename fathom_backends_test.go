package fathom_test

import (
	"testing"

	"github.com/fathom-agents/fathom"
)

// TestValidateListsTheBackendsOfEachKind: an unknown name of each kind of backend
// (journal, model API, embedder, vector store, artifact store) fails Config.Validate
// with the registered names.
func TestValidateListsTheBackendsOfEachKind(t *testing.T) {
	for _, c := range []struct {
		edit func(*fathom.Config)
		want string
	}{
		{func(c *fathom.Config) { c.Journal = "sqlite" }, `unknown journal "sqlite" (want bolt, memory, postgres)`},
		{func(c *fathom.Config) { c.LLM.API = "gemini" }, `unknown LLM API "gemini" (want anthropic or openai)`},
		{func(c *fathom.Config) { c.Memory.Embedder = "word2vec" }, `memory: unknown embedder "word2vec" (want glove, hash, openai)`},
		{func(c *fathom.Config) { c.Memory.VectorStore = "faiss" }, `memory: unknown vector store "faiss" (want memory, pgvector)`},
		{func(c *fathom.Config) { c.Artifacts.Name = "nfs" }, `unknown artifact store "nfs" (want filesystem, s3)`},
	} {
		cfg := fathom.DefaultConfig()
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != "fathom: config: "+c.want {
			t.Errorf("Validate() = %v, want fathom: config: %s", err, c.want)
		}
	}
}
