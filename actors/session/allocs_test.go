package session

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// TestTemplateTokensHitCopiesNoTemplate: once a template's count is cached, looking it
// up again allocates nothing (the key is not a concatenation of model and template).
func TestTemplateTokensHitCopiesNoTemplate(t *testing.T) {
	d := &Deps{Config: DefaultConfig()}
	tmpl := strings.Repeat("You carry out one step of a plan and report what you did. ", 60)
	first := d.templateTokens("gpt-4o", tmpl)
	if got := testing.AllocsPerRun(100, func() {
		if n := d.templateTokens("gpt-4o", tmpl); n != first {
			t.Fatalf("cached count %d, first %d", n, first)
		}
	}); got != 0 {
		t.Fatalf("a cached template count costs %.0f allocations, want 0", got)
	}
}

// TestSpanIDsAreDerivedWithoutAllocating: a session's long-span ids stay what every node
// derives (sha256 of "fathom/span", the session id and the parts, NUL-separated) and
// deriving one allocates nothing.
func TestSpanIDsAreDerivedWithoutAllocating(t *testing.T) {
	h := sha256.Sum256([]byte("fathom/span\x00s-1\x00step\x00step-2\x003"))
	if got := stepSpanID("s-1", "step-2", 3, 0); string(got[:]) != string(h[:8]) {
		t.Fatalf("stepSpanID = %x, want %x", got, h[:8])
	}
	const id = "s-0f8fad5b-d9cb-469f-a165-70867728950e" // a session id as long as a UUID
	if got := testing.AllocsPerRun(100, func() { _ = stepSpanID(id, "step-12", 1, 0) }); got != 0 {
		t.Fatalf("stepSpanID costs %.0f allocations, want 0", got)
	}
}
