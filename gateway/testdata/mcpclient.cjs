// A client of Fathom's MCP server on the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk) over streamable HTTP, for the gateway's tests. Usage:
//
//   node mcpclient.cjs URL TOKEN STEP...
//
// Each step prints one JSON line on stdout: {"step": STEP, ...what it saw}. Steps:
//   notoken          connect without a token: the error
//   list             list the tools: their names and input schemas
//   call:NAME:ID:GOAL  call tool NAME with {goal, session_id: ID} and a progress token:
//                    the result and the progress notifications
//   bad:NAME:JSON    call tool NAME with the arguments JSON: the result (or the error)
//   cancel:ID:GOAL   call run_agent, abort it once step 1 started: the rejection and the
//                    progress seen until then
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [url, token, ...steps] = process.argv.slice(2);

function out(o) {
  process.stdout.write(JSON.stringify(o) + "\n");
}

async function connect(tok) {
  const opts = tok ? { requestInit: { headers: { Authorization: "Bearer " + tok } } } : {};
  const client = new Client({ name: "fathom-mcp-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), opts));
  return client;
}

function fields(err) {
  return { error: String(err && err.message), code: err && err.code, name: err && err.name };
}

async function main() {
  let client;
  for (const step of steps) {
    const [kind, ...rest] = step.split(":");
    if (kind === "notoken") {
      try {
        const c = await connect("");
        await c.close();
        out({ step, connected: true });
      } catch (err) {
        out({ step, ...fields(err) });
      }
      continue;
    }
    client = client || (await connect(token));
    if (kind === "list") {
      const res = await client.listTools();
      out({ step, tools: res.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })) });
    } else if (kind === "call") {
      const [name, id, ...goal] = rest;
      const progress = [];
      const res = await client.callTool({ name, arguments: { goal: goal.join(":"), session_id: id } }, undefined, {
        onprogress: (p) => progress.push(p),
        timeout: 120000,
        resetTimeoutOnProgress: true,
      });
      out({ step, result: res, progress });
    } else if (kind === "bad") {
      const [name, ...json] = rest;
      try {
        const res = await client.callTool({ name, arguments: JSON.parse(json.join(":")) }, undefined, { timeout: 60000 });
        out({ step, result: res });
      } catch (err) {
        out({ step, ...fields(err) });
      }
    } else if (kind === "cancel") {
      const [id, ...goal] = rest;
      const ac = new AbortController();
      const progress = [];
      try {
        const res = await client.callTool({ name: "run_agent", arguments: { goal: goal.join(":"), session_id: id } }, undefined, {
          signal: ac.signal,
          timeout: 120000,
          onprogress: (p) => {
            progress.push(p);
            if (/^step 1 started/.test(p.message || "")) ac.abort("the test cancels the call");
          },
        });
        out({ step, result: res, progress });
      } catch (err) {
        out({ step, progress, ...fields(err) });
      }
    } else {
      throw new Error("unknown step " + step);
    }
  }
  if (client) await client.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(String((err && err.stack) || err) + "\n");
    process.exit(1);
  },
);
