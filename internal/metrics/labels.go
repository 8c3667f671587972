package metrics

import (
	"context"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/fathom-agents/fathom/tools"
)

// The label values that stand for every value outside a bounded set.
const (
	// OtherModel is the model label of an LLM call whose model the node is not
	// configured with (a start request may name any model).
	OtherModel = "other"
	// UnknownTool is the tool label of a call to a tool the node has not registered
	// (the model may emit any name).
	UnknownTool = "unknown"
	// OtherErrorType is the error_type label of a tool error of no known type.
	OtherErrorType = "other"
)

// DefaultTenant is the tenant of sessions started without tenancy (the static tokens'),
// a label value of the session counters whatever the configuration names.
const DefaultTenant = "default"

// maxTenantLabels bounds the session counters' tenant label values.
const maxTenantLabels = 1002

// ToolErrorTypes are the values of fathom_tool_errors_total's error_type label, besides
// OtherErrorType.
var ToolErrorTypes = []string{
	string(tools.ErrValidation), string(tools.ErrExecution), string(tools.ErrTimeout),
	string(tools.ErrSandbox), string(tools.ErrPermission),
}

// allErrorTypes are the error_type label's values.
var allErrorTypes = append(slices.Clone(ToolErrorTypes), OtherErrorType)

// Labels bound the values of the recorder's labels: a value that comes from a client or
// a model is recorded only when the node knows it, so a caller cannot add a series.
type Labels struct {
	// Models are the node's configured models (its default, its fallbacks, its agents'
	// models). Their counters start at zero; an LLM call of any other model is recorded
	// under OtherModel.
	Models []string
	// PricedModels are more models recorded under their own name (the price table's):
	// a bounded list the operator controls. Their series are born at first use.
	PricedModels []string
	// Tools is the node's tool registry: a call to a tool it holds is recorded under the
	// tool's name (its counters start at zero), any other under UnknownTool. Nil means
	// every tool is unknown.
	Tools *tools.Registry
	// Tenants are the tenants the node is configured with: the session counters of a
	// session of one of them (and of DefaultTenant) carry its name as their tenant label,
	// of any other tenant OtherTenant, as the quota metrics do.
	Tenants []string
}

// labelSet is the recorder's view of Labels.
type labelSet struct {
	// tenants are the session counters' tenant label options, by tenant.
	tenants map[string]metric.MeasurementOption
	models  map[string]bool
	inits   []string // the models whose counters start at zero, OtherModel included
	tools   *tools.Registry
	// toolsSeen is the registry version + 1 whose tools' counters were started at zero.
	toolsSeen atomic.Uint64
}

func newLabelSet(l Labels) *labelSet {
	s := &labelSet{models: map[string]bool{}, tools: l.Tools, tenants: map[string]metric.MeasurementOption{}}
	for _, t := range append([]string{DefaultTenant, OtherTenant}, l.Tenants...) {
		if len(s.tenants) < maxTenantLabels || t == OtherTenant {
			s.tenants[t] = metric.WithAttributeSet(attribute.NewSet(attribute.String("tenant", t)))
		}
	}
	for _, m := range l.Models {
		if m != "" && !s.models[m] {
			s.models[m] = true
			s.inits = append(s.inits, m)
		}
	}
	for _, m := range l.PricedModels {
		if m != "" {
			s.models[m] = true
		}
	}
	s.inits = append(s.inits, OtherModel)
	return s
}

// model is the model label of model.
func (s *labelSet) model(model string) string {
	if s.models[model] {
		return model
	}
	return OtherModel
}

// tenant is the session counters' option for a session of tenant ("" is a session from
// before tenancy: DefaultTenant's).
func (s *labelSet) tenant(tenant string) metric.MeasurementOption {
	if tenant == "" {
		tenant = DefaultTenant
	}
	if o, ok := s.tenants[tenant]; ok {
		return o
	}
	return s.tenants[OtherTenant]
}

// tool is the tool label of name.
func (s *labelSet) tool(name string) string {
	if s.tools != nil {
		if _, ok := s.tools.Get(name); ok {
			return name
		}
	}
	return UnknownTool
}

// errorType is the error_type label of typ.
func errorType(typ string) string {
	if slices.Contains(ToolErrorTypes, typ) {
		return typ
	}
	return OtherErrorType
}

// zero starts every counter series of fixed labels at zero, so the first increment of
// each is an increase a query sees (increase() over a series born at 1 reads 0).
func (r *Recorder) zero() {
	ctx := context.Background()
	for _, o := range r.labels.tenants {
		r.started.Add(ctx, 0, o)
		r.completed.Add(ctx, 0, o)
		r.failed.Add(ctx, 0, o)
		r.cancelled.Add(ctx, 0, o)
	}
	r.stepRetries.Add(ctx, 0)
	for _, m := range r.labels.inits {
		r.llmTokens.Add(ctx, 0, r.attrs(attrKey{"model_type", m, "input"}, modelTypeAttrs))
		r.llmTokens.Add(ctx, 0, r.attrs(attrKey{"model_type", m, "output"}, modelTypeAttrs))
		r.llmCost.Add(ctx, 0, r.attrs(attrKey{"model", m, ""}, modelAttrs))
	}
	r.zeroTools()
}

// zeroTools starts the tool counters of every registered tool (and UnknownTool) at zero,
// again whenever the registry changed since (an MCP server's tools arrive later).
func (r *Recorder) zeroTools() {
	seen := uint64(1) // the registry's version + 1 whose tools start at zero; 0: none yet
	if reg := r.labels.tools; reg != nil {
		seen = reg.Version() + 1
	}
	if r.labels.toolsSeen.Load() == seen {
		return
	}
	names := []string{UnknownTool}
	if reg := r.labels.tools; reg != nil {
		for _, t := range reg.Tools() {
			names = append(names, t.Name())
		}
	}
	ctx := context.Background()
	for _, n := range names {
		r.toolCalls.Add(ctx, 0, r.attrs(attrKey{"tool", n, ""}, toolAttrs))
		r.toolRejections.Add(ctx, 0, r.attrs(attrKey{"tool", n, ""}, toolAttrs))
		for _, typ := range allErrorTypes {
			r.toolErrors.Add(ctx, 0, r.attrs(attrKey{"tool_error", n, typ}, toolErrorAttrs))
		}
	}
	r.labels.toolsSeen.Store(seen)
}
