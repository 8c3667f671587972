package fairshare

// stride is one grant's pass for weight 1: a pass grows by stride/weight per grant.
const stride = 1 << 20

// Shares is the weighted fair-share rule alone, without queues or locks: it counts
// each tenant's waiters and held slots and says which backlogged tenant the next slot
// goes to (see the package doc for the rule). Slots uses it under its mutex and the
// sandbox pool (actors/sandbox) from its actor; each keeps its own waiters, reports
// every one of them to Shares (Wait, Grant, Cancel) and every slot (Take, Grant,
// Release), and hands a slot to its first waiter of the tenant Next names.
//
// A tenant is remembered while it holds a slot or has a waiter, and forgotten when it
// has neither, so Shares holds at most as many tenants as slots held plus waiters. The
// zero Shares is ready to use; it is not safe for concurrent use.
type Shares struct {
	// vtime is the pass of the last grant to a waiter: a newly backlogged tenant starts
	// there.
	vtime   uint64
	tenants map[string]*share
}

// share is one remembered tenant.
type share struct {
	weight uint64
	// pass is the virtual time of the tenant's next grant.
	pass    uint64
	held    int // slots the tenant holds
	waiting int // the tenant's waiters
}

// tenant returns tenant's entry, adding one at the current virtual time with weight
// (at least 1) if tenant is not remembered.
func (s *Shares) tenant(tenant string, weight int) *share {
	if t := s.tenants[tenant]; t != nil {
		return t
	}
	if s.tenants == nil {
		s.tenants = map[string]*share{}
	}
	t := &share{weight: uint64(max(1, weight)), pass: s.vtime}
	s.tenants[tenant] = t
	return t
}

// forget drops tenant's entry once it neither holds nor waits for a slot.
func (s *Shares) forget(tenant string, t *share) {
	if t.held <= 0 && t.waiting <= 0 {
		delete(s.tenants, tenant)
	}
}

// Wait counts one more waiter of tenant. weight (values below 1 count as 1) is used
// when tenant is not remembered yet; a remembered tenant keeps its weight. A tenant
// that had no waiter becomes backlogged at the current virtual time at the earliest,
// so an idle tenant saves up no credit.
func (s *Shares) Wait(tenant string, weight int) {
	t := s.tenant(tenant, weight)
	if t.waiting == 0 {
		t.pass = max(t.pass, s.vtime)
	}
	t.waiting++
}

// Next returns the backlogged tenant (one with a waiter) the next slot goes to: the one
// holding the smallest share of slots for its weight (held/weight), then the one with
// the smallest pass, then the smallest name. ok is false when nobody waits.
func (s *Shares) Next() (tenant string, ok bool) {
	var next *share
	for name, t := range s.tenants {
		if t.waiting > 0 && (next == nil || t.before(name, next, tenant)) {
			next, tenant = t, name
		}
	}
	return tenant, next != nil
}

// before reports whether t (named name) goes before u (named uname).
func (t *share) before(name string, u *share, uname string) bool {
	a, b := uint64(t.held)*u.weight, uint64(u.held)*t.weight
	if a != b {
		return a < b
	}
	if t.pass != u.pass {
		return t.pass < u.pass
	}
	return name < uname
}

// Grant gives one waiter of tenant a slot: the virtual time becomes tenant's pass, and
// the pass advances by one grant for its weight. It does nothing when tenant has no
// waiter.
func (s *Shares) Grant(tenant string) {
	t := s.tenants[tenant]
	if t == nil || t.waiting == 0 {
		return
	}
	t.waiting--
	s.vtime = t.pass
	s.hold(t)
}

// Take gives tenant a slot nobody waited for (one was free and no one waited): tenant's
// pass advances as for a grant, the virtual time stays. weight is used as by Wait.
func (s *Shares) Take(tenant string, weight int) {
	s.hold(s.tenant(tenant, weight))
}

// hold counts a slot t now holds and advances its pass by one grant.
func (s *Shares) hold(t *share) {
	t.held++
	t.pass += stride / t.weight
}

// Cancel counts one waiter of tenant leaving without a slot; a tenant left with
// nothing held or waiting is forgotten. It does nothing when tenant has no waiter.
func (s *Shares) Cancel(tenant string) {
	if t := s.tenants[tenant]; t != nil && t.waiting > 0 {
		t.waiting--
		s.forget(tenant, t)
	}
}

// Release counts a slot tenant held given back; a tenant left with nothing held or
// waiting is forgotten. It does nothing when tenant holds no slot.
func (s *Shares) Release(tenant string) {
	if t := s.tenants[tenant]; t != nil && t.held > 0 {
		t.held--
		s.forget(tenant, t)
	}
}

// Tenants returns how many tenants are remembered (holding a slot or waiting).
func (s *Shares) Tenants() int { return len(s.tenants) }
