package a2a

import (
	"context"
	"encoding/json"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/messages"
)

// Push notifications (A2A §3.1.7-3.1.10, §4.3): a task's push configs are its session's
// (SetPushConfig: push_config_set, push_config_deleted in the journal). Each
// notification the session's webhooks get (completed, failed, canceled, input-required)
// is also POSTed to every push config, as a StreamResponse with the task's status update,
// with the config's authentication (Authorization: <scheme> <credentials>) and token
// (X-A2A-Notification-Token), by the node's webhook delivery: at least once, retried
// with backoff, recorded as webhook_delivered / webhook_failed, resumed after a node's
// death. The token and the credentials are write-only: they are sealed in the journal
// and never read back.

// AuthenticationInfo is a push config's authentication: the HTTP scheme ("Bearer") and
// its credentials.
type AuthenticationInfo struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// TaskPushNotificationConfig is a task's push config.
type TaskPushNotificationConfig struct {
	Tenant         string              `json:"tenant,omitempty"`
	ID             string              `json:"id,omitempty"`
	TaskID         string              `json:"taskId,omitempty"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *AuthenticationInfo `json:"authentication,omitempty"`
}

// PushConfigRequest is the params of GetTaskPushNotificationConfig,
// DeleteTaskPushNotificationConfig and ListTaskPushNotificationConfigs (no id).
type PushConfigRequest struct {
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	ID        string `json:"id,omitempty"`
	PageSize  int32  `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// ListTaskPushNotificationConfigsResponse is the result of
// ListTaskPushNotificationConfigs: every config of the task (one page).
type ListTaskPushNotificationConfigsResponse struct {
	Configs       []TaskPushNotificationConfig `json:"configs"`
	NextPageToken string                       `json:"nextPageToken"`
}

// pushMethod runs one of the push-config methods.
func (s *Server) pushMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == "CreateTaskPushNotificationConfig" {
		var c TaskPushNotificationConfig
		if e := decodeParams(params, &c); e != nil {
			return nil, e
		}
		return s.setPush(ctx, c.TaskID, c, false)
	}
	var p PushConfigRequest
	if e := decodeParams(params, &p); e != nil {
		return nil, e
	}
	if p.TaskID == "" {
		return nil, rpcErr(CodeInvalidParams, "taskId is required")
	}
	if method != "ListTaskPushNotificationConfigs" && p.ID == "" {
		return nil, rpcErr(CodeInvalidParams, "id is required: the push config's id")
	}
	switch method {
	case "DeleteTaskPushNotificationConfig":
		if err := s.gw.SetPushConfig(ctx, p.TaskID, &messages.SetPushConfigRequest{Config: &messages.PushConfig{Id: p.ID}, Delete: true}); err != nil {
			return nil, fromGateway(err, p.TaskID)
		}
		return struct{}{}, nil
	case "GetTaskPushNotificationConfig":
		st, err := s.state(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		for _, c := range st.GetPushConfigs() {
			if c.GetId() == p.ID {
				return pushConfigOf(p.TaskID, c), nil
			}
		}
		return nil, rpcErr(CodeTaskNotFound, "task %q has no push config %q", p.TaskID, truncate(p.ID, 64))
	default: // ListTaskPushNotificationConfigs
		st, err := s.state(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		out := &ListTaskPushNotificationConfigsResponse{Configs: []TaskPushNotificationConfig{}}
		for _, c := range st.GetPushConfigs() {
			out.Configs = append(out.Configs, pushConfigOf(p.TaskID, c))
		}
		return out, nil
	}
}

// setPush sets push config c on task id (an id generated when c names none) and answers
// it as stored. current also makes the task's current state, when it is one that
// notifies, due to the config (a config sent with the message that started the task).
func (s *Server) setPush(ctx context.Context, id string, c TaskPushNotificationConfig, current bool) (*TaskPushNotificationConfig, error) {
	if id == "" {
		return nil, rpcErr(CodeInvalidParams, "taskId is required")
	}
	if c.URL == "" {
		return nil, rpcErr(CodeInvalidParams, "url is required: where the notifications go")
	}
	if c.ID == "" {
		c.ID = gateway.NewID("push")
	}
	req := &messages.SetPushConfigRequest{Config: &messages.PushConfig{Id: c.ID, Url: c.URL}, Token: c.Token, NotifyCurrent: current}
	if a := c.Authentication; a != nil && a.Scheme != "" {
		req.Config.AuthScheme, req.Credentials = a.Scheme, a.Credentials
	}
	if err := s.gw.SetPushConfig(ctx, id, req); err != nil {
		return nil, fromGateway(err, id)
	}
	out := pushConfigOf(id, req.Config)
	return &out, nil
}

// pushConfigOf is a recorded push config as the methods answer it: without its token and
// credentials, which are write-only.
func pushConfigOf(task string, c *messages.PushConfig) TaskPushNotificationConfig {
	out := TaskPushNotificationConfig{ID: c.GetId(), TaskID: task, URL: c.GetUrl()}
	if c.GetAuthScheme() != "" {
		out.Authentication = &AuthenticationInfo{Scheme: c.GetAuthScheme()}
	}
	return out
}
