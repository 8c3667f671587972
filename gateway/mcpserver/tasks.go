package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/listing"
	"github.com/fathom-agents/fathom/messages"
)

// The MCP tasks extension (protocol revision 2025-11-25). The Go SDK Fathom uses
// (v1.8.0) has none of it, so the server builds it on the SDK's seams: the request body's
// params.task, which the SDK's CallToolParams would drop, is moved into the params'
// _meta (taskMetaKey) before the SDK reads the request; a receiving middleware
// advertises the capability (initialize), marks the tools (tools/list) and answers a
// task-augmented tools/call with its task; tasks/get, tasks/result, tasks/list and
// tasks/cancel are custom methods. A task is the Fathom session the call starts: its id
// is the session id, its status the session's, its result read from the journal.

// Task statuses.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskPollInterval is the pollInterval (milliseconds) a task suggests to its client.
const TaskPollInterval = 1000

// relatedTaskMetaKey is the _meta key that ties a task's result to its task.
const relatedTaskMetaKey = "io.modelcontextprotocol/related-task"

// taskMetaKey is where ServeHTTP moves a tools/call's params.task: the SDK's
// CallToolParams has no task field, and keeps _meta.
const taskMetaKey = "fathom/task"

// Task is an MCP task: a session a task-augmented tools/call started.
type Task struct {
	// TaskID is the session's id.
	TaskID string `json:"taskId"`
	// Status is working, input_required, completed, failed or cancelled.
	Status string `json:"status"`
	// StatusMessage says more: the question a session waits on, why it failed.
	StatusMessage string `json:"statusMessage,omitempty"`
	// CreatedAt and LastUpdatedAt are the session's start and newest event (RFC 3339).
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is null: the journal keeps a session until it is deleted.
	TTL *int64 `json:"ttl"`
	// PollInterval is TaskPollInterval.
	PollInterval int64 `json:"pollInterval,omitempty"`
}

type createTaskResult struct {
	mcp.ResultBase
	Task Task `json:"task"`
}

type taskResult struct {
	mcp.ResultBase
	Task
}

type listTasksResult struct {
	mcp.ResultBase
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type listTasksParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// rawResult is a result the SDK has no type for: its JSON, as is.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

// MarshalJSON answers the result's JSON.
func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// addTasks registers the tasks methods and the middleware on s.server.
func (s *Server) addTasks() error {
	for _, err := range []error{
		mcp.AddReceivingCustomMethod(s.server, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*taskResult, error) {
			t, _, err := s.task(ctx, p.TaskID)
			if err != nil {
				return nil, err
			}
			return &taskResult{Task: t}, nil
		}),
		mcp.AddReceivingCustomMethod(s.server, "tasks/result", s.taskResult),
		mcp.AddReceivingCustomMethod(s.server, "tasks/list", s.listTasks),
		mcp.AddReceivingCustomMethod(s.server, "tasks/cancel", s.cancelTask),
	} {
		if err != nil {
			return fmt.Errorf("mcpserver: register the tasks methods: %w", err)
		}
	}
	s.server.AddReceivingMiddleware(s.middleware)
	return nil
}

// middleware runs each request for its principal, advertises tasks and answers a
// task-augmented tools/call.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := principalOfExtra(ctx, req.GetExtra()); ok {
			ctx = auth.WithPrincipal(ctx, p)
		}
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			return editResult(res, func(m map[string]any) {
				caps, _ := m["capabilities"].(map[string]any)
				if caps == nil {
					caps = map[string]any{}
					m["capabilities"] = caps
				}
				caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
					"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
			})
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			return editResult(res, func(m map[string]any) {
				tools, _ := m["tools"].([]any)
				for _, t := range tools {
					if t, ok := t.(map[string]any); ok {
						t["execution"] = map[string]any{"taskSupport": "optional"}
					}
				}
			})
		case "tools/call":
			if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && call.Params.Meta[taskMetaKey] != nil {
				return s.createTask(ctx, call)
			}
		}
		return next(ctx, method, req)
	}
}

// editResult is res as JSON, edited by edit.
func editResult(res mcp.Result, edit func(map[string]any)) (mcp.Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode the result: %w", err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	return &rawResult{raw: b}, nil
}

func principalOfExtra(ctx context.Context, extra *mcp.RequestExtra) (auth.Principal, bool) {
	if extra != nil && extra.TokenInfo != nil {
		if p, ok := extra.TokenInfo.Extra[principalKey].(auth.Principal); ok {
			return p, true
		}
	}
	return auth.FromContext(ctx)
}

