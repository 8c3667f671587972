package config

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// TenantLimits are one tenant's quotas and fair share (0 means unlimited for every
// limit):
//
//	tenant_defaults:                 # every tenant not listed under tenants
//	  weight: 1
//	  llm_calls_per_minute: 120
//	tenants:
//	  acme: {weight: 3, llm_calls_per_minute: 600}
//	  beta: {max_running_sessions: 5}
//
// A tenant listed under tenants takes tenant_defaults' value for every key it does not
// set; each tenant not listed gets a budget of tenant_defaults' size of its own.
type TenantLimits struct {
	// Weight is the tenant's share of each model endpoint's call slots
	// (--llm-max-concurrent) against the other tenants' weights: 1 to MaxTenantWeight,
	// default 1.
	Weight int
	// LLMCallsPerMinute limits the tenant's LLM calls on each endpoint; calls over it
	// wait, they never fail.
	LLMCallsPerMinute int
	// MaxRunningSessions bounds the tenant's sessions running at once.
	MaxRunningSessions int
	// ToolCallsPerMinute limits the tenant's tool calls.
	ToolCallsPerMinute int
	// MaxTokensPerDay bounds the tenant's tokens (input + output) per UTC day.
	MaxTokensPerDay uint64
	// MaxCostUSDPerDay bounds the tenant's model cost per UTC day, in US dollars.
	MaxCostUSDPerDay float64
	// MaxArtifactBytes bounds the bytes of artifacts the tenant's sessions write per UTC
	// day (every write counts).
	MaxArtifactBytes uint64
	// StartQueueTimeout is how long a start over MaxRunningSessions waits for one of the
	// tenant's sessions to end before it is refused (0: refused at once).
	StartQueueTimeout time.Duration
	// Line is where the entry starts in the file (0 for the built-in default).
	Line int
}

// MaxStartQueueTimeout bounds start_queue_timeout.
const MaxStartQueueTimeout = 10 * time.Minute

// MaxTenantWeight is the largest weight a tenant may have.
const MaxTenantWeight = 1000

// MaxTenants bounds the tenants section (each named tenant is a metrics label value).
const MaxTenants = 1000

// OtherTenant is the metrics label of every tenant the tenants section does not list,
// so it cannot name a tenant.
const OtherTenant = "other"

// DefaultTenantLimits are the limits of tenants when tenant_defaults is not set:
// weight 1, nothing limited.
var DefaultTenantLimits = TenantLimits{Weight: 1}

// tenantKeys are an entry's keys, each setting one field.
// tenantKey is one key of a tenant entry: how to parse it into its field, and the field
// (overlay copies it from an entry that sets the key).
type tenantKey struct {
	field func(l *TenantLimits) any
	parse func(p *parser, l *TenantLimits, v *yaml.Node, path string) error
}

var tenantKeys = map[string]tenantKey{
	"weight": {field: func(l *TenantLimits) any { return &l.Weight }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		n, err := p.uintIn(v, path, 1, MaxTenantWeight)
		l.Weight = int(n)
		return err
	}},
	"llm_calls_per_minute": {field: func(l *TenantLimits) any { return &l.LLMCallsPerMinute }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		n, err := p.uintIn(v, path, 0, math.MaxInt32)
		l.LLMCallsPerMinute = int(n)
		return err
	}},
	"max_running_sessions": {field: func(l *TenantLimits) any { return &l.MaxRunningSessions }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		n, err := p.uintIn(v, path, 0, math.MaxInt32)
		l.MaxRunningSessions = int(n)
		return err
	}},
	"tool_calls_per_minute": {field: func(l *TenantLimits) any { return &l.ToolCallsPerMinute }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		n, err := p.uintIn(v, path, 0, math.MaxInt32)
		l.ToolCallsPerMinute = int(n)
		return err
	}},
	"max_tokens_per_day": {field: func(l *TenantLimits) any { return &l.MaxTokensPerDay }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		n, err := p.uintIn(v, path, 0, math.MaxInt64)
		l.MaxTokensPerDay = n
		return err
	}},
	"max_cost_usd_per_day": {field: func(l *TenantLimits) any { return &l.MaxCostUSDPerDay }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		s, err := p.str(v, path)
		if err != nil {
			return err
		}
		f, perr := strconv.ParseFloat(s, 64)
		if perr != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return p.err(v, path, fmt.Sprintf("%q is not an amount of US dollars (0 or more)", s))
		}
		l.MaxCostUSDPerDay = f
		return nil
	}},
	"max_artifact_bytes": {field: func(l *TenantLimits) any { return &l.MaxArtifactBytes }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		n, err := p.uintIn(v, path, 0, math.MaxInt64)
		l.MaxArtifactBytes = n
		return err
	}}, "start_queue_timeout": {field: func(l *TenantLimits) any { return &l.StartQueueTimeout }, parse: func(p *parser, l *TenantLimits, v *yaml.Node, path string) error {
		s, err := p.str(v, path)
		if err != nil {
			return err
		}
		d, perr := time.ParseDuration(s)
		if perr != nil || d < 0 || d > MaxStartQueueTimeout {
			return p.err(v, path, fmt.Sprintf("%q is not a duration from 0s to %s", s, MaxStartQueueTimeout))
		}
		l.StartQueueTimeout = d
		return nil
	}},
}

// tenantEntry is a parsed entry: its limits and the keys it set.
type tenantEntry struct {
	limits TenantLimits
	set    map[string]bool
}

