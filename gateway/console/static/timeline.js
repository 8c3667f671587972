// Fathom console: the session page's timeline (a Gantt of the run), plan graph, exact
// time travel and the comparison of two points. It draws the gateway's gantt op
// (core.Gantt: bars, marks, plan versions, cost, folded from the journal through a seq)
// and state_at; console.js's sessionPage mounts it (FathomTimeline.mount) and hands it
// the current state and each past point it shows. It uses console.js's helpers (el,
// toast, money, shortStatus, socket) and declares no global of its own but
// FathomTimeline. It loads after console.js, whose first page is drawn once its start
// has awaited the console's config.
//
// Jumping to a place in the run: clicking a bar dispatches a "fathom:seq" CustomEvent on
// window ({detail: {seq, span}}; seq is the event that opened the bar) and scrolls to the
// element with id "seq-<N>" when the page has one. That id is the convention for
// anchoring any view of the run (the transcript) to an event: the element that shows
// event N carries id="seq-N" (without one, the first .transcript entry with a data-seq
// of N or more is shown). The events list's row for N (data-seq="N") is highlighted too.
"use strict";

window.FathomTimeline = (() => {
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = (tag, attrs = {}, ...children) => {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, v);
    for (const c of children) if (c !== undefined && c !== null) e.append(c);
    return e;
  };
  const ms = (ns) => Number(ns || 0) / 1e6;
  const fmtDuration = (m) => (m < 1000 ? `${m.toFixed(1)} ms` : m < 60000 ? `${(m / 1000).toFixed(2)} s` : `${(m / 60000).toFixed(1)} min`);
  const tokens = (n) => Number(n || 0).toLocaleString("en-US");
  // place positions e on the time axis through the CSSOM: the console's CSP allows no
  // style attributes.
  const place = (e, left, width) => {
    e.style.left = left;
    if (width !== undefined) e.style.width = width;
    return e;
  };

  // jumpTo tells the page's other views (the transcript) where the run was at seq.
  function jumpTo(seq, span) {
    window.dispatchEvent(new CustomEvent("fathom:seq", { detail: { seq, span } }));
    // The id first; else the transcript's first entry from seq on (its entries carry
    // data-seq).
    const anchor = document.getElementById(`seq-${seq}`) ||
      [...document.querySelectorAll(".transcript [data-seq]")].find((e) => Number(e.dataset.seq) >= seq);
    if (anchor) anchor.scrollIntoView({ block: "center", behavior: "smooth" });
    for (const li of document.querySelectorAll("[data-seq].jumped")) li.classList.remove("jumped");
    const row = document.querySelector(`ol.events [data-seq="${seq}"]`);
    if (row) {
      row.classList.add("jumped");
      row.scrollIntoView({ block: "nearest" });
    }
  }

  // lanesOf orders the bars in lanes: the session's own (planning, re-plans,
  // interrupts, the closing call), then per step its attempts, each sub-agent's runs,
  // its LLM calls, tool calls and waits.
  function lanesOf(spans) {
    const lanes = new Map();
    const lane = (key, label, cls) => {
      if (!lanes.has(key)) lanes.set(key, { key, label, cls, spans: [] });
      return lanes.get(key);
    };
    lane("session", "session", "g-lane-session");
    const stepOrder = [];
    for (const s of spans) if (s.kind === "step" && !stepOrder.includes(s.step_id)) stepOrder.push(s.step_id);
    for (const id of stepOrder) lane(`step:${id}`, `step ${id}`, "g-lane-step");
    for (const s of spans) {
      const step = s.step_id || "";
      let l;
      if (!step || !stepOrder.includes(step)) {
        l = s.kind === "llm" || s.kind === "tool" ? lane("calls", "orchestrator calls", "g-lane-sub") : lane("session", "session", "g-lane-session");
      } else if (s.kind === "step") {
        l = lane(`step:${step}`);
      } else if (s.kind === "subagent") {
        l = lane(`agent:${step}:${s.sub_agent_id}`, `↳ ${s.sub_agent_id}`, "g-lane-sub");
      } else {
        const what = { llm: "LLM calls", tool: "tool calls", wait: "waits" }[s.kind] || s.kind;
        l = lane(`${s.kind}:${step}`, `↳ ${what}`, "g-lane-sub");
      }
      l.spans.push(s);
    }
    // Sub-lanes sit under their step: order by step, then the step's own lane first.
    const rank = (key) => {
      if (key === "session") return [-2, 0, key];
      if (key === "calls") return [-1, 0, key];
      const step = key.startsWith("agent:") ? key.split(":")[1] : key.slice(key.indexOf(":") + 1);
      const kindRank = { step: 0, agent: 1, llm: 2, tool: 3, wait: 4 }[key.split(":")[0]] ?? 5;
      return [stepOrder.indexOf(step), kindRank, key];
    };
    return [...lanes.values()].filter((l) => l.spans.length).sort((a, b) => {
      const ra = rank(a.key), rb = rank(b.key);
      return ra[0] - rb[0] || ra[1] - rb[1] || (ra[2] < rb[2] ? -1 : ra[2] > rb[2] ? 1 : 0);
    });
  }

  // renderGantt draws g's bars on a shared time axis; waits on humans and interrupts
  // are shaded across every lane, marks are vertical lines.
  function renderGantt(box, g) {
    const t0 = Number(g.start_unix_nano), t1 = Math.max(Number(g.end_unix_nano), t0 + 1);
    const x = (ns) => `${Math.max(0, (100 * (Number(ns) - t0)) / (t1 - t0))}%`;
    const w = (a, b) => `${Math.max((100 * (Number(b) - Number(a))) / (t1 - t0), 0)}%`;
    const rows = lanesOf(g.spans || []).map((l) => {
      const track = el("div", { class: "g-track" });
      for (const s of l.spans) {
        const end = Number(s.end_seq) ? s.end_unix_nano : g.end_unix_nano;
        const d = ms(end) - ms(s.start_unix_nano);
        const title = `${s.kind} ${s.label}: ${fmtDuration(d)} · ${s.status}` + (s.attempt ? ` · attempt ${s.attempt}` : "") +
          (s.tokens ? ` · ${tokens(s.tokens)} tokens` : "") + (s.cost_usd ? ` · ${money(s.cost_usd)}` : "") +
          ` · seq ${s.start_seq}–${Number(s.end_seq) || "…"}`;
        const bar = el("div", {
          class: `g-bar kind-${s.kind} st-${String(s.status).replace(/\W+/g, "_")}${s.retry ? " retry" : ""}${Number(s.end_seq) ? "" : " open"}`,
          title,
          "data-span": s.id, "data-kind": s.kind, "data-step": s.step_id || "", "data-start-seq": s.start_seq,
          "data-end-seq": s.end_seq, "data-duration-ms": d.toFixed(3), tabindex: 0, role: "button",
        }, el("span", { class: "g-bar-text" }, `${s.kind === "step" || s.kind === "subagent" ? s.label + " " : ""}${fmtDuration(d)}`));
        place(bar, x(s.start_unix_nano), w(s.start_unix_nano, end));
        const go = () => jumpTo(Number(s.start_seq), s);
        bar.addEventListener("click", go);
        bar.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go(); });
        track.append(bar);
      }
      return el("div", { class: "g-lane " + l.cls, "data-gantt-lane": l.key }, el("div", { class: "g-lane-label", title: l.label }, l.label), track);
    });
    const overlay = el("div", { class: "g-overlay" });
    for (const s of g.spans || []) {
      if (s.kind !== "wait" && s.kind !== "interrupt") continue;
      const end = Number(s.end_seq) ? s.end_unix_nano : g.end_unix_nano;
      overlay.append(place(el("div", { class: "g-shade", title: `waiting: ${s.label}` }), x(s.start_unix_nano), w(s.start_unix_nano, end)));
    }
    for (const m of g.marks || []) {
      overlay.append(place(el("div", { class: `g-mark g-mark-${m.kind}`, title: `${m.kind}: ${m.label}`, "data-mark": m.kind }), x(m.unix_nano)));
    }
    const total = fmtDuration(ms(t1) - ms(t0));
    box.replaceChildren(
      el("div", { class: "g-axis" }, el("span", {}, new Date(ms(t0)).toLocaleTimeString()), el("span", {}, `${total} · seq ${g.seq}`)),
      el("div", { class: "g-body" }, el("div", { class: "g-overlay-wrap" }, overlay), ...rows),
      ...(g.dropped_spans ? [el("p", { class: "meta" }, `${g.dropped_spans} more bars not drawn`)] : []));
  }

  function costRow(name, c, attrs = {}) {
    return el("tr", attrs, el("td", {}, name), el("td", { class: "num" }, String(c.llm_calls || 0)), el("td", { class: "num" }, String(c.tool_calls || 0)),
      el("td", { class: "num" }, tokens(c.input_tokens)), el("td", { class: "num" }, tokens(c.output_tokens)),
      el("td", { class: "num" }, tokens(c.total_tokens)), el("td", { class: "num" }, money(c.cost_usd)));
  }

  function renderCosts(box, g) {
    const head = el("thead", {}, el("tr", {}, ...["", "LLM calls", "tool calls", "input", "output", "tokens", "cost"].map((h) => el("th", {}, h))));
    const table = (title, rows, testid) => el("table", { class: "list costs", "data-testid": testid }, el("caption", {}, title), head.cloneNode(true), el("tbody", {}, ...rows));
    box.replaceChildren(
      table("Per step", (g.steps || []).map((s) => costRow(`${s.step_id} · ${s.step_type}`, s, { "data-cost-step": s.step_id })), "cost-steps"),
      table("Per agent", (g.agents || []).map((a) => costRow(a.agent === a.agent_type ? a.agent : `${a.agent} (${a.agent_type})`, a, { "data-cost-agent": a.agent })), "cost-agents"),
      table("Total", [costRow("session", g.total || {}, { "data-cost-total": "" })], "cost-total"));
  }

  // layout places a version's steps in layers: a step sits one layer right of the
  // deepest step it depends on.
  function layout(steps) {
    const ids = new Set(steps.map((s) => s.id));
    const layer = new Map();
    const depth = (s, seen = new Set()) => {
      if (layer.has(s.id)) return layer.get(s.id);
      if (seen.has(s.id)) return 0; // a cycle: the plan was refused, draw it flat
      seen.add(s.id);
      let d = 0;
      for (const dep of s.dependencies || []) {
        const p = steps.find((x) => x.id === dep);
        if (p && ids.has(dep)) d = Math.max(d, depth(p, seen) + 1);
      }
      layer.set(s.id, d);
      return d;
    };
    steps.forEach((s) => depth(s));
    const rows = new Map();
    const pos = new Map();
    for (const s of steps) {
      const l = layer.get(s.id);
      const r = rows.get(l) || 0;
      rows.set(l, r + 1);
      pos.set(s.id, { col: l, row: r });
    }
    return { pos, cols: Math.max(0, ...layer.values()) + 1, rows: Math.max(1, ...rows.values()) };
  }

  function renderGraph(box, picker, plans, keep) {
    const prev = keep ? picker.value : "";
    picker.replaceChildren(...plans.map((p, i) => el("option", { value: String(i) },
      `v${p.version} · ${p.plan_id} (seq ${p.seq})${p.reason ? " · re-planned: " + p.reason.slice(0, 60) : ""}`)));
    picker.disabled = plans.length < 2;
    if (!plans.length) {
      box.replaceChildren(el("p", { class: "meta" }, "no plan yet"));
      return;
    }
    picker.value = prev && Number(prev) < plans.length ? prev : String(plans.length - 1);
    drawVersion(box, plans[Number(picker.value)]);
  }

  function drawVersion(box, v) {
    const W = 170, H = 46, GX = 60, GY = 18, PAD = 10;
    const { pos, cols, rows } = layout(v.steps);
    const at = (id) => { const p = pos.get(id); return { x: PAD + p.col * (W + GX), y: PAD + p.row * (H + GY) }; };
    const width = PAD * 2 + cols * W + (cols - 1) * GX, height = PAD * 2 + rows * H + (rows - 1) * GY;
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "plan-graph", role: "img",
      "aria-label": `plan ${v.plan_id}, version ${v.version}`, "data-version": v.version },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))));
    for (const s of v.steps) {
      for (const dep of s.dependencies || []) {
        if (!pos.has(dep)) continue;
        const a = at(dep), b = at(s.id);
        const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
        root.append(svg("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: "edge", "marker-end": "url(#arrow)", "data-edge": `${dep}>${s.id}` }));
      }
    }
    for (const s of v.steps) {
      const p = at(s.id);
      const status = s.status || "pending";
      const title = svg("title", {});
      title.textContent = `${s.id} (${s.type}): ${status}\n${s.description}`;
      const name = svg("text", { x: p.x + 8, y: p.y + 18, class: "node-id" });
      name.textContent = `${s.id} · ${s.type}`;
      const st = svg("text", { x: p.x + 8, y: p.y + 36, class: "node-status" });
      st.textContent = status.replace("_", " ");
      root.append(svg("g", { class: `node st-${status}`, "data-node": s.id, "data-status": status },
        title, svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6 }), name, st));
    }
    box.replaceChildren(root);
  }

  // diffStates lists what changed from state a (at seq A) to state b (at seq B).
  function diffStates(a, b) {
    const out = [];
    const steps = (s) => new Map((s.steps || []).map((st) => [st.step.id, st]));
    const sa = steps(a), sb = steps(b);
    if (a.status !== b.status) out.push(["status", "", `session ${shortStatus(a.status)} → ${shortStatus(b.status)}`]);
    for (const [id, st] of sb) {
      const before = sa.get(id);
      if (!before) out.push(["step-new", id, `step ${id} (${st.step.type}) added to the plan: ${shortStatus(st.status)}`]);
      else if (before.status !== st.status) out.push(["step", id, `step ${id}: ${shortStatus(before.status)} → ${shortStatus(st.status)}`]);
    }
    for (const id of sa.keys()) if (!sb.has(id)) out.push(["step-dropped", id, `step ${id} left the plan (re-plan)`]);
    const subsA = a.sub_agents || {}, subsB = b.sub_agents || {};
    for (const [id, sub] of Object.entries(subsB)) {
      const old = subsA[id];
      if (!old) out.push(["subagent", id, `sub-agent ${id} (${sub.agent_type}) started on ${sub.step_id}`]);
      if (sub.result && !sub.running && (!old || JSON.stringify(old.result || null) !== JSON.stringify(sub.result) || (old.runs || 0) !== (sub.runs || 0))) {
        out.push(["handoff", id, `hand-off from ${id} on ${sub.step_id} (${sub.result.status}): ${sub.result.summary || ""}`]);
      }
    }
    const arts = (s) => new Map((s.artifacts || []).map((x) => [x.path, x]));
    const aa = arts(a);
    for (const [p, art] of arts(b)) {
      const old = aa.get(p);
      if (!old) out.push(["artifact", p, `artifact ${art.artifact_type}/${art.filename} written (${art.size} bytes)`]);
      else if (old.sha256 !== art.sha256) out.push(["artifact", p, `artifact ${art.artifact_type}/${art.filename} changed (${old.size} → ${art.size} bytes)`]);
    }
    const tok = (s) => Number((s.usage || {}).total_tokens || 0);
    const cost = Number(b.cost_usd || 0) - Number(a.cost_usd || 0);
    out.push(["cost", "", `cost ${money(a.cost_usd)} → ${money(b.cost_usd)} (+${money(cost)}); tokens ${tokens(tok(a))} → ${tokens(tok(b))} (+${tokens(tok(b) - tok(a))}); LLM calls ${a.llm_calls || 0} → ${b.llm_calls || 0}`]);
    return out;
  }

  const pastCost = (s) => `${shortStatus(s.status)} · ${money(s.cost_usd)} · ${tokens((s.usage || {}).total_tokens)} tokens · ${s.llm_calls || 0} LLM calls`;

  // mount adds the timeline, the plan graph, the seq field of time travel and the
  // comparison to a session page. ctx: {id, page, renderPlan(list, state), onPoint(seq,
  // state)}: onPoint hears each past point shown (seq 0, state null: back to now), so the
  // rest of the page (transcript, plan, artifacts, cost) shows it too.
  function mount(ctx) {
    const { id, page, renderPlan } = ctx;
    const onPoint = ctx.onPoint || (() => {});
    const q = (name) => page.querySelector(`[data-tl="${name}"]`);
    const section = el("div", { class: "timeline-section" },
      el("div", { class: "row tl-head" }, el("h2", {}, "Timeline"),
        el("span", { class: "badge", "data-tl": "at", "data-testid": "tl-at" }, "now"),
        el("button", { type: "button", "data-tl": "now", "data-testid": "tl-now", hidden: "" }, "Back to now")),
      el("div", { class: "card gantt", "data-tl": "gantt", "data-testid": "gantt" }),
      el("details", { class: "card", open: "" }, el("summary", {}, "Cost and tokens"), el("div", { "data-tl": "costs", "data-testid": "costs" })),
      el("div", { class: "row" }, el("h2", {}, "Plan graph"),
        el("select", { "data-tl": "version", "data-testid": "plan-version", "aria-label": "plan version" })),
      el("div", { class: "card graph", "data-tl": "graph", "data-testid": "plan-graph" }));
    page.querySelector(".columns").before(section);

    // Time travel: a seq field beside the step slider, and the past point's artifacts and
    // cost under the past plan.
    const pastPlan = page.querySelector('[data-field="past-plan"]');
    const seqInput = el("input", { type: "number", min: 1, placeholder: "seq", "data-testid": "tt-seq", "aria-label": "seq" });
    const seqGo = el("button", { type: "button", "data-testid": "tt-seq-go" }, "Show seq");
    pastPlan.before(el("div", { class: "row" }, seqInput, seqGo));
    const pastCostLine = el("p", { class: "meta", "data-testid": "past-cost" });
    const pastArtifacts = el("ul", { "data-testid": "past-artifacts" });
    pastPlan.after(pastCostLine, el("h3", {}, "Artifacts then"), pastArtifacts);

    const compare = el("div", { class: "card compare", "data-testid": "compare" },
      el("h2", {}, "Compare two points"),
      el("div", { class: "row" },
        el("input", { type: "number", min: 1, placeholder: "seq A", "data-tl": "cmp-a", "data-testid": "cmp-a", "aria-label": "seq A" }),
        el("input", { type: "number", min: 1, placeholder: "seq B", "data-tl": "cmp-b", "data-testid": "cmp-b", "aria-label": "seq B" }),
        el("button", { type: "button", "data-tl": "cmp-go", "data-testid": "cmp-go" }, "Compare")),
      el("ul", { class: "changes", "data-tl": "cmp-out", "data-testid": "cmp-out" }));
    page.querySelector('[data-field="slider"]').closest(".card").after(compare);

    let at = 0; // 0: now (live); else the seq the timeline and graph show
    // markFuture greys the events list's rows recorded after the past point.
    const markFuture = () => {
      for (const li of page.querySelectorAll("ol.events [data-seq]")) li.classList.toggle("future", at > 0 && Number(li.dataset.seq) > at);
    };
    let last = null; // the last gantt drawn
    let pending = false;
    let lastFetch = 0;
    let timer = null;

    const draw = async () => {
      pending = false;
      if (!page.isConnected) return; // the page was left
      lastFetch = Date.now();
      const fields = { session_id: id };
      if (at) fields.seq = at;
      const want = at;
      try {
        const g = await socket.request("gantt", fields);
        if (want !== at) return; // the point moved meanwhile
        const keep = last && last.plans.length === g.plans.length;
        last = g;
        renderGantt(q("gantt"), g);
        renderCosts(q("costs"), g);
        renderGraph(q("graph"), q("version"), g.plans || [], keep);
        q("gantt").dataset.seq = String(g.seq);
        q("graph").dataset.seq = String(g.seq);
      } catch (e) {
        if (!String(e.message).startsWith("not_found")) toast(e.message);
      }
    };
    // refresh redraws the live timeline, at most once a second.
    const refresh = () => {
      if (at || pending || !page.isConnected) return; // a past point, a draw due, or the page left
      pending = true;
      clearTimeout(timer);
      timer = setTimeout(draw, Math.max(0, 1000 - (Date.now() - lastFetch)));
    };
    q("version").addEventListener("change", () => last && drawVersion(q("graph"), last.plans[Number(q("version").value)]));

    // showAt makes seq the page's past point: the past plan (with its hand-offs), the
    // artifacts and cost then, and the timeline and graph through seq.
    const showAt = (seq, state) => {
      at = Number(seq);
      q("at").textContent = `at seq ${at}`;
      q("at").className = "badge past";
      q("now").hidden = false;
      pastCostLine.textContent = `then: ${pastCost(state)}`;
      pastArtifacts.replaceChildren(...(state.artifacts || []).map((a) =>
        el("li", { "data-artifact": a.path }, `${a.artifact_type}/${a.filename} · ${a.size} bytes`)));
      markFuture();
      draw();
      onPoint(at, state);
    };
    q("now").addEventListener("click", () => {
      at = 0;
      onPoint(0, null);
      markFuture();
      q("at").textContent = "now";
      q("at").className = "badge";
      q("now").hidden = true;
      draw();
    });
    const goSeq = async () => {
      const seq = Number(seqInput.value);
      if (!seq) return toast("enter a seq");
      try {
        const res = await socket.request("state_at", { session_id: id, seq });
        page.querySelector('[data-field="slider-label"]').textContent = `after seq ${res.seq}: ${shortStatus(res.state.status)}`;
        renderPlan(pastPlan, res.state);
        showAt(res.seq, res.state);
      } catch (e) { toast(e.message); }
    };
    seqGo.addEventListener("click", goSeq);
    seqInput.addEventListener("keydown", (ev) => { if (ev.key === "Enter") goSeq(); });

    q("cmp-go").addEventListener("click", async () => {
      const a = Number(q("cmp-a").value), b = Number(q("cmp-b").value);
      if (!a || !b) return toast("enter seq A and seq B");
      try {
        const [ra, rb] = await Promise.all([socket.request("state_at", { session_id: id, seq: a }), socket.request("state_at", { session_id: id, seq: b })]);
        const changes = diffStates(ra.state, rb.state);
        q("cmp-out").replaceChildren(el("li", { class: "meta" }, `from seq ${ra.seq} to seq ${rb.seq}:`),
          ...changes.map(([kind, key, text]) => el("li", { "data-change": kind, "data-key": key }, text)));
      } catch (e) { toast(e.message); }
    });

    return {
      // refresh: the session changed (live); current is its state now.
      refresh(current) {
        if (!q("cmp-b").value && current) q("cmp-b").placeholder = `seq B (now ${current.seq})`;
        if (at > 0) markFuture();
        refresh();
      },
      showAt,
    };
  }

  return { mount, jumpTo, diffStates, layout };
})();