// createTask starts the session of a task-augmented tools/call and answers its task.
// Bad arguments are an invalid-params error (a task result has no room for a tool
// error).
func (s *Server) createTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	agent, ok := s.tools[req.Params.Name]
	if !ok {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown tool %q", req.Params.Name)
	}
	var in Input
	dec := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
	dec.DisallowUnknownFields()
	if len(req.Params.Arguments) == 0 {
		dec = json.NewDecoder(strings.NewReader("{}"))
	}
	if err := dec.Decode(&in); err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "invalid arguments for tool %s: %v", req.Params.Name, err)
	}
	goal := strings.TrimSpace(in.Goal)
	if goal == "" {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "goal must not be empty: say what the agent should achieve")
	}
	start := gateway.Request{Op: gateway.OpStart, Goal: goal, SessionID: in.SessionID}
	if agent != nil {
		start.Goal = agentGoal(*agent, goal)
		start.WebhookURL = agent.WebhookURL
	}
	body, err := s.cfg.Gateway.Do(ctx, start)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		rc := int64(jsonrpc.CodeInternalError)
		if code == gateway.CodeInvalidArgument {
			rc = jsonrpc.CodeInvalidParams
		}
		return nil, rpcError(rc, "cannot start the session: %s (%s)", msg, code)
	}
	var started struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(body, &started); err != nil || started.SessionID == "" {
		return nil, fmt.Errorf("read the start's answer %s: %w", body, err)
	}
	t, _, err := s.task(ctx, started.SessionID)
	if err != nil {
		now := time.Now().UTC().Format(time.RFC3339Nano)
		t = Task{TaskID: started.SessionID, Status: TaskWorking, CreatedAt: now, LastUpdatedAt: now, PollInterval: TaskPollInterval}
	}
	return &createTaskResult{Task: t}, nil
}

// task is session id as a task, for the principal in ctx: a session it may not read is
// answered as a missing one.
func (s *Server) task(ctx context.Context, id string) (Task, *messages.SessionState, error) {
	if id == "" {
		return Task{}, nil, rpcError(jsonrpc.CodeInvalidParams, "taskId is required")
	}
	body, err := s.cfg.Gateway.Do(ctx, gateway.Request{Op: gateway.OpState, SessionID: id})
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		switch code {
		case gateway.CodeNotFound, gateway.CodePermissionDenied, gateway.CodeInvalidArgument:
			return Task{}, nil, notFound(id)
		}
		return Task{}, nil, rpcError(jsonrpc.CodeInternalError, "read task %q: %s (%s)", id, msg, code)
	}
	var resp messages.GetStateResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &resp); err != nil {
		return Task{}, nil, fmt.Errorf("decode the state of %s: %w", id, err)
	}
	st := resp.GetState()
	if !resp.GetExists() || st == nil {
		return Task{}, nil, notFound(id)
	}
	t := Task{TaskID: id, CreatedAt: rfc3339(st.GetStartedAtUnixNano()), LastUpdatedAt: rfc3339(st.GetUpdatedAtUnixNano()), PollInterval: TaskPollInterval}
	switch st.GetStatus() {
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
		t.Status = TaskCompleted
	case messages.SessionStatus_SESSION_STATUS_FAILED:
		t.Status, t.StatusMessage = TaskFailed, st.GetError()
	case messages.SessionStatus_SESSION_STATUS_CANCELLED:
		t.Status, t.StatusMessage = TaskCancelled, st.GetError()
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		t.Status = TaskInputRequired
		var qs []string
		for _, h := range st.GetAwaiting() {
			qs = append(qs, h.GetQuestion())
		}
		t.StatusMessage = "waiting for a human's answer (over the gateway) to: " + strings.Join(qs, "; ")
	case messages.SessionStatus_SESSION_STATUS_INTERRUPTED:
		t.Status, t.StatusMessage = TaskWorking, "paused at a breakpoint"
	default:
		t.Status = TaskWorking
	}
	return t, st, nil
}

// taskResult answers tasks/result: it follows the session's journal to its end and
// answers the tool call's result.
func (s *Server) taskResult(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*mcp.CallToolResult, error) {
	if _, _, err := s.task(ctx, p.TaskID); err != nil {
		return nil, err
	}
	id := p.TaskID
	g := s.cfg.Gateway
	sctx, done, err := g.Stream(ctx)
	if err != nil {
		_, msg := gateway.ErrorCode(err)
		return nil, rpcError(jsonrpc.CodeInternalError, "cannot follow task %q: %s", id, msg)
	}
	defer done()
	sub, err := g.Follow(sctx, id, 0, false)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		if code == gateway.CodeNotFound || code == gateway.CodePermissionDenied {
			return nil, notFound(id)
		}
		return nil, rpcError(jsonrpc.CodeInternalError, "cannot follow task %q: %s (%s)", id, msg, code)
	}
	defer sub.Close()
	var out *Result
	for out == nil {
		u, err := sub.NextUpdate(sctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("tasks/result for %s: %w", id, ctx.Err())
		case err != nil:
			return nil, rpcError(jsonrpc.CodeInternalError, "follow task %q: %v", id, err)
		case u.IsDelta || u.Event == nil:
			continue
		}
		if _, human := u.Event.GetPayload().(*messages.Event_HitlRequested); !human {
			out = terminal(id, u.Event)
		}
	}
	out.CostUSD = s.cost(ctx, id, out.CostUSD)
	res := render(out)
	res.StructuredContent = out
	res.Meta = mcp.Meta{relatedTaskMetaKey: map[string]any{"taskId": id}}
	return res, nil
}

