// An MCP server on the official TypeScript SDK (@modelcontextprotocol/sdk), for Fathom's
// MCP client tests: nothing here is Fathom's code. Usage:
//
//   node server.cjs stdio          serve on stdin/stdout
//   node server.cjs http           serve streamable HTTP on 127.0.0.1 (a free port);
//                                  prints "listening on URL" on stdout
//
// Env: MCP_TOKEN, when set, makes the HTTP server refuse requests without
// "Authorization: Bearer MCP_TOKEN"; MCP_PORT is the HTTP port (default: a free one).
//
// Tools: echo {text} (the text, this process's pid and the call's idempotency key from
// _meta), trace_context {} (the traceparent and tracestate of _meta, as JSON), lookup_order {order_id}, fail {} (an isError result), crash {} (the process
// exits), add_tool {name} (registers a new tool: the SDK sends
// notifications/tools/list_changed), remove_tool {name}, slow {ms}, hold {} (answers only
// once the client cancels the call, i.e. its abort signal fires on notifications/cancelled;
// appends "started" to the file $MCP_EVENTS when set as it begins, "cancelled" then).
"use strict";
const http = require("node:http");
const { randomUUID } = require("node:crypto");
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { isInitializeRequest } = require("@modelcontextprotocol/sdk/types.js");
const { z } = require("zod");

const orders = { "A-1": { status: "shipped", total: 42.5 }, "B-2": { status: "cancelled", total: 7 } };

function makeServer() {
  const server = new McpServer({ name: "fathom-test-server", version: "1.0.0" });
  const added = {};
  const text = (t) => ({ content: [{ type: "text", text: t }] });
  server.registerTool("echo", {
    description: "Echoes the text back, with the server's pid and the call's idempotency key",
    inputSchema: { text: z.string().min(1).describe("what to echo") },
  }, async ({ text: t }, extra) => {
    const key = (extra._meta || {})["fathom/idempotency_key"] || "";
    return text(`echo: ${t} (pid ${process.pid}, key ${key})`);
  });
  server.registerTool("trace_context", {
    description: "Answers the W3C trace context the call carried in _meta (traceparent, tracestate)",
    inputSchema: {},
  }, async (_args, extra) => {
    const meta = extra._meta || {};
    return text(JSON.stringify({ traceparent: meta.traceparent || "", tracestate: meta.tracestate || "" }));
  });
  server.registerTool("lookup_order", {
    description: "Looks an order up by its id",
    inputSchema: { order_id: z.string().describe("the order id, e.g. A-1") },
  }, async ({ order_id }) => {
    const o = orders[order_id];
    if (!o) return { content: [{ type: "text", text: `no order ${order_id}` }], isError: true };
    return text(JSON.stringify({ order_id, ...o }));
  });
  server.registerTool("fail", { description: "Always fails", inputSchema: {} },
    async () => ({ content: [{ type: "text", text: "the warehouse is on fire" }], isError: true }));
  server.registerTool("crash", { description: "Exits the server process", inputSchema: {} }, async () => {
    setImmediate(() => process.exit(3));
    return new Promise(() => {}); // never answers
  });
  server.registerTool("add_tool", {
    description: "Registers a new tool that answers with its own name",
    inputSchema: { name: z.string() },
  }, async ({ name }) => {
    added[name] = server.registerTool(name, { description: `added at run time: ${name}`, inputSchema: { n: z.number().int() } },
      async ({ n }) => text(`${name} got ${n}`));
    return text(`added ${name}`);
  });
  server.registerTool("remove_tool", { description: "Removes a tool add_tool added", inputSchema: { name: z.string() } },
    async ({ name }) => {
      if (added[name]) { added[name].remove(); delete added[name]; }
      return text(`removed ${name}`);
    });
  server.registerTool("slow", { description: "Answers after ms milliseconds", inputSchema: { ms: z.number().int() } },
    async ({ ms }) => { await new Promise((r) => setTimeout(r, ms)); return text(`slept ${ms}`); });
  server.registerTool("hold", { description: "Runs until the call is cancelled", inputSchema: {} },
    async (_args, extra) => {
      if (process.env.MCP_EVENTS) require("node:fs").appendFileSync(process.env.MCP_EVENTS, "started\n");
      await new Promise((r) => { if (extra.signal.aborted) r(); else extra.signal.addEventListener("abort", () => r()); });
      if (process.env.MCP_EVENTS) require("node:fs").appendFileSync(process.env.MCP_EVENTS, "cancelled\n");
      return text("cancelled");
    });
  return server;
}

async function serveStdio() {
  await makeServer().connect(new StdioServerTransport());
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let data = "";
    req.setEncoding("utf8");
    req.on("data", (c) => { data += c; });
    req.on("end", () => resolve(data));
    req.on("error", reject);
  });
}

function serveHTTP() {
  const token = process.env.MCP_TOKEN || "";
  const transports = {};
  const srv = http.createServer(async (req, res) => {
    try {
      if (token && req.headers.authorization !== `Bearer ${token}`) {
        res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: "unauthorized" }));
        return;
      }
      let body;
      if (req.method === "POST") body = JSON.parse(await readBody(req));
      const sid = req.headers["mcp-session-id"];
      let transport = sid ? transports[sid] : undefined;
      if (!transport) {
        if (req.method !== "POST" || !isInitializeRequest(body)) {
          res.writeHead(400, { "content-type": "application/json" })
            .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: no valid session" }, id: null }));
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => { transports[id] = transport; },
        });
        transport.onclose = () => { if (transport.sessionId) delete transports[transport.sessionId]; };
        await makeServer().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    } catch (e) {
      console.error(e);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  srv.listen(Number(process.env.MCP_PORT || 0), "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${srv.address().port}/mcp`));
}

if (process.argv[2] === "http") serveHTTP();
else serveStdio().catch((e) => { console.error(e); process.exit(1); });
