package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// SetPushConfig sets or removes one of the session's push configs (A2A push
// notifications, core/push.go). The config's token and credentials are sealed with the
// node's webhook secret here, before anything is recorded. Idempotent by command id.
func (g *Grain) SetPushConfig(req *messages.SetPushConfigRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "SetPushConfig")
	return g.command(ctx, req, func() ([]*messages.Event, error) {
		sealed := &messages.SetPushConfigRequest{CommandId: req.GetCommandId(), Delete: req.GetDelete(), NotifyCurrent: req.GetNotifyCurrent(), Config: &messages.PushConfig{
			Id: req.GetConfig().GetId(), Url: req.GetConfig().GetUrl(), AuthScheme: req.GetConfig().GetAuthScheme()}}
		if s := g.deps.Webhooks; s != nil && !req.GetDelete() {
			var err error
			if sealed.Config.SealedToken, err = s.Seal(req.GetToken()); err != nil {
				return nil, err
			}
			if cred := req.GetCredentials(); cred != "" {
				if sealed.Config.SealedCredentials, err = s.Seal(req.GetConfig().GetAuthScheme() + " " + cred); err != nil {
					return nil, err
				}
			}
		}
		return core.DecideSetPushConfig(g.state, sealed, g.deps.Config, g.deps.Now())
	})
}