// listTasks answers tasks/list: the principal's sessions, newest first, a page at a time.
func (s *Server) listTasks(ctx context.Context, _ *mcp.ServerSession, p *listTasksParams) (*listTasksResult, error) {
	q := gateway.ListQuery{Limit: listing.DefaultLimit}
	if p != nil && p.Cursor != "" {
		if err := listing.SetCursor(&q, p.Cursor); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "invalid cursor: %v", err)
		}
	}
	page, err := s.cfg.Gateway.List(ctx, q)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		return nil, rpcError(jsonrpc.CodeInternalError, "cannot list the tasks: %s (%s)", msg, code)
	}
	out := &listTasksResult{Tasks: []Task{}, NextCursor: page.NextCursor}
	for _, ss := range page.Sessions {
		t := Task{TaskID: ss.SessionID, CreatedAt: ss.CreatedAt.UTC().Format(time.RFC3339Nano),
			LastUpdatedAt: ss.UpdatedAt.UTC().Format(time.RFC3339Nano), PollInterval: TaskPollInterval}
		switch ss.Status {
		case "completed":
			t.Status = TaskCompleted
		case "failed":
			t.Status = TaskFailed
		case "cancelled":
			t.Status = TaskCancelled
		case "awaiting_human":
			t.Status = TaskInputRequired
		default:
			t.Status = TaskWorking
		}
		out.Tasks = append(out.Tasks, t)
	}
	return out, nil
}

// cancelTask answers tasks/cancel: the session is cancelled (by "mcp"); a task that has
// ended is an invalid-params error.
func (s *Server) cancelTask(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*taskResult, error) {
	t, _, err := s.task(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	switch t.Status {
	case TaskCompleted, TaskFailed, TaskCancelled:
		return nil, rpcError(jsonrpc.CodeInvalidParams, "task %q is already %s", p.TaskID, t.Status)
	}
	_, err = s.cfg.Gateway.Do(ctx, gateway.Request{Op: gateway.OpCancel, SessionID: p.TaskID, By: "mcp",
		Reason: "the MCP client cancelled the task"})
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		if code == gateway.CodeNotFound {
			return nil, notFound(p.TaskID)
		}
		return nil, rpcError(jsonrpc.CodeInternalError, "cannot cancel task %q: %s (%s)", p.TaskID, msg, code)
	}
	if t, _, err = s.task(ctx, p.TaskID); err != nil {
		return nil, err
	}
	return &taskResult{Task: t}, nil
}

func notFound(id string) error {
	return rpcError(jsonrpc.CodeInvalidParams, "task %q not found", id)
}

func rpcError(code int64, format string, args ...any) error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func rfc3339(unixNano int64) string {
	if unixNano == 0 {
		return time.Now().UTC().Format(time.RFC3339Nano)
	}
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

// moveTaskParams rewrites a POST's JSON-RPC body so that the SDK keeps a tools/call's
// params.task: it moves it into params._meta[taskMetaKey]. A body it cannot read is
// left to the SDK to refuse; one over the SDK's default limit is errBodyTooLarge.
func moveTaskParams(r *http.Request) error {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
	_ = r.Body.Close()
	if err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	if int64(len(body)) > mcp.DefaultMaxRequestBodyBytes {
		return errBodyTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if !bytes.Contains(body, []byte(`"task"`)) {
		return nil
	}
	trimmed := bytes.TrimSpace(body)
	var msgs []map[string]json.RawMessage
	batch := len(trimmed) > 0 && trimmed[0] == '['
	if batch {
		if json.Unmarshal(trimmed, &msgs) != nil {
			return nil
		}
	} else {
		var m map[string]json.RawMessage
		if json.Unmarshal(trimmed, &m) != nil {
			return nil
		}
		msgs = []map[string]json.RawMessage{m}
	}
	changed := false
	for _, m := range msgs {
		var method string
		if json.Unmarshal(m["method"], &method) != nil || method != "tools/call" {
			continue
		}
		var params map[string]json.RawMessage
		if json.Unmarshal(m["params"], &params) != nil || params["task"] == nil {
			continue
		}
		var meta map[string]json.RawMessage
		if raw := params["_meta"]; raw != nil && json.Unmarshal(raw, &meta) != nil {
			continue
		}
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		task := params["task"]
		if string(bytes.TrimSpace(task)) == "null" {
			delete(params, "task")
		} else {
			meta[taskMetaKey] = task
			delete(params, "task")
			b, err := json.Marshal(meta)
			if err != nil {
				return fmt.Errorf("encode the request's _meta: %w", err)
			}
			params["_meta"] = b
		}
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("encode the request's params: %w", err)
		}
		m["params"] = b
		changed = true
	}
	if !changed {
		return nil
	}
	var out []byte
	if batch {
		out, err = json.Marshal(msgs)
	} else {
		out, err = json.Marshal(msgs[0])
	}
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.ContentLength = int64(len(out))
	return nil
}

var errBodyTooLarge = errors.New("the request body is too large")