func init() {
	register("tenant_defaults", parseTenantDefaults) // per-tenant limits
	register("tenants", parseTenants)
	register("llm_max_concurrent", parseLLMMaxConcurrent)      // the endpoints' concurrent calls
	register("members_read_own_only", parseMembersReadOwnOnly) // a member reads only its own sessions (--members-read-own-only)
}

// parseTenantDefaults reads tenant_defaults: the limits of every tenant not listed.
func parseTenantDefaults(p *parser, f *File, key string, _, v *yaml.Node) error {
	e, err := p.tenantEntry(v, key)
	if err != nil {
		return err
	}
	f.tenantDefaults = e
	return nil
}

// parseTenants reads tenants: a mapping of tenant names to their limits.
func parseTenants(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind == yaml.MappingNode && len(v.Content)/2 > MaxTenants {
		return p.err(v, key, fmt.Sprintf("more than %d tenants", MaxTenants))
	}
	f.tenants = map[string]*tenantEntry{}
	return p.mapping(v, key, func(name string, kn, vn *yaml.Node) error {
		path := join(key, name)
		if err := checkTenantName(name); err != nil {
			return p.err(kn, path, err.Error())
		}
		e, err := p.tenantEntry(vn, path)
		if err != nil {
			return err
		}
		f.tenants[name] = e
		return nil
	})
}

// checkTenantName refuses names that cannot be a tenant of the file.
func checkTenantName(name string) error {
	if name == OtherTenant {
		return fmt.Errorf("%q is the metrics label of the tenants not listed; it cannot name one", OtherTenant)
	}
	if len(name) > 128 {
		return fmt.Errorf("tenant name longer than 128 bytes")
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("tenant name %q has a space or control character", name)
		}
	}
	return nil
}

// tenantEntry reads one {weight: ..., ...} mapping (an empty value sets nothing).
func (p *parser) tenantEntry(v *yaml.Node, path string) (*tenantEntry, error) {
	e := &tenantEntry{limits: TenantLimits{Line: v.Line}, set: map[string]bool{}}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return e, nil
	}
	err := p.mapping(v, path, func(k string, kn, vn *yaml.Node) error {
		key, ok := tenantKeys[k]
		if !ok {
			return p.err(kn, join(path, k), "unknown key (want "+keyList(tenantKeys)+")")
		}
		e.set[k] = true
		return key.parse(p, &e.limits, vn, join(path, k))
	})
	return e, err
}

// uintIn reads a whole number from lo to hi.
func (p *parser) uintIn(v *yaml.Node, path string, lo, hi uint64) (uint64, error) {
	s, err := p.str(v, path)
	if err != nil {
		return 0, err
	}
	n, perr := strconv.ParseUint(s, 10, 64)
	if perr != nil || n < lo || n > hi {
		return 0, p.err(v, path, fmt.Sprintf("%q is not a whole number from %d to %d", s, lo, hi))
	}
	return n, nil
}

// resolveTenants fills f.TenantDefaults and f.Tenants: the defaults over the built-in
// DefaultTenantLimits, each named tenant over the defaults.
func resolveTenants(f *File) {
	f.TenantDefaults = DefaultTenantLimits
	if d := f.tenantDefaults; d != nil {
		f.TenantDefaults = overlay(DefaultTenantLimits, d)
	}
	if f.tenants == nil {
		return
	}
	f.Tenants = make(map[string]TenantLimits, len(f.tenants))
	for name, e := range f.tenants {
		f.Tenants[name] = overlay(f.TenantDefaults, e)
	}
}

// overlay returns base with the keys e set taken from e.
func overlay(base TenantLimits, e *tenantEntry) TenantLimits {
	out := base
	out.Line = e.limits.Line
	for k := range e.set {
		copyField(tenantKeys[k].field(&out), tenantKeys[k].field(&e.limits))
	}
	return out
}

// copyField sets *dst to *src; both point at the same field of two TenantLimits.
func copyField(dst, src any) {
	switch d := dst.(type) {
	case *int:
		*d = *src.(*int)
	case *uint64:
		*d = *src.(*uint64)
	case *float64:
		*d = *src.(*float64)
	case *time.Duration:
		*d = *src.(*time.Duration)
	default:
		panic(fmt.Sprintf("config: tenant limit field of type %T", dst))
	}
}

// TenantLimitsOf returns tenant's limits: its entry under tenants, else
// tenant_defaults.
func (f *File) TenantLimitsOf(tenant string) TenantLimits {
	if l, ok := f.Tenants[tenant]; ok {
		return l
	}
	return f.TenantDefaults
}

// TenantNames are the tenants the file lists (their own metrics label values).
func (f *File) TenantNames() []string {
	names := make([]string, 0, len(f.Tenants))
	for n := range f.Tenants {
		names = append(names, n)
	}
	return names
}

// parseLLMMaxConcurrent reads llm_max_concurrent: the calls in flight to each model
// endpoint, shared between tenants by weight (--llm-max-concurrent and env
// FATHOM_LLM_MAX_CONCURRENT take precedence; 0 is unlimited).
//
//	llm_max_concurrent: 50
func parseLLMMaxConcurrent(p *parser, f *File, key string, _, v *yaml.Node) error {
	n, err := p.uintIn(v, key, 0, math.MaxInt32)
	if err != nil {
		return err
	}
	f.LLMMaxConcurrent, f.LLMMaxConcurrentSet = int(n), true
	return nil
}

// parseMembersReadOwnOnly parses members_read_own_only: true or false.
func parseMembersReadOwnOnly(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode {
		return p.err(v, key, "want true or false")
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		return p.err(v, key, fmt.Sprintf("want true or false, not %q", v.Value))
	}
	f.MembersReadOwnOnly, f.MembersReadOwnOnlySet = b, true
	return nil
}
