// End-to-end test of the session page's timeline, plan graph, exact time travel and
// comparison in headless Chromium (playwright-core). gateway/console_test.go
// (TestConsoleTimeline) runs it against an in-process node after SESSION_ID completed,
// and hands it what the journal holds: STEPS (JSON [{id, ms}]: each step's duration
// from its step_started to its step_completed), EDGES (JSON ["dep>step", ...]),
// HANDOFFS (JSON {step id: seq of its subagent_completed}), ARTIFACTS (JSON {path: seq
// of its artifact_written}), AT_SEQ (the end of the first step), PLAN_SEQ and LAST_SEQ;
// WAIT_SESSION, a session that waited WAIT_MS for a human's answer; REPLAN_SESSION, a
// session whose step f was retried and failed, and whose plan (a, f, p) was revised into
// (a, n); REUSE_SESSION, a session whose sub-agent researcher-1 ran step r1 and then r2
// (REUSE_HANDOFFS: {step: seq of its hand-off}; REUSE_AT: the end of r1).
// Environment also: CONSOLE_URL, READ_TOKEN, PLAYWRIGHT_DIR, CHROMIUM, SCREENSHOTS (a
// directory). Exits 0 on success and prints what failed otherwise.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) {
    console.error(`console-timeline-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const sessionID = env("SESSION_ID");
const steps = JSON.parse(env("STEPS"));
const edges = JSON.parse(env("EDGES"));
const handoffs = JSON.parse(env("HANDOFFS"));
const artifacts = JSON.parse(env("ARTIFACTS"));
const atSeq = Number(env("AT_SEQ"));
const planSeq = Number(env("PLAN_SEQ"));
const lastSeq = Number(env("LAST_SEQ"));
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const step = (msg) => console.log(`console-timeline-e2e: ${msg}`);
const check = (ok, msg) => { if (!ok) throw new Error(msg); };
const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
let page = null;
try {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 1000 } });
  await ctx.addInitScript((t) => sessionStorage.setItem("fathom.token", t), env("READ_TOKEN"));
  page = await ctx.newPage();
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  page.on("console", (m) => { if (m.type() === "error") console.error(`page console: ${m.text()}`); });
  await page.goto(url + "#/session/" + encodeURIComponent(sessionID));
  await page.getByTestId("session-status").filter({ hasText: /^completed$/ }).waitFor();

  // The timeline: one bar per step, each as long as the journal says.
  const gantt = page.getByTestId("gantt");
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="gantt"] .g-bar[data-kind="step"]').length === n, steps.length);
  for (const s of steps) {
    const bars = gantt.locator(`.g-bar[data-kind="step"][data-step="${s.id}"]`);
    check(await bars.count() === 1, `step ${s.id} has ${await bars.count()} bars`);
    const got = Number(await bars.getAttribute("data-duration-ms"));
    check(Math.abs(got - s.ms) < 0.01, `step ${s.id}'s bar lasts ${got} ms, the journal ${s.ms} ms`);
    const title = await bars.getAttribute("title");
    check(title.startsWith(`step ${s.id}`) && /\d+(\.\d+)? (ms|s|min)/.test(title), `step ${s.id}'s bar says ${title}`);
    step(`step ${s.id}: a bar of ${got.toFixed(1)} ms (journal ${s.ms.toFixed(1)} ms)`);
  }
  check(await gantt.locator('.g-bar[data-kind="subagent"]').count() >= steps.length, "no sub-agent bars");
  check(await gantt.locator('.g-bar[data-kind="llm"]').count() > steps.length, "no LLM call bars");
  check(await gantt.locator('.g-bar[data-kind="tool"]').count() > 0, "no tool call bars");
  const total = await page.locator("[data-cost-total]").textContent();
  check(/\d/.test(total), `total cost row: ${total}`);
  for (const s of steps) await page.locator(`[data-cost-step="${s.id}"]`).waitFor();

  // A click on a bar tells the page (the transcript) which event it starts at.
  const first = gantt.locator(`.g-bar[data-kind="step"][data-step="${steps[0].id}"]`);
  const want = Number(await first.getAttribute("data-start-seq"));
  await page.evaluate(() => { window.__jumps = []; window.addEventListener("fathom:seq", (e) => window.__jumps.push(e.detail.seq)); });
  await first.click();
  const jumps = await page.evaluate(() => window.__jumps);
  check(jumps.length === 1 && jumps[0] === want, `clicking step ${steps[0].id}'s bar dispatched ${JSON.stringify(jumps)}, want seq ${want}`);

  // The plan graph: a node per step, an edge per dependency, all completed.
  const graph = page.getByTestId("plan-graph");
  await graph.locator("[data-node]").first().waitFor();
  const nodes = await graph.locator("[data-node]").evaluateAll((ns) => ns.map((n) => `${n.dataset.node}=${n.dataset.status}`));
  check(nodes.length === steps.length && steps.every((s) => nodes.includes(`${s.id}=completed`)), `graph nodes ${nodes}`);
  const drawn = await graph.locator("[data-edge]").evaluateAll((es) => es.map((e) => e.dataset.edge).sort());
  check(JSON.stringify(drawn) === JSON.stringify([...edges].sort()), `graph edges ${drawn}, want ${edges}`);
  step(`plan graph: nodes ${nodes.join(" ")}; edges ${drawn.join(" ")}`);
  await page.evaluate(() => document.getElementById("toast").classList.remove("show"));
  await page.waitForFunction(() => getComputedStyle(document.getElementById("toast")).opacity === "0");
  if (process.env.SCREENSHOTS) await page.locator(".timeline-section").screenshot({ path: path.join(process.env.SCREENSHOTS, "console-timeline.png") });

  // Time travel: at a past point the page holds only what the journal held then.
  const noFuture = async (where) => {
    await page.getByTestId("tl-at").filter({ hasText: `at seq ${atSeq}` }).waitFor();
    await page.waitForFunction((n) => document.querySelector('[data-testid="gantt"]').dataset.seq === String(n), atSeq);
    const shown = await page.locator('[data-testid="past-plan"] [data-handoff]').evaluateAll((hs) => hs.map((h) => h.dataset.handoff));
    check(shown.length > 0, `${where}: no hand-off shown at seq ${atSeq}`);
    for (const s of shown) check(handoffs[s] <= atSeq, `${where}: at seq ${atSeq} the past plan shows ${s}'s hand-off, recorded at seq ${handoffs[s]}`);
    const arts = await page.locator('[data-testid="past-artifacts"] [data-artifact]').evaluateAll((as) => as.map((a) => a.dataset.artifact));
    for (const a of arts) check(artifacts[a] <= atSeq, `${where}: at seq ${atSeq} the page lists ${a}, written at seq ${artifacts[a]}`);
    const starts = await gantt.locator(".g-bar").evaluateAll((bs) => bs.map((b) => Number(b.dataset.startSeq)));
    check(starts.length > 0 && starts.every((s) => s <= atSeq), `${where}: bars starting after seq ${atSeq}: ${starts.filter((s) => s > atSeq)}`);
    const future = await page.locator("ol.events li.future").evaluateAll((ls) => ls.map((l) => Number(l.dataset.seq)));
    check(future.length === lastSeq - atSeq && future.every((s) => s > atSeq), `${where}: events greyed as later than seq ${atSeq}: ${future}`);
    const statuses = await graph.locator("[data-node]").evaluateAll((ns) => ns.map((n) => n.dataset.status));
    check(statuses.includes("pending") || statuses.includes("in_progress"), `${where}: graph at seq ${atSeq}: ${statuses}`);
    step(`${where}: at seq ${atSeq}: hand-offs of ${shown.join(", ")}; artifacts ${arts.join(", ") || "none"}; ${starts.length} bars, none later`);
  };
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="slider"]').max) >= 1);
  await page.getByTestId("slider").fill("1");
  await noFuture("the step slider at step 1");
  await page.getByTestId("tl-now").click();
  await page.getByTestId("tl-at").filter({ hasText: "now" }).waitFor();
  await page.getByTestId("tt-seq").fill(String(atSeq));
  await page.getByTestId("tt-seq-go").click();
  await noFuture("the seq field");

  // Compare the plan's creation with the end: every step went from pending to completed.
  await page.getByTestId("cmp-a").fill(String(planSeq));
  await page.getByTestId("cmp-b").fill(String(lastSeq));
  await page.getByTestId("cmp-go").click();
  const changed = page.locator(`[data-testid="cmp-out"] [data-change="step"][data-key="${steps[0].id}"]`);
  await changed.waitFor();
  const text = await changed.textContent();
  check(text.includes("pending → completed"), `compare says ${text}`);
  const handed = await page.locator('[data-testid="cmp-out"] [data-change="handoff"]').count();
  check(handed === steps.length, `compare lists ${handed} hand-offs, want ${steps.length}`);
  step(`compare seq ${planSeq} with seq ${lastSeq}: ${text}; ${handed} hand-offs`);

  // A sub-agent that ran two steps: each step shows its own hand-off, now and at the end
  // of the first.
  await page.goto(url + "#/session/" + encodeURIComponent(env("REUSE_SESSION")));
  await page.getByTestId("session-status").filter({ hasText: /^completed$/ }).waitFor();
  const reused = JSON.parse(env("REUSE_HANDOFFS"));
  const handoffsIn = (list) => page.locator(`[data-testid="${list}"] [data-handoff]`).evaluateAll((hs) => hs.map((h) => `${h.dataset.handoff}:${h.dataset.subagent}`).join(" "));
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="plan"] [data-handoff]').length === 2);
  check(await handoffsIn("plan") === "r1:researcher-1 r2:researcher-1", `the plan's hand-offs: ${await handoffsIn("plan")}`);
  await page.getByTestId("tt-seq").fill(env("REUSE_AT"));
  await page.getByTestId("tt-seq-go").click();
  await page.getByTestId("tl-at").filter({ hasText: `at seq ${env("REUSE_AT")}` }).waitFor();
  check(reused.r1 <= Number(env("REUSE_AT")) && await handoffsIn("past-plan") === "r1:researcher-1", `at seq ${env("REUSE_AT")}: hand-offs ${await handoffsIn("past-plan")}`);
  step(`one sub-agent, two steps: hand-offs ${await handoffsIn("plan")}; at seq ${env("REUSE_AT")} only r1's`);

  // A wait on a human is a bar as long as the journal's, shaded across the timeline.
  await page.goto(url + "#/session/" + encodeURIComponent(env("WAIT_SESSION")));
  const wait = page.locator('[data-testid="gantt"] .g-bar[data-kind="wait"]');
  await wait.waitFor();
  const waited = Number(await wait.getAttribute("data-duration-ms"));
  check(Math.abs(waited - Number(env("WAIT_MS"))) < 0.01, `the wait lasts ${waited} ms, the journal ${env("WAIT_MS")} ms`);
  check(await page.locator('[data-testid="gantt"] .g-shade').count() === 1, "the wait is not shaded");
  step(`a human's wait: a shaded bar of ${waited.toFixed(1)} ms`);

  // A retried step and a re-plan: the retry marked, a graph version per plan.
  await page.goto(url + "#/session/" + encodeURIComponent(env("REPLAN_SESSION")));
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="plan-version"] option').length === 2);
  const graphNow = async () => graph.locator("[data-node]").evaluateAll((ns) => ns.map((n) => `${n.dataset.node}=${n.dataset.status}`).join(" "));
  const edgesNow = async () => (await graph.locator("[data-edge]").evaluateAll((es) => es.map((e) => e.dataset.edge))).join(" ");
  await page.waitForFunction(() => document.querySelector('[data-testid="plan-graph"] svg')?.dataset.version === "2");
  check(await graphNow() === "a=completed n=completed" && await edgesNow() === "a>n", `version 2: ${await graphNow()} / ${await edgesNow()}`);
  await page.getByTestId("plan-version").selectOption("0");
  await page.waitForFunction(() => document.querySelector('[data-testid="plan-graph"] svg')?.dataset.version === "1");
  check(await graphNow() === "a=completed f=failed p=pending" && await edgesNow() === "a>f f>p", `version 1: ${await graphNow()} / ${await edgesNow()}`);
  const fBars = page.locator('[data-testid="gantt"] .g-bar[data-kind="step"][data-step="f"]');
  check(await fBars.count() === 2 && await page.locator('[data-testid="gantt"] .g-bar.retry[data-step="f"]').count() === 1, "step f's attempts are not two bars, the second a retry");
  const marks = await page.locator("[data-testid=gantt] [data-mark]").evaluateAll((ms) => ms.map((m) => m.dataset.mark).join(" "));
  check(marks === "retry retry replan end", `marks: ${marks}`);
  step(`re-plan: version 1 ${await graphNow()}; marks ${marks}`);
  if (failed) throw new Error("the page raised errors");
  step("ok");
} catch (e) {
  console.error(`console-timeline-e2e: FAILED: ${e.message}`);
  failed = true;
  if (page) {
    const said = await page.getByTestId("toast").textContent().catch(() => "");
    const drawn = await page.getByTestId("gantt").innerHTML().catch(() => "");
    console.error(`console-timeline-e2e: the toast says ${JSON.stringify(said)}; the timeline holds ${drawn.slice(0, 600)}`);
  }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
