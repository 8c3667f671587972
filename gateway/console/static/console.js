// Fathom console: plain JavaScript over the gateway's own API (docs/gateway-protocol.md).
// No build step, no dependencies. The token lives in sessionStorage only; it is pasted,
// or obtained from the OIDC issuer GET /v1/console/config names (see oidcSignIn).
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const field = (root, name) => root.querySelector(`[data-field="${name}"]`);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) if (c !== undefined && c !== null) e.append(c);
  return e;
};
const shortStatus = (s) => String(s || "").replace(/^SESSION_STATUS_|^STEP_STATUS_/, "").toLowerCase();
const money = (v) => "$" + Number(v || 0).toFixed(4);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const MAX_PREVIEW_KIB = 256; // gateway.MaxPreviewBytes

// timeLeft says how long until a deadline (unix nanoseconds): "4:59 left", or "due now".
const timeLeft = (ns) => {
  const s = Math.ceil((Number(ns) / 1e6 - Date.now()) / 1000);
  if (s <= 0) return "due now";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = String(s % 60).padStart(2, "0");
  return (h ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`) + " left";
};
// deadlineEl says what happens at a deadline and counts down to it (the session page
// ticks every [data-deadline] once a second).
const deadlineEl = (ns, text, testid) => {
  const count = el("b", { class: "countdown", "data-deadline": String(ns), "data-testid": testid + "-left" }, timeLeft(ns));
  return el("p", { class: "deadline", "data-testid": testid }, text, " ", count);
};

let token = sessionStorage.getItem("fathom.token") || "";
let scope = "none"; // none | read | write | admin (GET /v1/whoami)
let who = ""; // " as subject@tenant" once signed in

function toast(msg) {
  const t = $("#toast");
  t.textContent = msg;
  t.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("show"), 5000);
}

// api calls the gateway over HTTP with the token; errors carry the gateway's message.
async function api(method, path, body) {
  const headers = {};
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!resp.ok) {
    const msg = data && data.error ? `${data.error.code}: ${data.error.message}` : `${resp.status} ${text}`;
    throw new Error(msg);
  }
  return data;
}

// Socket is the console's one WebSocket: requests answered by ack/error frames (by id),
// event subscriptions by session, and the restarts feed. It reconnects and resubscribes
// from the last seq it saw.
class Socket {
  constructor() {
    this.nextId = 1;
    this.waiting = new Map();
    this.subs = new Map(); // session id -> {handler, last, deltas, onDelta}
    this.restarts = null;
    this.restartLog = []; // every restart frame of this connection, for a page opened later
    this.connect();
  }
  connect() {
    const url = location.origin.replace(/^http/, "ws") + "/v1/ws";
    const protocols = token ? ["fathom.v1", "bearer." + token] : ["fathom.v1"];
    this.ready = new Promise((resolve) => { this.resolveReady = resolve; });
    const ws = new WebSocket(url, protocols);
    this.ws = ws;
    ws.onopen = () => {
      $("#ws-state").textContent = "live";
      this.resolveReady();
      for (const [id, s] of this.subs) this.send({ op: "subscribe", session_id: id, from_seq: s.last, deltas: !!s.onDelta });
      if (this.restarts) this.send({ op: "subscribe_restarts" });
    };
    ws.onmessage = (m) => this.onFrame(JSON.parse(m.data));
    ws.onclose = () => {
      $("#ws-state").textContent = "offline";
      for (const [, w] of this.waiting) w.reject(new Error("connection closed"));
      this.waiting.clear();
      if (!this.closed) setTimeout(() => this.connect(), 1000);
    };
  }
  close() { this.closed = true; this.ws.close(); }
  send(frame) { this.ws.send(JSON.stringify(frame)); }
  async request(op, fields = {}) {
    await this.ready;
    const id = String(this.nextId++);
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ op, id, ...fields });
    });
  }
  // subscribe hands handler every event of session; onDelta, when given, gets its live
  // deltas (streamed model text) too. The subscriptions are the socket's state: one
  // subscribe frame per subscription and connection, sent here when the connection is
  // open and by onopen otherwise (never both: the gateway refuses a second one).
  subscribe(session, handler, onDelta) {
    if (this.subs.has(session)) this.unsubscribe(session);
    this.subs.set(session, { handler, last: 0, onDelta });
    if (this.ws.readyState === WebSocket.OPEN) this.send({ op: "subscribe", session_id: session, deltas: !!onDelta });
  }
  unsubscribe(session) {
    if (this.subs.delete(session) && this.ws.readyState === WebSocket.OPEN) this.send({ op: "unsubscribe", session_id: session });
  }
  // followRestarts hands every restart (the kept ones first) to handler; the connection
  // subscribes once (a second subscribe_restarts is refused).
  followRestarts(handler) {
    const first = !this.restarts;
    this.restarts = handler;
    for (const r of this.restartLog) handler(r);
    if (first && this.ws.readyState === WebSocket.OPEN) this.send({ op: "subscribe_restarts" }); // else onopen sends it
  }
  onFrame(f) {
    if ((f.op === "ack" || f.op === "error") && f.id !== undefined && this.waiting.has(String(f.id))) {
      const w = this.waiting.get(String(f.id));
      this.waiting.delete(String(f.id));
      if (f.op === "ack") w.resolve(f.result); else w.reject(new Error(`${f.code}: ${f.message}`));
      return;
    }
    if (f.op === "event") {
      const s = this.subs.get(f.session_id);
      if (s && f.seq > s.last) { s.last = f.seq; s.handler(f); }
    } else if (f.op === "delta") {
      const s = this.subs.get(f.session_id);
      if (s && s.onDelta) s.onDelta(f);
    } else if (f.op === "restart") {
      this.restartLog.push(f);
      if (this.restartLog.length > 1000) this.restartLog.shift();
      if (this.restarts) this.restarts(f);
    } else if (f.op === "error") {
      toast(`${f.code}: ${f.message}`);
    }
  }
}

let socket = null;
let leave = () => {}; // the current page's cleanup

// useToken checks t with GET /v1/whoami and opens the console with its scope; quiet
// skips the toast for a 401 (the first load, before any token was entered).
async function useToken(t, quiet = false) {
  token = t;
  sessionStorage.setItem("fathom.token", t);
  try {
    const w = await api("GET", "/v1/whoami");
    scope = w.scope;
    who = w.auth ? ` as ${w.subject}@${w.tenant}` : "";
  } catch (e) {
    who = "";
    scope = "none";
    if (!quiet || !String(e.message).startsWith("unauthenticated")) toast(e.message);
  }
  const label = { none: "no access", read: "read-only", write: "read + write", admin: "read + write, admin" }[scope] || scope;
  $("#scope").textContent = label + who;
  document.body.classList.toggle("readonly", scope !== "write" && scope !== "admin");
  if (socket) socket.close();
  socket = scope === "none" ? null : new Socket();
  route();
}

function route() {
  leave();
  leave = () => {};
  const main = $("#main");
  main.replaceChildren();
  if (!socket) {
    main.append(el("p", {}, "Enter a bearer token (the node's --token, or --read-token for a read-only console)" +
      (oidc ? `, or sign in with ${new URL(oidc.issuer).host}.` : ".")));
    return;
  }
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/session\/(.+)$/);
  if (m) return sessionPage(main, decodeURIComponent(m[1]));
  if (hash === "#/cluster") return clusterPage(main);
  if (hash === "#/memories") return memoriesPage(main);
  return sessionsPage(main);
}

// ---- sessions list ----

function sessionsPage(main) {
  const page = $("#tpl-sessions").content.cloneNode(true).firstElementChild;
  main.append(page);
  const tbody = $("tbody", page);
  const filters = $("#filters", page);
  let cursor = "";
  const query = () => {
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(filters)) {
      if (!v) continue;
      q.set(k, k === "since" ? new Date(v).toISOString() : v);
    }
    return q;
  };
  const row = (s) => el("tr", { "data-session": s.session_id },
    el("td", {}, el("a", { href: "#/session/" + encodeURIComponent(s.session_id) }, s.session_id)),
    el("td", {}, el("span", { class: "badge " + s.status }, s.status)),
    el("td", { class: "goal-cell", title: s.goal || "" }, s.goal || ""),
    el("td", {}, s.user_id || ""),
    el("td", {}, new Date(s.created_at).toLocaleString()),
    el("td", { class: "num" }, money(s.cost_usd)));
  const load = async (more) => {
    const q = query();
    if (more && cursor) q.set("cursor", cursor);
    q.set("limit", "50");
    try {
      const res = await api("GET", "/v1/sessions?" + q);
      const rows = res.sessions.map(row);
      if (more) tbody.append(...rows); else tbody.replaceChildren(...rows);
      cursor = res.next_cursor || "";
      $("#more", page).hidden = !cursor;
    } catch (e) { toast(e.message); }
  };
  filters.addEventListener("submit", (ev) => { ev.preventDefault(); load(false); });
  $("#more", page).addEventListener("click", () => load(true));
  $("#start-form", page).addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = Object.fromEntries(new FormData(ev.target));
    const req = { goal: f.goal };
    if (f.session_id) req.session_id = f.session_id;
    if (f.user_id) req.user_id = f.user_id;
    try {
      const res = await socket.request("start", req);
      location.hash = "#/session/" + encodeURIComponent(res.session_id);
    } catch (e) { toast(e.message); }
  });
  load(false);
  const timer = setInterval(() => { if (!cursor) load(false); }, 2000); // live status
  leave = () => clearInterval(timer);
}

// ---- one session ----

function sessionPage(main, id) {
  const page = $("#tpl-session").content.cloneNode(true).firstElementChild;
  main.append(page);
  const f = (name) => field(page, name);
  f("id").textContent = id;
  let timeline = [];
  let refreshTimer = null;
  let current = null;

  // renderPlan draws state's plan with its sub-agents and their hand-offs, all from
  // state alone: a past state shows the hand-offs the journal held then, nothing later.
  const renderPlan = (list, state) => {
    const subs = Object.values(state.sub_agents || {});
    list.replaceChildren(...(state.steps || []).map((st, i) => {
      const step = st.step || {};
      const li = el("li", { "data-step": step.id },
        el("span", { class: "badge " + shortStatus(st.status) }, shortStatus(st.status)), " ",
        el("b", {}, `${i + 1}. ${step.type}`), " ", step.description || "");
      for (const sa of subs.filter((s) => s.step_id === step.id)) {
        li.append(el("div", { class: "sub", "data-subagent": sa.id },
          `↳ ${sa.id} (${sa.agent_type}) ${sa.running ? "running" : "idle"} · ${sa.llm_calls} LLM calls · ${sa.tool_calls} tool calls · ${money(sa.cost_usd)}`));
      }
      const shown = subs.filter((s) => s.step_id === step.id && s.result && !s.running);
      for (const sa of shown) {
        li.append(el("div", { class: "handoff", "data-handoff": step.id, "data-subagent": sa.id }, "hand-off: " + (sa.result.summary || sa.result.status)));
      }
      // A sub-agent that went on to another step keeps only its last hand-off; the step's
      // output holds its own (core.HandoffText: "[type id: status, confidence c] summary").
      const own = !shown.length && /^\[\S+ (\S+): \S+, confidence [\d.]+\] (.*)$/.exec((st.output || "").split("\n")[0]);
      if (own) li.append(el("div", { class: "handoff", "data-handoff": step.id, "data-subagent": own[1] }, "hand-off: " + own[2]));
      return li;
    }));
  };
  // past is the point in the run the page shows ({seq, state, stepIndex}), null for now:
  // the timeline's time travel (step slider, seq field) sets it and "Back to now" clears it.
  let past = null;
  const showPoint = (seq, state) => {
    past = seq ? { seq, state, stepIndex: pendingStep && pendingStep.seq === seq ? pendingStep.k : null } : null;
    pendingStep = null;
    page.classList.toggle("at-past", !!past);
    transcript.showAt(past ? seq : 0);
    renderFork();
    if (current) renderHeader();
  };
  let pendingStep = null; // the slider's step, while state_at answers
  const view = FathomTimeline.mount({ id, page, renderPlan, onPoint: showPoint }); // timeline.js: Gantt, plan graph, time travel by seq, compare

  // approvalDeadline says what happens when nobody decides: the call is rejected (the
  // default action "continue"), or the session fails.
  const approvalDeadline = (r) => {
    const outcome = r.default_action === "fail" ? "the session fails" : "the call is rejected and does not run";
    const at = Number(r.deadline_unix_nano || 0);
    return at ? `No decision by ${new Date(at / 1e6).toLocaleString()}: ${outcome}.` : `No decision in time: ${outcome}.`;
  };

  // approvalCard shows a call waiting for approval (kind "approval"): its tool and
  // arguments, editable, the decisions its tool allows, and what its deadline does.
  const approvalCard = (r, send) => {
    const allowed = (r.allowed_decisions || []).length ? r.allowed_decisions : ["approve", "edit", "reject"];
    let pretty = r.args || "{}";
    try { pretty = JSON.stringify(JSON.parse(pretty), null, 2); } catch { /* shown as the model wrote it */ }
    const args = el("textarea", { rows: 6, "data-testid": "approval-args" });
    args.value = pretty;
    const message = el("input", { type: "text", placeholder: "why (the model reads it as the tool's result)", "data-testid": "approval-message" });
    const edit = () => {
      let parsed;
      try { parsed = JSON.parse(args.value); } catch (e) { return toast("args are not JSON: " + e.message); }
      send({ decision: "edit", args: parsed });
    };
    return el("div", { class: "card awaiting", "data-request": r.request_id, "data-kind": "approval" },
      el("h2", {}, "Approve a tool call"),
      el("p", { "data-testid": "question" }, `${r.sub_agent_id ? r.sub_agent_id + " calls" : "The model calls"} ${r.tool} in step ${r.step_id}:`),
      el("div", { class: "write" }, args),
      el("div", { class: "write" }, message),
      Number(r.deadline_unix_nano || 0) ? deadlineEl(r.deadline_unix_nano, approvalDeadline(r), "approval-deadline")
        : el("p", { "data-testid": "approval-deadline" }, approvalDeadline(r)),
      el("div", { class: "row write" },
        ...[
          ["approve", el("button", { onclick: () => send({ decision: "approve" }), "data-testid": "approve" }, "Approve")],
          ["edit", el("button", { onclick: edit, "data-testid": "approve-edited" }, "Run with these args")],
          ["reject", el("button", { onclick: () => send({ decision: "reject", message: message.value }), "data-testid": "reject" }, "Reject")],
        ].filter(([d]) => allowed.includes(d)).map(([, button]) => button)));
  };

  const renderAwaiting = (state) => {
    const box = f("awaiting");
    const reqs = state.awaiting || [];
    const open = reqs.map((r) => r.request_id).join("\n");
    if (box.dataset.requests === open) return; // same requests: keep what the human is typing
    box.dataset.requests = open;
    box.replaceChildren(...reqs.map((r) => {
      const input = el("textarea", { rows: 2, placeholder: "answer (JSON or text)", "data-testid": "answer" });
      const send = async (value) => {
        try {
          await socket.request("input", { session_id: id, step_id: r.step_id, request_id: r.request_id, input: value });
          toast("answer sent");
        } catch (e) { toast(e.message); }
      };
      const parse = (text) => { try { return JSON.parse(text); } catch { return text; } };
      if (r.kind === "approval") return approvalCard(r, send);
      const card = el("div", { class: "card awaiting", "data-request": r.request_id },
        el("h2", {}, "Waiting for a human"), el("p", { "data-testid": "question" }, r.question || ""));
      if (r.input_schema) card.append(el("pre", {}, r.input_schema));
      if (Number(r.deadline_unix_nano || 0)) {
        const outcome = r.default_action === "fail" ? "the session fails" : "the step goes on with an empty answer";
        card.append(deadlineEl(r.deadline_unix_nano, `No answer by ${new Date(Number(r.deadline_unix_nano) / 1e6).toLocaleString()}: ${outcome}.`, "deadline"));
      }
      const row = el("div", { class: "row write" });
      for (const o of r.options || []) row.append(el("button", { onclick: () => send(o), "data-option": o }, o));
      if (!(r.options || []).length) {
        card.append(el("div", { class: "write" }, input));
        row.append(el("button", { onclick: () => send(parse(input.value)), "data-testid": "answer-submit" }, "Answer"));
      }
      card.append(row);
      return card;
    }));
  };

  // renderArtifacts lists state's artifacts: each downloads, and previews in place (GET
  // ...?preview=1: markdown and code rendered by the gateway, JSON pretty-printed, text,
  // images).
  const artifactURL = (a) => `/v1/sessions/${encodeURIComponent(id)}/artifacts/${encodeURIComponent(a.artifact_type)}/${encodeURIComponent(a.filename)}`;
  const authHeaders = () => (token ? { Authorization: "Bearer " + token } : {});
  const openPreviews = new Set(); // the paths whose preview is open, across refreshes
  const preview = async (a, box) => {
    box.replaceChildren(el("p", { class: "meta" }, "loading…"));
    try {
      const p = await api("GET", artifactURL(a) + "?preview=1");
      let body;
      if (p.kind === "image") {
        const resp = await fetch(artifactURL(a), { headers: authHeaders() });
        if (!resp.ok) throw new Error(`image: ${resp.status}`);
        const img = el("img", { alt: a.filename, "data-testid": "artifact-image" });
        img.src = URL.createObjectURL(await resp.blob());
        img.addEventListener("load", () => URL.revokeObjectURL(img.src), { once: true });
        body = img;
      } else if (p.html) {
        body = el("div", { class: "md", "data-testid": "artifact-html" });
        body.innerHTML = p.html; // the gateway's safe rendering (no raw HTML, no unsafe links)
      } else if (p.kind === "json") {
        let pretty = p.text;
        try { pretty = JSON.stringify(JSON.parse(p.text), null, 2); } catch { /* cut: as stored */ }
        body = el("pre", { class: "json", "data-testid": "artifact-json" }, pretty);
      } else if (p.kind === "text") {
        body = el("pre", { class: "text", "data-testid": "artifact-text" }, p.text);
      } else {
        body = el("p", { class: "meta" }, `no preview for ${p.content_type}: download it`);
      }
      box.replaceChildren(body, ...(p.cut ? [el("p", { class: "cut" }, `preview cut at ${MAX_PREVIEW_KIB} KiB of ${p.size} bytes: download for all`)] : []));
    } catch (e) { box.replaceChildren(el("p", { class: "meta" }, "preview: " + e.message)); }
  };
  const download = async (a) => {
    const resp = await fetch(artifactURL(a), { headers: authHeaders() });
    if (!resp.ok) return toast(`download: ${resp.status}`);
    const url = URL.createObjectURL(await resp.blob());
    const dl = el("a", { href: url, download: a.filename });
    document.body.append(dl);
    dl.click();
    dl.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };
  const renderArtifacts = (state) => {
    const list = f("artifacts");
    const key = (state.artifacts || []).map((a) => a.path + "@" + a.sha256).join("\n");
    if (list.dataset.key === key) return; // the same artifacts: keep the previews open
    list.dataset.key = key;
    list.replaceChildren(...(state.artifacts || []).map((a) => {
      const link = el("a", { href: "#", "data-artifact": a.path }, `${a.artifact_type}/${a.filename}`);
      link.addEventListener("click", (ev) => { ev.preventDefault(); download(a); });
      const box = el("div", { class: "artifact-preview", "data-testid": "artifact-preview" });
      const toggle = el("button", { type: "button", class: "link", "data-testid": "artifact-preview-toggle" }, "preview");
      const show = () => { openPreviews.add(a.path); toggle.textContent = "hide"; box.hidden = false; preview(a, box); };
      toggle.addEventListener("click", () => {
        if (box.hidden || !box.childElementCount) return show();
        openPreviews.delete(a.path);
        toggle.textContent = "preview";
        box.hidden = true;
      });
      const dl = el("button", { type: "button", class: "link", "data-testid": "artifact-download" }, "download");
      dl.addEventListener("click", () => download(a));
      const li = el("li", { "data-artifact-item": a.path }, link, ` · ${a.size} bytes · ${a.content_type} `, toggle, " ", dl, box);
      if (openPreviews.has(a.path)) show();
      return li;
    }));
  };

  // renderInterrupt shows where a paused or stopped session waits and what its deadline
  // does when nobody resumes it.
  const renderInterrupt = (state) => {
    const it = state.interrupt;
    const box = f("interrupt");
    const key = it ? `${it.breakpoint_id}/${it.step_id}/${it.deadline_unix_nano || 0}` : "";
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    if (!it) return box.replaceChildren();
    const why = it.reason === "pause" ? "Paused" : `Stopped at breakpoint ${it.breakpoint_id}`;
    const card = el("div", { class: "card awaiting", "data-kind": "interrupt" },
      el("h2", {}, why), el("p", {}, `${it.position || "before"} step ${it.step_id || it.step_index}: resume to go on.`));
    if (Number(it.deadline_unix_nano || 0)) {
      const outcome = it.default_action === "fail" ? "the session fails" : "the session goes on";
      card.append(deadlineEl(it.deadline_unix_nano, `No resume by ${new Date(Number(it.deadline_unix_nano) / 1e6).toLocaleString()}: ${outcome}.`, "interrupt-deadline"));
    }
    box.replaceChildren(card);
  };

  // applyControls enables the controls that apply to state: pause while the session runs
  // or waits for a human (and no pause is pending), resume while it is stopped, set
  // breakpoints and cancel until it ends, clear breakpoints when it has some.
  const applyControls = (state) => {
    const status = shortStatus(state.status);
    const live = !TERMINAL.has(status);
    const stopped = status === "interrupted" || !!state.interrupt;
    const bps = state.breakpoints || [];
    const pausing = bps.some((b) => b.id === "pause");
    const set = (action, on, why) => {
      const b = page.querySelector(`.controls [data-action="${action}"]`);
      b.disabled = !on;
      b.title = on ? "" : why;
    };
    const ended = `the session has ended (${status})`;
    set("pause", live && !stopped && !pausing, !live ? ended : stopped ? "the session is stopped already" : "a pause is pending: it stops before its next step");
    set("resume", live && stopped, !live ? ended : "the session is not stopped");
    set("cancel", live, ended);
    set("breakpoint", live, ended);
    set("clear-breakpoints", live && bps.length > 0, !live ? ended : "no breakpoints");
    f("bp-type").disabled = !live;
    f("breakpoints").textContent = bps.length ? "breakpoints: " + bps.map((b) => b.id === "pause" ? "pause (pending)" :
      `${b.position} ${b.tool ? "call of " + b.tool : b.step_type || b.step_id || "every step"}`).join(", ") : "";
  };

  // renderHeader shows the session's cost and seq now, or the past point's while one is
  // selected.
  const renderHeader = () => {
    const shown = past ? past.state : current;
    f("cost").textContent = money(shown.cost_usd) + (past ? " then" : "");
    f("seq").textContent = past ? `at seq ${past.seq} of ${current.seq}` : `seq ${current.seq}`;
    f("seq").className = past ? "badge past" : "";
    renderPlan(f("plan"), shown);
    renderArtifacts(shown);
  };

  // renderFork offers the steps a fork at the selected point may edit: those yet to run
  // there (pending, or failed: a failed step runs again).
  const renderFork = () => {
    const state = past ? past.state : current;
    const sel = f("fork-step");
    const keep = sel.value;
    const steps = ((state && state.steps) || []).filter((st) => ["pending", "failed"].includes(shortStatus(st.status)));
    sel.replaceChildren(el("option", { value: "" }, "no step edited"),
      ...steps.map((st) => el("option", { value: st.step.id }, `${st.step.id} (${st.step.type})`)));
    sel.value = steps.some((st) => st.step.id === keep) ? keep : "";
    if (sel.value !== keep || !keep) fillForkStep(); // else keep what is being typed
  };
  const fillForkStep = () => {
    const state = past ? past.state : current;
    const st = f("fork-step").value && state.steps.find((x) => x.step.id === f("fork-step").value);
    f("fork-edit").hidden = !st;
    if (!st) return;
    f("fork-type").value = st.step.type;
    f("fork-description").value = st.step.description || "";
  };
  f("fork-step").addEventListener("change", fillForkStep);

  // renderForkedFrom says what a fork was forked from and where.
  const renderForkedFrom = (state) => {
    const src = state.forked_from;
    const box = f("forked-from");
    if (!src || !src.source_session_id || box.dataset.shown) return;
    box.dataset.shown = "1";
    const m = src.modified_step;
    box.replaceChildren("Forked from ",
      el("a", { href: "#/session/" + encodeURIComponent(src.source_session_id), "data-testid": "forked-from-link" }, src.source_session_id),
      ` at seq ${src.source_seq}` + (src.step_index ? ` (after step ${src.step_index})` : ""),
      m ? ` with step ${m.id} edited (${m.type}): ${m.description || ""}` : "");
    box.hidden = false;
  };

  // loadForks lists the sessions forked from this one (GET /v1/sessions?forked_from=).
  const loadForks = async () => {
    try {
      const res = await api("GET", "/v1/sessions?limit=50&forked_from=" + encodeURIComponent(id));
      f("forks").replaceChildren(...(res.sessions || []).map((s) => el("li", { "data-fork": s.session_id },
        el("a", { href: "#/session/" + encodeURIComponent(s.session_id) }, s.session_id), " ",
        el("span", { class: "badge " + s.status }, s.status), ` · ${new Date(s.created_at).toLocaleString()}`)));
      f("forks-box").hidden = !(res.sessions || []).length;
    } catch (e) { /* a gateway without the filter: no list */ }
  };

  const refresh = async () => {
    try {
      const [st, tl] = await Promise.all([socket.request("state", { session_id: id }), socket.request("timeline", { session_id: id })]);
      current = st.state;
      timeline = tl.entries || [];
      const status = shortStatus(current.status);
      f("status").textContent = status;
      f("status").className = "badge " + status;
      f("goal").textContent = current.goal;
      f("host").textContent = `on ${st.host}`;
      renderHeader();
      renderForkedFrom(current);
      renderAwaiting(current);
      renderInterrupt(current);
      applyControls(current);
      view.refresh(current);
      if (!f("fork-step").options.length || !past) renderFork();
      const ended = timeline.filter((e) => e.ended_seq > 0).length;
      const slider = f("slider");
      const atEnd = Number(slider.value) >= Number(slider.max);
      slider.max = String(ended);
      if (atEnd) slider.value = String(ended);
    } catch (e) {
      if (!String(e.message).startsWith("not_found")) toast(e.message);
    }
  };
  const scheduleRefresh = () => {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 250);
  };

  const transcript = mountTranscript(f("transcript"), id, { api, headers: () => (token ? { Authorization: "Bearer " + token } : {}) }); // transcript.js
  const events = f("events");
  let pending = []; // events not yet listed: listed once per frame (a replay of thousands lays out once)
  const listEvents = () => {
    events.append(...pending.splice(0).slice(-1000).map((ev) => {
      const detail = ev.step_id ? ev.step_id : ev.type === "session_started" ? ev.goal : "";
      return el("li", { "data-seq": ev.seq, "data-type": ev.type, title: JSON.stringify(ev) },
        el("b", {}, String(ev.seq)), el("span", { class: "type" }, ev.type), detail || "");
    }));
    while (events.children.length > 1000) events.firstElementChild.remove();
    events.scrollTop = events.scrollHeight;
  };
  let gone = false;
  // The subscription starts once the transcript has painted: its replay of the stored
  // events would hold the page's thread first.
  transcript.ready.then(() => gone || socket.subscribe(id, (ev) => {
    transcript.onEvent(ev);
    if (!pending.length) requestAnimationFrame(listEvents);
    pending.push(ev);
    scheduleRefresh();
  }, (d) => transcript.onDelta(d)));

  const slider = f("slider");
  const showPast = async () => {
    const k = Number(slider.value);
    try {
      const res = await socket.request("state_at", { session_id: id, step_index: k });
      pendingStep = { k, seq: res.seq };
      f("slider-label").textContent = `after step ${k} of ${slider.max} (seq ${res.seq}): ${shortStatus(res.state.status)}`;
      renderPlan(f("past-plan"), res.state);
      view.showAt(res.seq, res.state);
    } catch (e) { toast(e.message); }
  };
  slider.addEventListener("input", showPast);
  slider.addEventListener("change", showPast);

  const act = async (op, fields = {}) => {
    try {
      const res = await socket.request(op, { session_id: id, ...fields });
      toast(`${op}: ok`);
      return res;
    } catch (e) { toast(e.message); }
  };
  page.querySelector('[data-action="pause"]').addEventListener("click", () => act("pause"));
  page.querySelector('[data-action="resume"]').addEventListener("click", () => act("resume"));
  page.querySelector('[data-action="cancel"]').addEventListener("click", () => act("cancel", { reason: "cancelled from the console", by: "console" }));
  page.querySelector('[data-action="breakpoint"]').addEventListener("click", () => {
    const t = f("bp-type").value.trim();
    act("set_breakpoint", t ? { step_type: t } : {});
  });
  page.querySelector('[data-action="clear-breakpoints"]').addEventListener("click", () => act("clear_breakpoints"));
  page.querySelector('[data-action="fork"]').addEventListener("click", async () => {
    // At the selected point (by step when the slider chose it, else by seq), with the
    // edited step merged in and the changed answer given to the fork's first question.
    const fields = past && past.stepIndex === null ? { seq: past.seq } : { step_index: past ? past.stepIndex : Number(slider.value) };
    if (f("fork-id").value.trim()) fields.new_session_id = f("fork-id").value.trim();
    const stepID = f("fork-step").value;
    if (stepID) {
      const m = { id: stepID };
      const st = ((past || {}).state || current).steps.find((x) => x.step.id === stepID).step;
      if (f("fork-type").value.trim() && f("fork-type").value.trim() !== st.type) m.type = f("fork-type").value.trim();
      if (f("fork-description").value !== st.description) m.description = f("fork-description").value;
      fields.modified_step = m;
    }
    const answer = f("fork-answer").value.trim();
    const res = await act("fork", fields);
    if (!res) return;
    if (answer) await answerFork(res.session_id, answer);
    location.hash = "#/session/" + encodeURIComponent(res.session_id);
  });

  // answerFork gives the fork's first open question the changed answer (JSON or text),
  // once the fork asks it.
  const answerFork = async (fork, text) => {
    let value = text;
    try { value = JSON.parse(text); } catch { /* text */ }
    const until = Date.now() + 30000;
    while (Date.now() < until) {
      try {
        const st = (await socket.request("state", { session_id: fork })).state;
        const r = (st.awaiting || [])[0];
        if (r) {
          await socket.request("input", { session_id: fork, step_id: r.step_id, request_id: r.request_id, input: value });
          return toast(`fork: answered ${r.step_id}`);
        }
        if (TERMINAL.has(shortStatus(st.status))) break;
      } catch (e) { return toast(e.message); }
      await new Promise((ok) => setTimeout(ok, 250));
    }
    toast("fork: it asked no question to answer");
  };

  const ticker = setInterval(() => {
    for (const c of page.querySelectorAll("[data-deadline]")) c.textContent = timeLeft(c.dataset.deadline);
  }, 1000);
  refresh();
  loadForks();
  leave = () => { gone = true; socket.unsubscribe(id); clearTimeout(refreshTimer); clearInterval(ticker); transcript.close(); };
}

// ---- memories ----

// memoriesPage lists a user's long-term memories (GET /v1/memories), the newest or those
// matching a search, and deletes one (DELETE /v1/memories/{id}).
function memoriesPage(main) {
  const page = $("#tpl-memories").content.cloneNode(true).firstElementChild;
  main.append(page);
  const form = $("#memory-form", page);
  const tbody = $("tbody", page);
  const when = (t) => (t ? new Date(t).toLocaleString() : "");
  const load = async () => {
    const user = form.user.value.trim(), q = form.q.value.trim();
    const params = new URLSearchParams({ limit: "100" });
    if (user) params.set("user", user);
    if (q) params.set("q", q);
    try {
      const res = await api("GET", "/v1/memories?" + params);
      field(page, "none").hidden = res.memories.length > 0;
      tbody.replaceChildren(...res.memories.map((m) => el("tr", { "data-memory": m.id },
        el("td", {}, el("code", {}, m.id)),
        el("td", { "data-col": "text" }, m.text),
        el("td", {}, when(m.updated_at)),
        el("td", {}, m.expires_at ? when(m.expires_at) : "never"),
        el("td", {}, m.session_id ? el("a", { href: "#/session/" + encodeURIComponent(m.session_id) }, m.session_id) : ""),
        el("td", { class: "write" }, el("button", { type: "button", "data-testid": "memory-delete", onclick: async () => {
          if (!confirm(`Delete memory ${m.id}?`)) return;
          try {
            await api("DELETE", "/v1/memories/" + encodeURIComponent(m.id) + (user ? "?user=" + encodeURIComponent(user) : ""));
            toast(`Deleted memory ${m.id}`);
            load();
          } catch (e) { toast(e.message); }
        } }, "Delete")))));
    } catch (e) { toast(e.message); }
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); load(); });
  load();
}

// ---- cluster ----

function clusterPage(main) {
  const page = $("#tpl-cluster").content.cloneNode(true).firstElementChild;
  main.append(page);
  const since = (t) => {
    if (!t) return "";
    const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  };
  const load = async () => {
    try {
      const c = await api("GET", "/v1/cluster");
      field(page, "node").textContent = c.node;
      field(page, "build").textContent = c.version ? `version ${c.version}, journal format ${c.journal_format}` : "";
      // member_details describes each member; an older gateway sends addresses only.
      const ms = c.member_details || c.members.map((address) => ({ address, self: address === c.node }));
      field(page, "members").replaceChildren(...ms.map((m) => el("tr", { "data-member": m.address, class: m.health === "failing" ? "failing" : "" },
        el("td", {}, m.address + (m.self ? " (this node)" : "")), el("td", { "data-col": "version" }, m.version || "?"),
        el("td", {}, m.journal_format ? String(m.journal_format) : "?"),
        el("td", { title: m.started_at ? "started " + new Date(m.started_at).toLocaleString() : "" }, since(m.started_at)),
        el("td", { "data-col": "sessions" }, String(m.sessions_hosted ?? "")), el("td", { "data-col": "leases" }, String(m.leases_held ?? "")),
        el("td", {}, m.health || ""))));
      const ds = c.departed || [];
      field(page, "no-departed").hidden = ds.length > 0;
      field(page, "departed").replaceChildren(...ds.map((d) => el("tr", { class: "departed", "data-departed": d.address },
        el("td", {}, d.address), el("td", {}, d.version || "?"),
        el("td", { title: new Date(d.left_at).toLocaleString() }, since(d.left_at) + " ago"),
        el("td", {}, d.how === "dead" ? "dropped as dead" : "left gracefully"),
        el("td", { title: d.moved_at ? "taken over " + new Date(d.moved_at).toLocaleString() : "" },
          d.sessions_moved ? `${d.sessions_moved} taken over by this node` : "none taken over by this node"))));
      addOptions(fNode, ms.map((m) => m.address));
    } catch (e) { toast(e.message); }
  };
  const rows = field(page, "restarts");
  rows.replaceChildren();
  const fNode = field(page, "f-node"), fKind = field(page, "f-kind"), fSession = field(page, "f-session");
  const addOptions = (sel, values) => {
    const have = new Set([...sel.options].map((o) => o.value));
    for (const v of values) if (v && !have.has(v)) { sel.append(el("option", { value: v }, v)); have.add(v); }
  };
  // shows matches the restart r against the filters (member, kind, session id contains).
  const shows = (r) => (!fNode.value || r.node === fNode.value) && (!fKind.value || r.kind === fKind.value) &&
    (!fSession.value.trim() || (r.session_id || "").includes(fSession.value.trim()));
  const all = [];
  const filter = () => {
    let n = 0;
    for (const { r, tr } of all) { tr.hidden = !shows(r); if (!tr.hidden) n++; }
    field(page, "f-count").textContent = `${n} of ${all.length}`;
  };
  for (const f of [fNode, fKind]) f.addEventListener("change", filter);
  fSession.addEventListener("input", filter);
  const seen = new Set();
  socket.followRestarts((r) => {
    const key = `${r.node}/${r.node_seq ?? r.seq}`; // node_seq numbers a member's own records
    if (seen.has(key)) return;
    seen.add(key);
    const tr = el("tr", { "data-restart": r.seq },
      el("td", {}, String(r.seq)), el("td", {}, new Date(r.at).toLocaleTimeString()), el("td", {}, r.node),
      el("td", {}, r.kind), el("td", {}, r.actor), el("td", {}, r.session_id || ""), el("td", {}, r.reason), el("td", {}, r.directive));
    rows.prepend(tr);
    all.push({ r, tr });
    addOptions(fNode, [r.node]);
    addOptions(fKind, [r.kind]);
    filter();
  });
  load();
  const timer = setInterval(load, 5000);
  leave = () => clearInterval(timer);
}

// ---- OIDC sign-in: the authorization-code flow with PKCE (RFC 7636), WebCrypto only ----

let oidc = null; // GET /v1/console/config's oidc: {issuer, client_id, scopes}, or null

const b64url = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const randomString = (bytes) => b64url(crypto.getRandomValues(new Uint8Array(bytes)));
const redirectURI = () => location.origin + "/console/";
const isJWT = (t) => typeof t === "string" && /^[\w-]+\.[\w-]+\.[\w-]*$/.test(t);

// discover fetches the issuer's discovery document (the CSP's connect-src allows the
// issuer's origin when the gateway configures one).
async function discover(issuer) {
  const resp = await fetch(issuer.replace(/\/$/, "") + "/.well-known/openid-configuration");
  if (!resp.ok) throw new Error(`sign-in: the issuer's discovery answered ${resp.status}`);
  const d = await resp.json();
  if (d.issuer !== issuer || !d.authorization_endpoint || !d.token_endpoint) {
    throw new Error("sign-in: the issuer's discovery document does not match " + issuer);
  }
  return d;
}

// oidcSignIn sends the browser to the issuer's authorization endpoint; the verifier and
// state wait in sessionStorage for the redirect back.
async function oidcSignIn() {
  const d = await discover(oidc.issuer);
  const verifier = randomString(48); // 64 characters
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const state = randomString(24);
  sessionStorage.setItem("fathom.oidc", JSON.stringify({ state, verifier, hash: location.hash }));
  const q = new URLSearchParams({
    response_type: "code", client_id: oidc.client_id, redirect_uri: redirectURI(), scope: oidc.scopes,
    code_challenge: challenge, code_challenge_method: "S256", state,
  });
  location.assign(d.authorization_endpoint + "?" + q);
}

// oidcReturn finishes a sign-in when the issuer redirected back (?code=&state=, or
// ?error=): it checks the state, exchanges the code and the verifier at the token
// endpoint and returns the bearer token: the access_token when it is a JWT, else the
// id_token. It returns "" when the page was not opened by a redirect back.
async function oidcReturn() {
  const q = new URLSearchParams(location.search);
  if (!q.has("code") && !q.has("error")) return "";
  const pending = JSON.parse(sessionStorage.getItem("fathom.oidc") || "null");
  sessionStorage.removeItem("fathom.oidc");
  history.replaceState(null, "", location.pathname + ((pending && pending.hash) || location.hash));
  if (q.has("error")) throw new Error(`sign-in refused by the issuer: ${q.get("error")} ${q.get("error_description") || ""}`);
  if (!oidc || !pending || q.get("state") !== pending.state) {
    throw new Error("sign-in refused: the state does not match the sign-in this browser started");
  }
  const d = await discover(oidc.issuer);
  const resp = await fetch(d.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code", code: q.get("code"), redirect_uri: redirectURI(),
      client_id: oidc.client_id, code_verifier: pending.verifier,
    }),
  });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(`sign-in: the token endpoint answered ${body.error || resp.status} ${body.error_description || ""}`);
  const t = isJWT(body.access_token) ? body.access_token : body.id_token;
  if (!isJWT(t)) throw new Error("sign-in: the token endpoint returned no JWT");
  return t;
}

async function start() {
  try {
    const resp = await fetch("/v1/console/config");
    if (resp.ok) oidc = (await resp.json()).oidc || null;
  } catch { /* a gateway without the route: tokens only */ }
  if (oidc) {
    const b = $("#oidc-signin");
    b.textContent = "Sign in with " + new URL(oidc.issuer).host;
    b.hidden = false;
    b.addEventListener("click", () => oidcSignIn().catch((e) => toast(e.message)));
  }
  try {
    const t = await oidcReturn();
    if (t) {
      $("#token").value = t;
      return useToken(t);
    }
  } catch (e) {
    toast(e.message);
  }
  $("#token").value = token;
  useToken(token, true);
}

$("#token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  useToken($("#token").value.trim());
});
window.addEventListener("hashchange", route);
start();
