// Fathom console: a session's transcript (GET /v1/sessions/{id}/transcript), per agent,
// with the model's text growing live from the subscription's deltas. Plain JavaScript,
// no dependencies; the gateway renders markdown to HTML (package transcript: raw HTML
// dropped, unsafe links removed, code highlighted with chroma.css), so this file only
// places that HTML and builds everything else as text.
"use strict";

// mountTranscript fills box with session id's transcript. deps: api(method, path) (the
// console's authenticated JSON call) and headers() (its Authorization header, for
// artifact downloads). It returns {ready, onEvent(ev), onDelta(frame), showAt(seq),
// close()}: ready settles once the first load has rendered (or failed); the session page
// hands it every event and delta frame of its subscription; showAt(seq) shows the
// transcript as the journal held it at seq (GET ...?seq=N; 0: now, live again).
//
// The element showing event N has id="seq-N" (timeline.js's convention); the transcript
// hears the timeline's "fathom:seq" window event and opens, marks and shows the entry of
// that seq (the first entry from it on).
function mountTranscript(box, id, deps) {
  const mk = (tag, attrs = {}, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== undefined && c !== null && c !== false) e.append(c);
    return e;
  };
  const base = `/v1/sessions/${encodeURIComponent(id)}/transcript`;
  const live = new Map(); // call id -> {attempt, text}: streamed text of calls in flight
  const open = new Map(); // data-key -> open? (what the reader expanded or collapsed)
  const full = new Map(); // a cut value's full path -> its whole value, once fetched
  let shown = 0; // seq of the transcript on the page
  let at = 0; // the past seq shown (0: now)
  let ids = new Set(); // the seq-N ids given in this rendering
  let laneOf = new Map(); // agent id -> {d, fill, entries}: to open a lane at a seq
  let timer = null;
  let closed = false;
  let loading = false;
  let again = false;

  const money = (v) => "$" + Number(v || 0).toFixed(4);
  const bytes = (n) => (n >= 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B");

  // collapsible is a <details> that remembers whether the reader opened it.
  const collapsible = (key, summary, isOpen, ...body) => {
    const d = mk("details", { "data-key": key }, mk("summary", {}, summary), ...body);
    d.open = open.has(key) ? open.get(key) : isOpen;
    d.addEventListener("toggle", () => open.set(key, d.open));
    return d;
  };

  // jsonBlock pretty-prints JSON text, collapsible.
  const jsonBlock = (key, text, label) => {
    let pretty = text;
    try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch { /* shown as it came */ }
    return collapsible(key, `${label} (JSON, ${bytes(text.length)})`, true, mk("pre", { class: "json", "data-testid": "json" }, pretty));
  };

  // valueEl shows a transcript value: its HTML (markdown rendered by the gateway), JSON
  // or text; a cut value gets "show all", which fetches the whole.
  const valueEl = (v, key, label) => {
    if (!v) return null;
    if (v.cut && full.has(v.full)) v = full.get(v.full);
    let body;
    if (v.html) body = mk("div", { class: "md" });
    else if (v.json) body = jsonBlock(key, v.text, label);
    else if (looksJSON(v.text) && !v.cut) body = jsonBlock(key, v.text, label);
    else body = mk("pre", { class: "text" }, v.text);
    if (v.html) body.innerHTML = v.html; // the gateway's safe rendering (no raw HTML, no unsafe links)
    const wrap = mk("div", { class: "value", "data-value": key }, body);
    if (v.cut) {
      const btn = mk("button", { class: "link", "data-testid": "show-all" }, `show all (${bytes(v.bytes)})`);
      btn.addEventListener("click", async () => {
        btn.disabled = true;
        try {
          const whole = await deps.api("GET", v.full);
          full.set(v.full, whole);
          wrap.replaceWith(valueEl(whole, key, label));
        } catch (e) {
          btn.disabled = false;
          btn.textContent = "show all failed: " + e.message;
        }
      });
      wrap.append(mk("p", { class: "cut" }, `… cut at ${bytes(v.text.length)} of ${bytes(v.bytes)} `, btn));
    }
    return wrap;
  };
  const looksJSON = (s) => {
    const t = String(s || "").trim();
    if (!t || (t[0] !== "{" && t[0] !== "[")) return false;
    try { JSON.parse(t); return true; } catch { return false; }
  };

  const artifactLink = (a) => {
    const link = mk("a", { href: "#", "data-testid": "artifact-link", "data-artifact": a.path }, `${a.artifact_type}/${a.filename}`);
    link.addEventListener("click", async (ev) => {
      ev.preventDefault();
      const resp = await fetch(a.url, { headers: deps.headers() });
      if (!resp.ok) return;
      const url = URL.createObjectURL(await resp.blob());
      const dl = mk("a", { href: url, download: a.filename });
      document.body.append(dl);
      dl.click();
      dl.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    });
    return mk("span", { class: "artifact" }, "artifact ", link, ` (${bytes(a.size)})`);
  };

  const meta = (e) => {
    const bits = [];
    if (e.step_id) bits.push(e.step_id);
    if (e.duration_ms) bits.push(`${e.duration_ms} ms`);
    if (e.tokens) bits.push(`${e.tokens} tokens`);
    if (e.cost_usd) bits.push(money(e.cost_usd));
    return mk("span", { class: "meta" }, bits.join(" · "));
  };

  // entryEl renders one entry of a lane.
  const entryEl = (lane, e) => {
    const key = `${lane}/${e.seq}`;
    const anchor = ids.has(e.seq) ? null : `seq-${e.seq}`;
    ids.add(e.seq);
    const li = mk("li", { id: anchor, class: "entry " + e.kind, "data-entry": e.kind, "data-seq": e.seq, "data-pending": e.pending ? "true" : null, "data-call": e.call_id || null, "data-purpose": e.purpose || null });
    const head = (label) => li.append(mk("div", { class: "head" }, mk("b", {}, label), " ", meta(e)));
    switch (e.kind) {
      case "answer": {
        head(`model${e.purpose ? " · " + e.purpose : ""}${e.pending ? " · answering…" : ""}`);
        if (e.reasoning) li.append(collapsible(key + "/reasoning", "reasoning", false, valueEl(e.reasoning, key + "/reasoning", "reasoning")));
        if (e.pending) {
          const l = live.get(e.call_id);
          li.append(mk("div", { class: "live", "data-live": e.call_id, "data-testid": "live-answer" }, l ? l.text : ""));
        } else {
          if (e.text && e.text.bytes) li.append(valueEl(e.text, key + "/text", "answer"));
          if ((e.tool_calls || []).length) li.append(mk("p", { class: "meta" }, "calls " + e.tool_calls.join(", ")));
        }
        break;
      }
      case "tool": {
        head(`tool ${e.tool}${e.pending ? " · running…" : ""}`);
        li.setAttribute("data-tool", e.tool);
        li.append(mk("div", { class: "label" }, "arguments"), valueEl(e.args, key + "/args", "arguments"));
        if (e.error) {
          li.append(mk("p", { class: "tool-error", "data-testid": "tool-error" },
            mk("b", {}, `ToolError (${e.error.type})`), `${e.error.retryable ? " retryable" : ""}: ${e.error.message}`));
        } else if (e.result) {
          li.append(mk("div", { class: "label" }, "result"), valueEl(e.result, key + "/result", "result"));
        }
        for (const a of e.artifacts || []) li.append(artifactLink(a));
        break;
      }
      case "handoff": {
        const h = e.handoff || {};
        head("hand-off");
        li.append(mk("p", {}, mk("span", { class: "badge " + h.status }, h.status), h.action ? ` → orchestrator: ${h.action}` : ""));
        li.append(valueEl(h.summary, key + "/summary", "summary"));
        if (h.facts) li.append(collapsible(key + "/facts", "facts", false, valueEl(h.facts, key + "/facts-json", "facts")));
        break;
      }
      case "question":
      case "approval": {
        head(e.kind === "approval" ? `approval of ${e.tool}` : "question to a human");
        if (e.kind === "approval") li.append(valueEl(e.args, key + "/args", "arguments"));
        else li.append(valueEl(e.text, key + "/text", "question"));
        if ((e.options || []).length) li.append(mk("p", { class: "meta" }, "options: " + e.options.join(", ")));
        if (e.pending) li.append(mk("p", { class: "meta" }, "waiting for an answer"));
        else {
          li.append(mk("p", { "data-testid": "decision" }, e.decision ? `${e.decision} by ${e.answered_by}` : `answered by ${e.answered_by}`));
          if (e.answer) li.append(valueEl(e.answer, key + "/answer", "answer"));
        }
        break;
      }
      case "artifact":
        head("artifact");
        for (const a of e.artifacts || []) li.append(artifactLink(a));
        break;
      case "cancelled":
        head(`cancelled${e.answered_by ? " by " + e.answered_by : ""}`);
        li.append(valueEl(e.text, key + "/text", "reason"));
        break;
      default: {
        const labels = { goal: "goal", message: "user message", plan: "plan", step: "step", task: "task", error: "error", budget: "budget crossed", failed: "failed", result: "result" };
        head(labels[e.kind] || e.kind);
        li.append(valueEl(e.text, key + "/text", e.kind));
      }
    }
    return li;
  };

  const render = (t) => {
    ids = new Set();
    laneOf = new Map();
    const parts = [];
    if (t.result) {
      parts.push(mk("section", { class: "final-result", "data-testid": "final-result" },
        mk("h2", {}, "Result"), valueEl(t.result, "result", "result")));
    } else if (t.error) {
      parts.push(mk("section", { class: "final-result failed", "data-testid": "final-error" }, mk("h2", {}, "Failed"), mk("pre", { class: "text" }, t.error)));
    }
    // Sub-agent lanes start collapsed when there are many (a lane's entries are built
    // when it is first opened): the page paints the result and the lanes at once.
    const many = t.agents.length > 4;
    const lanes = t.agents.map((a) => {
      const title = a.id === "orchestrator" ? "orchestrator" : `${a.id} (${a.agent_type || "sub-agent"}${a.step_id ? ", " + a.step_id : ""})`;
      const summary = mk("span", {}, mk("b", {}, title), " ", a.status ? mk("span", { class: "badge " + a.status }, a.status) : "", ` ${a.entries.length} entries`);
      const key = "lane/" + a.id;
      const d = collapsible(key, summary, a.id === "orchestrator" || !many);
      d.classList.add("lane");
      d.setAttribute("data-lane", a.id);
      const fill = () => { if (!d.dataset.filled) { d.dataset.filled = "1"; d.append(mk("ol", { class: "entries" }, ...a.entries.map((e) => entryEl(a.id, e)))); } };
      if (d.open) fill();
      d.addEventListener("toggle", () => { if (d.open) fill(); });
      laneOf.set(a.id, { d, fill, entries: a.entries });
      return d;
    });
    parts.push(mk("div", { class: "lanes", "data-testid": "lanes" }, ...lanes));
    box.replaceChildren(...parts);
    box.dataset.seq = String(t.seq);
    box.dataset.at = String(at);
    performance.mark("fathom:transcript-rendered");
  };

  const load = async () => {
    if (loading) { again = true; return; }
    loading = true;
    try {
      const want = at;
      const t = await deps.api("GET", at ? `${base}?seq=${at}` : base);
      if (closed || want !== at) return; // left, or moved to another point meanwhile
      if (t.seq === shown && box.dataset.seq && box.dataset.at === String(at)) return; // nothing new
      shown = t.seq;
      for (const c of [...live.keys()]) if (!pendingCall(t, c)) live.delete(c);
      render(t);
    } catch (e) {
      if (!String(e.message).startsWith("not_found")) box.replaceChildren(mk("p", { class: "meta" }, "transcript: " + e.message));
    } finally {
      loading = false;
      if (again && !closed) { again = false; schedule(); }
    }
  };
  const pendingCall = (t, call) => t.agents.some((a) => a.entries.some((e) => e.pending && e.call_id === call));
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(load, 150);
  };

  // jump opens the lane holding the first entry at or after seq, marks it and shows it.
  const jump = (ev) => {
    const seq = Number(ev.detail && ev.detail.seq);
    if (!seq) return;
    let best = null;
    for (const [lane, l] of laneOf) {
      for (const e of l.entries) if (e.seq >= seq && (!best || e.seq < best.seq)) best = { seq: e.seq, lane, l };
    }
    if (!best) return;
    best.l.fill();
    best.l.d.open = true;
    for (const j of box.querySelectorAll(".entry.marked")) j.classList.remove("marked");
    const li = [...best.l.d.querySelectorAll(".entry")].find((x) => Number(x.dataset.seq) === best.seq);
    if (li) {
      li.classList.add("marked");
      li.scrollIntoView({ block: "center" });
    }
  };
  window.addEventListener("fathom:seq", jump);

  return {
    ready: load(),
    onEvent(ev) { if (!at && ev.seq > shown) schedule(); },
    showAt(seq) {
      if (Number(seq) === at) return;
      at = Number(seq) || 0;
      clearTimeout(timer);
      load();
    },
    onDelta(f) {
      if (f.kind && f.kind !== "text") return;
      let l = live.get(f.call_id);
      if (!l || l.attempt !== f.attempt) { l = { attempt: f.attempt, text: "" }; live.set(f.call_id, l); }
      l.text += f.text;
      const target = box.querySelector(`[data-live="${CSS.escape(f.call_id)}"]`);
      if (target) target.textContent = l.text;
    },
    close() { closed = true; clearTimeout(timer); window.removeEventListener("fathom:seq", jump); },
  };
}
