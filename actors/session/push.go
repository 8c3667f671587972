package session

import (
	"fmt"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// SetPushConfig sets or removes one of the session's push configs (A2A push
// notifications, core/push.go). The config's token and credentials are sealed with the
// node's webhook secret here, before anything is decided or recorded. Idempotent by
// command id.
func (g *Grain) SetPushConfig(req *messages.SetPushConfigRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "SetPushConfig")
	sealed := &messages.SetPushConfigRequest{Caller: req.GetCaller(), CommandId: req.GetCommandId(), Delete: req.GetDelete(),
		NotifyCurrent: req.GetNotifyCurrent(), Config: &messages.PushConfig{
			Id: req.GetConfig().GetId(), Url: req.GetConfig().GetUrl(), AuthScheme: req.GetConfig().GetAuthScheme()}}
	if s := g.deps.Webhooks; s != nil && !req.GetDelete() {
		var err error
		if sealed.Config.SealedToken, err = s.Seal(req.GetToken()); err != nil {
			return nil, grainError(fmt.Errorf("seal the push config's token: %w", err))
		}
		if cred := req.GetCredentials(); cred != "" {
			if sealed.Config.SealedCredentials, err = s.Seal(req.GetConfig().GetAuthScheme() + " " + cred); err != nil {
				return nil, grainError(fmt.Errorf("seal the push config's credentials: %w", err))
			}
		}
	}
	return g.command(ctx, sealed, false)
}
