package session

import "github.com/fathom-agents/fathom/llm"

// checkPrice warns, once per model per process, when the model that answered a call
// (answered, else the session's model: the one core prices the call with) has no price
// in the node's table (core.Config.Prices): the call's cost_usd is then 0.
func (d *Deps) checkPrice(answered, session string) {
	model := answered
	if model == "" {
		model = session
	}
	if d.Config.Prices == nil {
		return // pricing is off: no call has a price
	}
	llm.WarnUnpriced(d.Logger, d.Config.Prices, model)
}
