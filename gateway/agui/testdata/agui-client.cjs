// Drives Fathom's AG-UI endpoint with the official client (@ag-ui/client's HttpAgent) and
// checks every event the server sent against @ag-ui/core's schemas (EventSchemas): the
// events as the client received them, and each `data:` line of the raw SSE body.
//
//   NODE_PATH=<dir>/node_modules node agui-client.cjs URL TOKEN [demo]
//
// With "demo", one run on a new thread (the demo model's plan: sub-agents in parallel).
// Prints one JSON object: per scenario, each run's events, schema failures, error,
// result and the client's pending interrupts, messages and state.
"use strict";
const { HttpAgent } = require("@ag-ui/client");
const { EventSchemas } = require("@ag-ui/core/schemas");

const [url, token, mode] = process.argv.slice(2);

// agent is an HttpAgent on thread threadId that keeps the raw body of each response.
function agent(threadId) {
  const raw = [];
  const a = new HttpAgent({
    url,
    threadId,
    headers: { Authorization: "Bearer " + token },
    fetch: async (u, init) => {
      const r = await fetch(u, init);
      raw.push(r.clone().text());
      return r;
    },
  });
  a.raw = raw;
  return a;
}

function check(event, where, invalid) {
  const r = EventSchemas.safeParse(event);
  if (!r.success) invalid.push({ where, type: event && event.type, issues: r.error.issues });
}

async function run(a, params) {
  const events = [];
  const invalid = [];
  let error = null;
  let result;
  try {
    result = await a.runAgent(params, {
      onEvent({ event }) {
        check(event, "client", invalid);
        events.push(event);
      },
    });
  } catch (e) {
    error = String((e && e.message) || e);
  }
  const body = a.raw.length ? await a.raw[a.raw.length - 1] : "";
  let wire = 0;
  for (const block of body.split("\n\n")) {
    const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length === 0) continue;
    check(JSON.parse(data.join("\n")), "wire", invalid);
    wire++;
  }
  return {
    events,
    wire,
    invalid,
    error,
    result: result ? result.result : undefined,
    pending: a.pendingInterrupts,
    messages: a.messages,
    state: a.state,
  };
}

const user = (id, content) => ({ id, role: "user", content });

async function main() {
  const out = {};
  if (mode === "demo") {
    const d = agent("demo-thread");
    d.addMessage(user("u1", "Write a haiku about rain"));
    out.demo = await run(d, { runId: "demo-1" });
    process.stdout.write(JSON.stringify(out));
    return;
  }

  // A run with a tool call, then a second run on the thread: a follow-up turn.
  const w = agent("weather-thread");
  w.addMessage(user("u1", "Weather in Paris?"));
  out.first = await run(w, { runId: "weather-1" });
  w.addMessage(user("u2", "And tomorrow?"));
  out.followup = await run(w, { runId: "weather-2" });

  // The first run posted again (same runId): replayed from the journal.
  const again = agent("weather-thread");
  again.addMessage(user("u1", "Weather in Paris?"));
  out.replay = await run(again, { runId: "weather-1" });

  // A question (ask_human), then an approval (refund): each ends its run with an
  // interrupt, and the next run's resume answers it.
  const r = agent("refund-thread");
  r.addMessage(user("u1", "Refund order 42"));
  out.ask = await run(r, { runId: "refund-1" });
  const asked = (r.pendingInterrupts || [])[0];
  out.approve = await run(r, {
    runId: "refund-2",
    resume: asked ? [{ interruptId: asked.id, status: "resolved", payload: "42" }] : [],
  });
  const approval = (r.pendingInterrupts || [])[0];
  out.done = await run(r, {
    runId: "refund-3",
    resume: approval ? [{ interruptId: approval.id, status: "resolved", payload: { approved: true } }] : [],
  });

  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(String((e && e.stack) || e) + "\n");
  process.exit(1);
});
