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
  // deltas (streamed model text) too.
  subscribe(session, handler, onDelta) {
    this.subs.set(session, { handler, last: 0, onDelta });
    this.ready.then(() => this.send({ op: "subscribe", session_id: session, deltas: !!onDelta }));
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
    if (first) this.ready.then(() => this.send({ op: "subscribe_restarts" }));
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
  const view = FathomTimeline.mount({ id, page, renderPlan }); // timeline.js: Gantt, plan graph, time travel by seq, compare

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
      el("p", { "data-testid": "approval-deadline" }, approvalDeadline(r)),
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

  const renderArtifacts = (state) => {
    f("artifacts").replaceChildren(...(state.artifacts || []).map((a) => {
      const link = el("a", { href: "#", "data-artifact": a.path }, `${a.artifact_type}/${a.filename}`);
      link.addEventListener("click", async (ev) => {
        ev.preventDefault();
        const resp = await fetch(`/v1/sessions/${encodeURIComponent(id)}/artifacts/${encodeURIComponent(a.artifact_type)}/${encodeURIComponent(a.filename)}`,
          { headers: token ? { Authorization: "Bearer " + token } : {} });
        if (!resp.ok) return toast(`download: ${resp.status}`);
        const url = URL.createObjectURL(await resp.blob());
        const dl = el("a", { href: url, download: a.filename });
        document.body.append(dl);
        dl.click();
        dl.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      });
      return el("li", {}, link, ` · ${a.size} bytes · ${a.content_type}`);
    }));
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
      f("cost").textContent = money(current.cost_usd);
      f("seq").textContent = `seq ${current.seq}`;
      f("host").textContent = `on ${st.host}`;
      renderPlan(f("plan"), current);
      renderAwaiting(current);
      renderArtifacts(current);
      view.refresh(current);
      const ended = timeline.filter((e) => e.ended_seq > 0).length;
      const slider = f("slider");
      const atEnd = Number(slider.value) >= Number(slider.max);
      slider.max = String(ended);
      if (atEnd) slider.value = String(ended);
      for (const b of page.querySelectorAll(".controls button")) b.disabled = TERMINAL.has(status);
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
  let left = false;
  // The subscription starts once the transcript has painted: its replay of the stored
  // events would hold the page's thread first.
  transcript.ready.then(() => left || socket.subscribe(id, (ev) => {
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
    const fields = { step_index: Number(slider.value) };
    if (f("fork-id").value.trim()) fields.new_session_id = f("fork-id").value.trim();
    const res = await act("fork", fields);
    if (res) location.hash = "#/session/" + encodeURIComponent(res.session_id);
  });

  refresh();
  leave = () => { left = true; socket.unsubscribe(id); clearTimeout(refreshTimer); transcript.close(); };
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
