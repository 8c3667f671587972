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
//   task:NAME:ID:GOAL  call tool NAME as a task (client.experimental.tasks.callToolStream):
//                    the stream's messages (taskCreated, taskStatus..., result), then
//                    tasks/get and tasks/result of the ended task
//   taskcancel:ID:GOAL call run_agent as a task, poll tasks/get until it waits for a human,
//                    cancel it (tasks/cancel): the task as created, polled and cancelled,
//                    and tasks/get after
//   tasklist         the server's tasks capability, the tools' execution, tasks/list
//   taskget:ID       tasks/get, tasks/result and tasks/cancel of task ID: results or errors
//   taskbad:NAME:JSON  call tool NAME as a task with the arguments JSON: the result or the error
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { CallToolResultSchema, CreateTaskResultSchema } = require("@modelcontextprotocol/sdk/types.js");

const [url, token, ...steps] = process.argv.slice(2);

function out(o) {
  process.stdout.write(JSON.stringify(o) + "\n");
}

async function connect(tok) {
  const opts = tok ? { requestInit: { headers: { Authorization: "Bearer " + tok } } } : {};
  // Strict: a task-augmented request is refused unless the server advertises tasks.
  const client = new Client({ name: "fathom-mcp-test", version: "1.0.0" }, { enforceStrictCapabilities: true });
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
    } else if (kind === "task") {
      const [name, id, ...goal] = rest;
      const messages = [];
      try {
        const stream = client.experimental.tasks.callToolStream({ name, arguments: { goal: goal.join(":"), session_id: id } }, undefined, {
          task: { ttl: 600000 },
          timeout: 120000,
        });
        for await (const m of stream) messages.push(m.type === "error" ? { type: "error", ...fields(m.error) } : m);
        const get = await client.experimental.tasks.getTask(id);
        const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema, { timeout: 60000 });
        out({ step, messages, get, result });
      } catch (err) {
        out({ step, messages, ...fields(err) });
      }
    } else if (kind === "taskcancel") {
      const [id, ...goal] = rest;
      try {
        const created = await client.request(
          { method: "tools/call", params: { name: "run_agent", arguments: { goal: goal.join(":"), session_id: id }, task: { ttl: 600000 } } },
          CreateTaskResultSchema,
          { timeout: 60000 },
        );
        const polled = [];
        const deadline = Date.now() + 60000;
        for (;;) {
          const t = await client.experimental.tasks.getTask(created.task.taskId);
          polled.push(t);
          if (t.status !== "working" || Date.now() > deadline) break;
          await new Promise((r) => setTimeout(r, t.pollInterval || 200));
        }
        const cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
        const get = await client.experimental.tasks.getTask(created.task.taskId);
        out({ step, created, polled, cancelled, get });
      } catch (err) {
        out({ step, ...fields(err) });
      }
    } else if (kind === "tasklist") {
      const tools = await client.listTools();
      const list = await client.experimental.tasks.listTasks();
      out({ step, capabilities: client.getServerCapabilities(), execution: tools.tools.map((t) => t.execution), list });
    } else if (kind === "taskbad") {
      const [name, ...json] = rest;
      try {
        const res = await client.request(
          { method: "tools/call", params: { name, arguments: JSON.parse(json.join(":")), task: {} } },
          CreateTaskResultSchema,
          { timeout: 60000 },
        );
        out({ step, created: res });
      } catch (err) {
        out({ step, ...fields(err) });
      }
    } else if (kind === "taskget") {
      const [id] = rest;
      const res = {};
      for (const [k, f] of [
        ["tget", () => client.experimental.tasks.getTask(id)],
        ["tresult", () => client.experimental.tasks.getTaskResult(id, CallToolResultSchema, { timeout: 30000 })],
        ["tcancel", () => client.experimental.tasks.cancelTask(id)],
      ]) {
        try {
          res[k] = { result: await f() };
        } catch (err) {
          res[k] = fields(err);
        }
      }
      out({ step, ...res });
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
