package metrics

import (
	"slices"

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
	// models); an LLM call of any other model is recorded under OtherModel.
	Models []string
	// PricedModels are more models recorded under their own name (the price table's):
	// a bounded list the operator controls. Their series are born at first use.
	PricedModels []string
	// Tools is the node's tool registry: a call to a tool it holds is recorded under the
	// tool's name, any other under UnknownTool. Nil means
	// every tool is unknown.
	Tools *tools.Registry
}

// labelSet is the recorder's view of Labels.
type labelSet struct {
	models map[string]bool
	inits  []string // the configured models, OtherModel included
	tools  *tools.Registry
}

func newLabelSet(l Labels) *labelSet {
	s := &labelSet{models: map[string]bool{}, tools: l.Tools}
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
