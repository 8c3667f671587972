// End-to-end tests of the console's session page in headless Chromium (playwright-core),
// one PART at a time; gateway/console_session_test.go runs each against an in-process
// node after preparing its sessions:
//   deeplink   SESSION_ID waits for a human: opened by a deep link and again by
//              re-entering the token, no "already subscribed" reaches the page, and the
//              answer given on the page completes the session live.
//   controls   WAIT_SESSION waits for a human, BREAK_SESSION is stopped at a breakpoint
//              with a deadline, DONE_SESSION completed: the controls that apply are
//              enabled, the others not; deadlines count down.
//   timetravel SESSION_ID completed; AT_SEQ a past point (the end of the first step),
//              LAST_SEQ its last event, HANDOFFS {step: seq}, ARTIFACTS {path: seq}: the
//              whole page shows the past point.
//   fork       SOURCE completed (steps s1, s2): fork after step 1 as FORK_ID with s2's
//              description EDITED; ASK_SOURCE completed after a human's answer: fork
//              after planning as ASK_FORK with a changed answer.
//   artifacts  SESSION_ID wrote notes.md, tides.py, tides.json and wave.svg: each
//              previews in place; one downloads.
// Environment also: CONSOLE_URL, WRITE_TOKEN, PLAYWRIGHT_DIR, CHROMIUM, SCREENSHOTS (a
// directory). Exits 0 on success and prints what failed otherwise.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) {
    console.error(`console-session-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const token = env("WRITE_TOKEN");
const part = env("PART");
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");
const step = (msg) => console.log(`console-session-e2e ${part}: ${msg}`);
const check = (ok, msg) => { if (!ok) throw new Error(msg); };

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
let page = null;
const frameErrors = []; // error frames the gateway sent on any WebSocket of the page
try {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 1000 }, acceptDownloads: true });
  await ctx.addInitScript((t) => {
    sessionStorage.setItem("fathom.token", sessionStorage.getItem("fathom.token") || t);
    // Every toast the page shows, kept (a toast fades after 5 s).
    window.__toasts = [];
    new MutationObserver(() => {
      const t = document.getElementById("toast");
      if (t && t.textContent) window.__toasts.push(t.textContent);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  }, token);
  page = await ctx.newPage();
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  page.on("console", (m) => { if (m.type() === "error") console.error(`page console: ${m.text()}`); });
  page.on("websocket", (ws) => ws.on("framereceived", (f) => {
    const text = String(f.payload);
    if (text.includes('"op":"error"')) frameErrors.push(text);
  }));
  const open = async (id) => {
    await page.goto(url + "#/session/" + encodeURIComponent(id));
    await page.getByTestId("session-id").filter({ hasText: id }).waitFor();
    await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
  };
  const status = (s) => page.getByTestId("session-status").filter({ hasText: new RegExp(`^${s}$`) }).waitFor();
  const enabled = async (want) => {
    // want: {testid: true|false}; waits until the buttons say so.
    await page.waitForFunction((w) => Object.entries(w).every(([id, on]) => {
      const b = document.querySelector(`[data-testid="${id}"]`);
      return b && b.disabled === !on;
    }), want);
  };
  // shot keeps a picture of the part of the page a test is about (SCREENSHOTS; docs/
  // holds them).
  const shot = async (name, locator) => {
    if (!process.env.SCREENSHOTS) return;
    const to = path.join(process.env.SCREENSHOTS, name);
    if (locator) await locator.screenshot({ path: to });
    else await page.screenshot({ path: to, clip: { x: 0, y: 0, width: 1360, height: 560 } });
  };

  if (part === "deeplink") {
    const id = env("SESSION_ID");
    await open(id);
    await page.getByTestId("question").waitFor();
    // The stored events arrived through the subscription.
    await page.locator('[data-testid="events"] li[data-type="hitl_requested"]').waitFor();
    step("opened by a deep link: live, the stored events listed");
    // Re-enter the token: a new connection, the page opened again.
    await page.getByTestId("token").fill(token);
    await page.getByTestId("token-save").click();
    await page.getByTestId("ws-state").filter({ hasText: "offline" }).waitFor().catch(() => {});
    await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
    await page.locator('[data-testid="events"] li[data-type="hitl_requested"]').waitFor();
    // The answer completes the session on the page: the subscription is live.
    await page.getByTestId("answer").fill('{"n": 2}');
    await page.getByTestId("answer-submit").click();
    await status("completed");
    await page.locator('[data-testid="events"] li[data-type="session_completed"]').waitFor();
    const toasts = await page.evaluate(() => window.__toasts);
    const seen = [...toasts, ...frameErrors].filter((t) => /already subscribed/.test(t));
    check(seen.length === 0, `the page was told: ${seen.join(" | ")}`);
    // Each event listed once.
    const seqs = await page.$$eval('[data-testid="events"] li', (lis) => lis.map((li) => li.dataset.seq));
    check(new Set(seqs).size === seqs.length, `events listed twice: ${seqs.join(",")}`);
    step(`re-entered the token, answered live; no "already subscribed" (${frameErrors.length} error frames)`);
  } else if (part === "controls") {
    // Waiting for a human: pause, cancel and breakpoints apply; resume does not.
    await open(env("WAIT_SESSION"));
    await status("awaiting_human");
    await enabled({ pause: true, resume: false, cancel: true, breakpoint: true, "clear-breakpoints": false });
    // The request's deadline and default action, counting down.
    const deadline = page.getByTestId("deadline");
    await deadline.filter({ hasText: "the step goes on with an empty answer" }).waitFor();
    const secs = async () => {
      const m = /(\d+):(\d\d) left/.exec(await page.getByTestId("deadline-left").textContent());
      check(m, "no countdown on the request");
      return Number(m[1]) * 60 + Number(m[2]);
    };
    const first = await secs();
    check(first > 200 && first <= 300, `the request's countdown starts at ${first} s, want about 5 min`);
    await page.waitForFunction((s) => {
      const m = /(\d+):(\d\d) left/.exec(document.querySelector('[data-testid="deadline-left"]').textContent);
      return m && Number(m[1]) * 60 + Number(m[2]) < s;
    }, first);
    step(`the request shows its deadline and default action; the countdown runs (from ${first} s)`);
    await shot("console-controls.png");
    // A pause pending: no second pause; the answer stops the session: resume only.
    await page.getByTestId("pause").click();
    await enabled({ pause: false, resume: false, cancel: true, "clear-breakpoints": true });
    await page.getByTestId("breakpoints").filter({ hasText: "pause (pending)" }).waitFor();
    await page.getByTestId("answer").fill('{"n": 2}');
    await page.getByTestId("answer-submit").click();
    await status("interrupted");
    await enabled({ pause: false, resume: true, cancel: true, breakpoint: true });
    await page.locator('[data-kind="interrupt"]').filter({ hasText: "Paused" }).waitFor();
    step("pause pending: pause disabled; stopped: resume enabled, pause not");
    await page.getByTestId("resume").click();
    await status("completed");
    await enabled({ pause: false, resume: false, cancel: false, breakpoint: false, "clear-breakpoints": false });
    step("completed: every control disabled");

    // Stopped at a breakpoint with a deadline: what happens then, counting down.
    await open(env("BREAK_SESSION"));
    await status("interrupted");
    await enabled({ pause: false, resume: true, cancel: true, "clear-breakpoints": true });
    const it = page.getByTestId("interrupt-deadline");
    await it.filter({ hasText: "the session fails" }).waitFor();
    const itLeft = await page.getByTestId("interrupt-deadline-left").textContent();
    check(/^\d+:\d\d left$/.test(itLeft), `the interrupt's countdown: ${itLeft}`);
    step(`the breakpoint's interrupt shows its deadline and default action (${itLeft})`);

    // Ended: none apply.
    await open(env("DONE_SESSION"));
    await status("completed");
    await enabled({ pause: false, resume: false, cancel: false, breakpoint: false, "clear-breakpoints": false });
    check(await page.getByTestId("pause").getAttribute("title") !== "", "a disabled control says why");
    step("a completed session: every control disabled, each saying why");
  } else if (part === "timetravel") {
    const at = Number(env("AT_SEQ"));
    const last = Number(env("LAST_SEQ"));
    const handoffs = JSON.parse(env("HANDOFFS"));
    const artifacts = JSON.parse(env("ARTIFACTS"));
    const laterHandoffs = Object.entries(handoffs).filter(([, s]) => s > at).map(([step]) => step);
    const laterArtifacts = Object.entries(artifacts).filter(([, s]) => s > at).map(([p]) => p);
    check(laterHandoffs.length > 0, "no hand-off after the past point: nothing to check");
    await open(env("SESSION_ID"));
    await status("completed");
    await page.waitForFunction(() => document.querySelector('[data-testid="transcript"] [data-testid="lanes"]'));
    // Entries are anchored by seq.
    const ids = await page.$$eval('[data-testid="transcript"] .entry', (lis) => lis.map((li) => [li.id, li.dataset.seq]));
    check(ids.length > 0 && ids.every(([id, seq]) => !id || id === `seq-${seq}`) && ids.some(([id]) => id), `entry ids: ${JSON.stringify(ids.slice(0, 5))}`);
    const cost = async (seq) => page.evaluate(async ([id, seq, tok]) => {
      const r = await fetch(`/v1/sessions/${id}/state?seq=${seq}`, { headers: { Authorization: "Bearer " + tok } });
      return (await r.json()).state.cost_usd || 0;
    }, [env("SESSION_ID"), seq, token]);

    // The step slider to after step 1.
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="slider"]').max) >= 2);
    await page.getByTestId("slider").fill("1");
    await page.waitForFunction((s) => document.querySelector('[data-testid="transcript"]').dataset.at === String(s) &&
      document.querySelector('[data-testid="transcript"]').dataset.seq === String(s), at);
    const seqs = await page.$$eval('[data-testid="transcript"] [data-seq]', (es) => es.map((e) => Number(e.dataset.seq)));
    check(seqs.length > 0 && seqs.every((s) => s <= at), `the transcript at seq ${at} shows entries ${seqs.filter((s) => s > at)}`);
    check(!(await page.getByTestId("final-result").count()), "the transcript at a past point shows the final result");
    // The main plan: no hand-off recorded later.
    const planHandoffs = await page.$$eval('[data-testid="plan"] [data-handoff]', (es) => es.map((e) => e.dataset.handoff));
    for (const s of laterHandoffs) check(!planHandoffs.includes(s), `the plan at seq ${at} shows ${s}'s hand-off (seq ${handoffs[s]})`);
    check(planHandoffs.length > 0, "the plan at the past point shows no hand-off at all");
    // The artifacts: none written later.
    const arts = await page.$$eval('[data-testid="artifacts"] [data-artifact]', (es) => es.map((e) => e.dataset.artifact));
    for (const p of laterArtifacts) check(!arts.includes(p), `the artifacts at seq ${at} list ${p} (seq ${artifacts[p]})`);
    // The header: the cost then.
    const then = await cost(at);
    await page.getByTestId("session-cost").filter({ hasText: `$${then.toFixed(4)} then` }).waitFor();
    await page.getByTestId("session-seq").filter({ hasText: `at seq ${at} of ${last}` }).waitFor();
    step(`at seq ${at}: transcript, plan (hand-offs ${planHandoffs}), artifacts (${arts.length}) and cost ($${then.toFixed(4)}) are the past's`);
    await page.locator(".columns").evaluate((e) => e.scrollIntoView());
    await shot("console-time-travel.png", page.locator(".columns > div").first());

    // The seq field: another point, the transcript follows.
    const mid = at + 2;
    await page.getByTestId("tt-seq").fill(String(mid));
    await page.getByTestId("tt-seq-go").click();
    await page.waitForFunction((s) => document.querySelector('[data-testid="transcript"]').dataset.at === String(s), mid);
    step(`the seq field moved the transcript to seq ${mid}`);

    // Back to now: everything again.
    await page.getByTestId("tl-now").click();
    await page.waitForFunction((s) => document.querySelector('[data-testid="transcript"]').dataset.at === "0" &&
      document.querySelector('[data-testid="transcript"]').dataset.seq === String(s), last);
    await page.getByTestId("final-result").waitFor();
    await page.getByTestId("session-seq").filter({ hasText: `seq ${last}` }).waitFor();
    const nowHandoffs = await page.$$eval('[data-testid="plan"] [data-handoff]', (es) => es.map((e) => e.dataset.handoff));
    for (const s of laterHandoffs) check(nowHandoffs.includes(s), `now, the plan lacks ${s}'s hand-off`);
    step("back to now: the final result, every hand-off");

    // A timeline bar opens and marks the transcript's entry at its seq.
    const bar = page.locator('[data-testid="gantt"] .g-bar[data-kind="tool"]').last();
    const barSeq = Number(await bar.getAttribute("data-start-seq"));
    await bar.click();
    const jumped = page.locator(".transcript .entry.marked");
    await jumped.waitFor();
    const js = Number(await jumped.getAttribute("data-seq"));
    check(js >= barSeq, `the bar at seq ${barSeq} marked the entry at seq ${js}`);
    check(await jumped.isVisible(), "the marked entry is not shown");
    step(`a tool bar at seq ${barSeq} opened its lane and marked the entry at seq ${js}`);
  } else if (part === "fork") {
    const source = env("SOURCE");
    const forkID = env("FORK_ID");
    await open(source);
    await status("completed");
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="slider"]').max) >= 2);
    await page.getByTestId("slider").fill("1");
    await page.getByTestId("slider-label").filter({ hasText: "after step 1 of 2" }).waitFor();
    // s2 has yet to run at that point: it may be edited.
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="fork-step"] option')].some((o) => o.value === "s2"));
    await page.getByTestId("fork-step").selectOption("s2");
    check(await page.getByTestId("fork-description").inputValue() === "write the second line", "the step's description is not offered to edit");
    await page.getByTestId("fork-description").fill(env("EDITED"));
    await page.getByTestId("fork-id").fill(forkID);
    await shot("console-fork.png", page.getByTestId("slider").locator("xpath=.."));
    await page.getByTestId("fork").click();
    await page.waitForURL(new RegExp(`#/session/${forkID}$`));
    await page.getByTestId("session-id").filter({ hasText: forkID }).waitFor();
    await status("completed");
    await page.getByTestId("forked-from").filter({ hasText: `Forked from ${source} at seq` }).waitFor();
    await page.getByTestId("forked-from").filter({ hasText: "with step s2 edited" }).waitFor();
    await page.getByTestId("final-result").filter({ hasText: "RAN THE EDITED STEP" }).waitFor();
    step(`forked ${source} after step 1 with s2 edited as ${forkID}: it says where from, and ran the edited step`);
    // The source lists its fork.
    await page.getByTestId("forked-from-link").click();
    await page.getByTestId("session-id").filter({ hasText: source }).waitFor();
    await page.locator(`[data-testid="forks"] [data-fork="${forkID}"]`).waitFor();
    const forks = await page.$$eval('[data-testid="forks"] [data-fork]', (es) => es.map((e) => e.dataset.fork));
    check(forks.join(",") === forkID, `${source} lists the forks ${forks}, want ${forkID} alone`);
    step(`${source} lists its fork ${forkID}, and no other session`);

    // A changed human answer: fork after planning (step 0), answering anew.
    const askFork = env("ASK_FORK");
    await open(env("ASK_SOURCE"));
    await status("completed");
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="slider"]').max) >= 1);
    await page.getByTestId("slider").fill("0");
    await page.getByTestId("slider-label").filter({ hasText: "after step 0 of" }).waitFor();
    await page.getByTestId("fork-id").fill(askFork);
    await page.getByTestId("fork-answer").fill('{"n": 7}');
    await page.getByTestId("fork").click();
    await page.waitForURL(new RegExp(`#/session/${askFork}$`));
    await status("completed");
    step(`forked after planning as ${askFork} with the answer {"n": 7}: completed`);
  } else if (part === "artifacts") {
    await open(env("SESSION_ID"));
    await status("completed");
    const item = (name) => page.locator(`[data-testid="artifacts"] li[data-artifact-item$="/${name}"]`);
    const previewOf = async (name) => {
      await item(name).getByTestId("artifact-preview-toggle").click();
      return item(name).getByTestId("artifact-preview");
    };
    const md = await previewOf("notes.md");
    await md.locator(".md h1").filter({ hasText: "Tide notes" }).waitFor();
    await md.locator("em").filter({ hasText: "noon" }).waitFor();
    check(await md.locator("script").count() === 0, "the markdown preview holds a script element");
    check(await page.evaluate(() => window.__pwned === undefined), "the injected script ran");
    step("markdown: rendered (heading, emphasis), the injected script inert");
    const py = await previewOf("tides.py");
    await py.locator(".chroma").waitFor();
    check(await py.locator(".chroma span").count() > 3, "the code is not highlighted");
    check((await py.textContent()).includes("def tide(hour):"), "the code's text is not shown");
    step("code: highlighted");
    const js = await previewOf("tides.json");
    const pretty = await js.getByTestId("artifact-json").textContent();
    check(pretty.includes('\n  "high": [\n'), `the JSON is not pretty-printed: ${pretty}`);
    step("JSON: pretty-printed");
    const svg = await previewOf("wave.svg");
    const img = svg.getByTestId("artifact-image");
    await img.waitFor();
    await page.waitForFunction(() => {
      const i = document.querySelector('[data-testid="artifact-image"]');
      return i && i.complete && i.naturalWidth === 40;
    });
    step("image: shown");
    await shot("console-artifacts.png", page.getByTestId("artifacts"));
    const [download] = await Promise.all([page.waitForEvent("download"), item("tides.json").getByTestId("artifact-download").click()]);
    check(download.suggestedFilename() === "tides.json", `downloaded ${download.suggestedFilename()}`);
    const file = await download.path();
    const body = (await import("node:fs")).readFileSync(file, "utf8");
    check(body === '{"high":[12,24],"low":[6,18]}', `the download holds ${body}`);
    step("download: the artifact as stored");
  } else {
    throw new Error(`unknown PART ${part}`);
  }
} catch (e) {
  console.error(`console-session-e2e ${part}: FAILED: ${e.message}`);
  if (page) {
    const seen = await page.evaluate(() => ({
      url: location.hash,
      status: document.querySelector('[data-testid="session-status"]')?.textContent,
      toasts: window.__toasts,
      transcript: { ...document.querySelector('[data-testid="transcript"]')?.dataset },
      label: document.querySelector('[data-testid="slider-label"]')?.textContent,
      events: [...document.querySelectorAll('[data-testid="events"] li')].slice(-4).map((li) => li.dataset.type),
    })).catch(() => null);
    console.error(`console-session-e2e ${part}: the page showed ${JSON.stringify(seen)}; error frames ${JSON.stringify(frameErrors)}`);
  }
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
