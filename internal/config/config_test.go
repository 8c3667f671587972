package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/config"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// issueExample is the mcp_servers section exactly as issue 18 shows it.
const issueExample = `mcp_servers:
  - name: orders                      # stdio
    command: node
    args: [orders-server.js]
    env: {ORDERS_DB: /tmp/orders.json}
  - name: docs                        # streamable HTTP
    url: http://127.0.0.1:9000/mcp
    headers: {Authorization: Bearer xyz}
`

func TestTheIssuesExampleParses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fathom.yaml")
	if err := os.WriteFile(path, []byte(issueExample), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []mcptool.ServerConfig{
		{Name: "orders", Command: "node", Args: []string{"orders-server.js"}, Env: map[string]string{"ORDERS_DB": "/tmp/orders.json"}, Dir: dir},
		{Name: "docs", URL: "http://127.0.0.1:9000/mcp", Headers: map[string]string{"Authorization": "Bearer xyz"}},
	}
	if got := f.MCP(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if f.MCPServers[0].Line != 2 || f.MCPServers[1].Line != 6 {
		t.Fatalf("lines %d, %d", f.MCPServers[0].Line, f.MCPServers[1].Line)
	}
}

// TestBadFilesFailWithFileLineAndKey: every mistake names the file, the line and the key.
func TestBadFilesFailWithFileLineAndKey(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key in a server", "mcp_servers:\n  - name: orders\n    command: node\n  - name: docs\n    url: http://x/mcp\n  - name: other\n    comand: node\n",
			"fathom.yaml:7: mcp_servers[2].comand: unknown key (want args, command, env, headers, name, url)"},
		{"unknown section", "mcp_server:\n  - name: a\n", "fathom.yaml:1: mcp_server: unknown key (want " + config.KeyList() + ")"},
		{"duplicate name", "mcp_servers:\n  - name: a\n    command: x\n  - name: a\n    url: http://h/mcp\n",
			`fathom.yaml:4: mcp_servers[1].name: duplicate server name "a" (first at line 2)`},
		{"journal not a name", "journal: [bolt]\n", "fathom.yaml:1: journal: must be a string"},
		{"journal empty", "journal: ' '\n", "fathom.yaml:1: journal: want a journal backend's name: bolt, postgres or memory"},
		{"members_read_own_only not a bool", "members_read_own_only: sometimes\n", `fathom.yaml:1: members_read_own_only: want true or false, not "sometimes"`},
		{"pprof not a bool", "pprof: sometimes\n", `fathom.yaml:1: pprof: want true or false, not "sometimes"`},
		{"duplicate key", "mcp_servers:\n  - name: a\n    command: x\n    command: y\n", "fathom.yaml:4: mcp_servers[0].command: duplicate key (first at line 3)"},
		{"bad name", "mcp_servers:\n  - name: my__server\n    command: x\n", `fathom.yaml:2: mcp_servers[0].name: "my__server" is not a valid server name`},
		{"no transport", "mcp_servers:\n  - name: a\n", "fathom.yaml:2: mcp_servers[0]: set command (a stdio server) or url (a streamable HTTP server)"},
		{"both transports", "mcp_servers:\n  - name: a\n    command: x\n    url: http://h/mcp\n", "fathom.yaml:4: mcp_servers[0].url: a server has command (stdio) or url (streamable HTTP), not both"},
		{"bad url", "mcp_servers:\n  - name: a\n    url: ftp://h\n", `fathom.yaml:3: mcp_servers[0].url: "ftp://h" is not an http:// or https:// URL`},
		{"args not a list", "mcp_servers:\n  - name: a\n    command: x\n    args: server.js\n", "fathom.yaml:4: mcp_servers[0].args: must be a list of strings"},
		{"env value a map", "mcp_servers:\n  - name: a\n    command: x\n    env: {A: {b: c}}\n", "fathom.yaml:4: mcp_servers[0].env.A: must be a string"},
		{"headers on stdio", "mcp_servers:\n  - name: a\n    command: x\n    headers: {A: b}\n", "fathom.yaml:4: mcp_servers[0].headers: headers belong to an HTTP server"},
		{"not a list", "mcp_servers: {name: a}\n", "fathom.yaml:1: mcp_servers: must be a list of servers"},
		{"not yaml", "mcp_servers: [\n", "fathom.yaml: not valid YAML"},
		{"not a mapping", "- a\n", "fathom.yaml:1: the file must be a mapping"},
		{"approval unknown key", "approval:\n  tool: [a]\n", "fathom.yaml:2: approval.tool: unknown key (want tools)"},
		{"approval tools not a list", "approval:\n  tools: code_execute\n", "fathom.yaml:2: approval.tools: must be a list of tool names"},
		{"approval duplicate tool", "approval:\n  tools:\n    - a\n    - a\n", `fathom.yaml:4: approval.tools[1]: duplicate tool "a" (first at line 3)`},
		{"approval bad tool name", "approval:\n  tools: [\"rm -rf\"]\n", `fathom.yaml:2: approval.tools[0]: "rm -rf" is not a valid tool name`},
		{"max_tool_result_bytes too small", "max_tool_result_bytes: 12\n", `fathom.yaml:1: max_tool_result_bytes: "12" is not a whole number of bytes from 1024 to 983040`},
		{"drain_timeout not a duration", "drain_timeout: soon\n", `fathom.yaml:1: drain_timeout: "soon" is not a duration of 0 or more (30s, 2m)`},
		{"drain_timeout negative", "drain_timeout: -1s\n", `fathom.yaml:1: drain_timeout: "-1s" is not a duration of 0 or more (30s, 2m)`},
		{"max_tool_result_bytes not a number", "max_tool_result_bytes: [1]\n", "fathom.yaml:1: max_tool_result_bytes: must be a string"},
		{"approval bad decision", "approval:\n  tools:\n    - name: a\n      allowed_decisions: [approve, maybe]\n", `fathom.yaml:4: approval.tools[0].allowed_decisions[1]: "maybe" is not a decision (want approve, edit or reject)`},
		{"approval no decision", "approval:\n  tools:\n    - name: a\n      allowed_decisions: []\n", `fathom.yaml:4: approval.tools[0].allowed_decisions: allows no decision: list some of approve, edit, reject`},
		{"approval entry without name", "approval:\n  tools:\n    - allowed_decisions: [approve]\n", `fathom.yaml:3: approval.tools[0].name: required: the tool's name`},
		{"approval entry unknown key", "approval:\n  tools:\n    - name: a\n      decisions: [approve]\n", `fathom.yaml:4: approval.tools[0].decisions: unknown key (want allowed_decisions, name)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("fathom.yaml", []byte(tc.yaml))
			if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
				t.Fatalf("error %v\nwant prefix %s", err, tc.want)
			}
		})
	}
}

func TestEmptyFileConfiguresNothing(t *testing.T) {
	for _, y := range []string{"", "# nothing yet\n", "mcp_servers:\n"} {
		f, err := config.Parse("f.yaml", []byte(y))
		if err != nil || len(f.MCPServers) != 0 {
			t.Fatalf("%q: %+v %v", y, f, err)
		}
	}
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// TestApprovalSectionAsTheIssueShowsIt: the approval section lists the tools whose calls
// wait for a human; ToolError places one of them in the file.
func TestApprovalSectionAsTheIssueShowsIt(t *testing.T) {
	f, err := config.Parse("fathom.yaml", []byte("approval:\n  tools: [code_execute, orders__cancel_order]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"code_execute", "orders__cancel_order"}; !reflect.DeepEqual(f.Approval.Tools, want) {
		t.Fatalf("approval tools %v, want %v", f.Approval.Tools, want)
	}
	err = f.ToolError("orders__cancel_order", "not a tool of this node")
	if err == nil || err.Error() != "fathom.yaml:2: approval.tools[1]: not a tool of this node" {
		t.Fatalf("ToolError = %v", err)
	}
	if f.ToolError("other", "x") != nil {
		t.Fatal("ToolError placed a tool the section does not name")
	}
	// An entry may narrow the decisions a human may take (allowed_decisions).
	f, err = config.Parse("fathom.yaml", []byte("approval:\n  tools:\n    - code_execute\n    - name: orders__cancel_order\n      allowed_decisions: [approve, reject]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"code_execute", "orders__cancel_order"}; !reflect.DeepEqual(f.Approval.Tools, want) {
		t.Fatalf("approval tools %v, want %v", f.Approval.Tools, want)
	}
	if want := map[string][]string{"orders__cancel_order": {"approve", "reject"}}; !reflect.DeepEqual(f.Approval.Decisions, want) {
		t.Fatalf("approval decisions %v, want %v", f.Approval.Decisions, want)
	}
	if err := f.ToolError("orders__cancel_order", "x"); err == nil || err.Error() != "fathom.yaml:4: approval.tools[1]: x" {
		t.Fatalf("ToolError = %v", err)
	}
}

// TestDrainTimeout: drain_timeout is read as a duration and marked set.
func TestDrainTimeout(t *testing.T) {
	f, err := config.Parse("fathom.yaml", []byte("drain_timeout: 45s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.DrainTimeoutSet || f.DrainTimeout != 45*time.Second {
		t.Fatalf("drain_timeout = %s (set %v), want 45s", f.DrainTimeout, f.DrainTimeoutSet)
	}
}

// TestJournalKey: journal names the event journal's backend (the binary checks the name
// against its backends).
func TestJournalKey(t *testing.T) {
	f, err := config.Parse("fathom.yaml", []byte("journal: memory\n"))
	if err != nil || f.Journal != "memory" {
		t.Fatalf("journal: memory = %+v, %v", f, err)
	}
	if f, err := config.Parse("fathom.yaml", []byte("agents: []\n")); err != nil || f.Journal != "" {
		t.Fatalf("a file without journal: %q, %v", f.Journal, err)
	}
}

// TestWebhookSecret: webhook_secret takes a Standard Webhooks secret; a bad one fails
// with the line and key, without quoting the value.
func TestWebhookSecret(t *testing.T) {
	f, err := config.Parse("fathom.yaml", []byte("webhook_secret: whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3\n"))
	if err != nil || f.WebhookSecret != "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3" {
		t.Fatalf("parse: %v, %q", err, f.WebhookSecret)
	}
	_, err = config.Parse("fathom.yaml", []byte("webhook_secret: hunter2-not-a-secret\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "fathom.yaml:1: webhook_secret: ") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad secret: %v", err)
	}
}

// TestEverySectionIsDocumented: each top-level key a file registers is listed in
// docs/config.md, where operators look keys up, and the unknown-key error lists them all.
func TestEverySectionIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	keys := config.SectionKeys()
	if len(keys) < 20 {
		t.Fatalf("only %d sections registered: an init did not run?", len(keys))
	}
	for _, key := range keys {
		if !regexp.MustCompile(`\b` + key + `\b`).Match(doc) {
			t.Errorf("top-level key %s is not in docs/config.md", key)
		}
		if !strings.Contains(config.KeyList(), key) {
			t.Errorf("the unknown-key error does not list %s", key)
		}
	}
}
