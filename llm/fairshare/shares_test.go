package fairshare_test

import (
	"testing"

	"github.com/fathom-agents/fathom/llm/fairshare"
)

// next returns the tenant Shares names, failing when it names none.
func next(t *testing.T, s *fairshare.Shares) string {
	t.Helper()
	tenant, ok := s.Next()
	if !ok {
		t.Fatal("Next: nobody waits, want a tenant")
	}
	return tenant
}

// grantNext grants the tenant Next names and returns it.
func grantNext(t *testing.T, s *fairshare.Shares) string {
	t.Helper()
	tenant := next(t, s)
	s.Grant(tenant)
	return tenant
}

// The next slot goes to the tenant holding the smallest share for its weight, whatever
// the passes; among equal shares to the smaller pass; among equal passes to the smaller
// name.
func TestSharesOrderByShareThenPassThenName(t *testing.T) {
	var s fairshare.Shares
	if _, ok := s.Next(); ok {
		t.Fatal("Next on empty Shares: a tenant, want none")
	}

	// Equal shares (none held) and passes (both start at the virtual time 0): by name.
	s.Wait("b", 1)
	s.Wait("a", 1)
	if got := next(t, &s); got != "a" {
		t.Fatalf("equal shares and passes: Next %q, want a (smaller name)", got)
	}

	// a takes three slots nobody waited for: its pass runs ahead, and it holds 3 for
	// weight 4 (0.75) against b's 0 for weight 1: b first, by share.
	var w fairshare.Shares
	for range 3 {
		w.Take("a", 4)
	}
	w.Wait("a", 4)
	w.Wait("b", 1)
	if got := next(t, &w); got != "b" {
		t.Fatalf("a holds 3/4, b 0/1: Next %q, want b", got)
	}
	w.Grant("b") // b now holds 1/1 (1.0) > a's 0.75: a first, although its pass is larger
	if got := next(t, &w); got != "a" {
		t.Fatalf("a holds 3/4, b 1/1: Next %q, want a (smaller share, larger pass)", got)
	}

	// Equal shares, different passes: the smaller pass first, although its name is larger.
	var p fairshare.Shares
	p.Wait("a", 1)
	p.Wait("a", 1)
	p.Wait("z", 1)
	if got := grantNext(t, &p); got != "a" {
		t.Fatalf("equal shares and passes: granted %q, want a", got)
	}
	p.Release("a") // a holds none again, as z, but its pass is one grant ahead
	if got := next(t, &p); got != "z" {
		t.Fatalf("equal shares, z's pass smaller: Next %q, want z", got)
	}
}

// While every tenant stays backlogged, grants follow the weights (2:1), and a tenant
// that returns after idling starts at the virtual time: it saves up no credit and
// gets no run of grants ahead of the others.
func TestSharesReturningTenantStartsAtVirtualTime(t *testing.T) {
	var s fairshare.Shares
	s.Wait("a", 2)
	s.Wait("b", 1)
	s.Wait("a", 2)
	s.Wait("b", 1)
	// Each grant's slot is given back at once (calls of equal length), so shares stay
	// equal and the passes decide.
	var got []string
	for range 30 {
		tenant := grantNext(t, &s)
		s.Release(tenant)
		s.Wait(tenant, map[string]int{"a": 2, "b": 1}[tenant])
		got = append(got, tenant)
	}
	count := map[string]int{}
	for _, tenant := range got {
		count[tenant]++
	}
	if count["a"] != 20 || count["b"] != 10 {
		t.Fatalf("30 grants at weights 2:1: %v (%v), want 20:10", count, got)
	}

	// c is backlogged for the first time now, far into the virtual time: it gets its
	// share (weight 1 of 4), not every slot until its pass catches up from 0.
	s.Wait("c", 1)
	s.Wait("c", 1)
	got = got[:0]
	for range 8 {
		tenant := grantNext(t, &s)
		s.Release(tenant)
		s.Wait(tenant, map[string]int{"a": 2, "b": 1, "c": 1}[tenant])
		got = append(got, tenant)
	}
	count = map[string]int{}
	for _, tenant := range got {
		count[tenant]++
	}
	if count["a"] != 4 || count["b"] != 2 || count["c"] != 2 {
		t.Fatalf("8 grants after c joined at weights 2:1:1: %v (%v), want 4:2:2", count, got)
	}
}

// A tenant is remembered only while it holds or waits: Cancel and Release forget it,
// so the map stays bounded by what is held and waiting, however many tenants came.
func TestSharesForgetIdleTenants(t *testing.T) {
	var s fairshare.Shares
	for i := range 1000 {
		tenant := string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		s.Wait(tenant, 1)
		if i%2 == 0 {
			s.Cancel(tenant)
			continue
		}
		s.Grant(tenant)
		s.Release(tenant)
		s.Take(tenant, 1)
		s.Release(tenant)
	}
	if n := s.Tenants(); n != 0 {
		t.Fatalf("after every waiter left and every slot came back: %d tenants remembered, want 0", n)
	}
	s.Wait("a", 1)
	s.Take("b", 1)
	if n := s.Tenants(); n != 2 {
		t.Fatalf("one waiting, one holding: %d tenants, want 2", n)
	}
	s.Release("a") // holds nothing: does nothing
	s.Cancel("b")  // waits for nothing: does nothing
	if n := s.Tenants(); n != 2 {
		t.Fatalf("Release and Cancel of nothing: %d tenants, want 2", n)
	}
	s.Cancel("a")
	s.Release("b")
	if _, ok := s.Next(); ok || s.Tenants() != 0 {
		t.Fatalf("all gone: %d tenants remembered, Next ok %v", s.Tenants(), ok)
	}
}
