// End-to-end test of the console's transcript in headless Chromium (playwright-core).
// gateway/console_test.go (TestConsoleTranscript) runs it against an in-process node on
// a scripted model:
//   - MD_SESSION (completed before the run) wrote notes with write_artifact, arguments
//     over the transcript's cut, then answered in markdown with a heading, a code block,
//     an injected <script> and a javascript: link. The page must show the final result at
//     the top with the heading and highlighted code, the tool's arguments and result
//     readable, "show all" fetching the whole arguments, and nothing injected live.
//   - STREAM_SESSION is started here; its step's answer streams slowly (chunk_delay_ms):
//     the page must show the text growing while the journal has no llm_responded for the
//     call yet, then the completed result.
// It exits 0 on success and prints what failed otherwise.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) {
    console.error(`console-transcript-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const origin = new URL(url).origin;
const tok = env("WRITE_TOKEN");
const mdSession = env("MD_SESSION");
const streamSession = env("STREAM_SESSION");
const story = env("STORY");
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const step = (msg) => console.log(`console-transcript-e2e: ${msg}`);
const check = (ok, msg) => { if (!ok) throw new Error(msg); };
const gateway = async (method, p, body) => {
  const resp = await fetch(origin + p, {
    method, headers: { Authorization: "Bearer " + tok, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`${method} ${p}: ${resp.status} ${text}`);
  return text;
};

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  page.on("dialog", async (d) => { console.error(`a dialog opened: ${d.message()}`); failed = true; await d.dismiss(); });
  await page.goto(url);
  await page.getByTestId("token").fill(tok);
  await page.getByTestId("token-save").click();
  await page.getByTestId("scope").filter({ hasText: "read + write" }).waitFor();

  // ---- the markdown session ----
  await page.goto(url + "#/session/" + encodeURIComponent(mdSession));
  const result = page.getByTestId("final-result");
  await result.waitFor();
  const resultText = await result.innerText();
  check(resultText.includes("Findings report") && resultText.includes("func main()"), `the final result reads ${JSON.stringify(resultText)}`);
  check(await result.locator("h1").filter({ hasText: "Findings report" }).count() === 1, "the result's markdown heading is not a heading");
  check(await result.locator(".chroma .kd").count() > 0, "the result's Go code block is not highlighted");
  const lanes = page.getByTestId("lanes");
  await lanes.waitFor();
  const [ry, ly] = await page.evaluate(() => ["final-result", "lanes"].map((id) => document.querySelector(`[data-testid="${id}"]`).getBoundingClientRect().y));
  check(ry < ly, `the final result (y ${ry}) is not above the transcript's lanes (y ${ly})`);
  step("final result at the top, heading and highlighted code rendered");

  // Nothing injected runs or links.
  check(await page.evaluate(() => window.__pwned) === undefined, "the injected script ran");
  check(await page.locator('[data-testid="transcript"] script').count() === 0, "a <script> element is in the transcript");
  const links = await page.locator('[data-testid="transcript"] a').evaluateAll((as) => as.map((a) => a.getAttribute("href") || ""));
  check(!links.some((h) => /^\s*(javascript|data|vbscript):/i.test(h)), `a live dangerous link: ${JSON.stringify(links)}`);
  check(resultText.includes("click me"), "the javascript: link's text is gone");
  check(await page.locator('[data-testid="transcript"] a').filter({ hasText: "click me" }).count() === 0, "the javascript: link is still a link");
  step(`no script, no javascript: link (links: ${JSON.stringify(links)})`);

  // The tool call: arguments and result readable; the cut arguments shown whole on demand.
  const tool = page.locator('li[data-entry="tool"][data-tool="write_artifact"]').first();
  await tool.waitFor();
  const toolText = await tool.innerText();
  check(toolText.includes("notes.md") && toolText.includes("research"), `the tool's arguments read ${JSON.stringify(toolText.slice(0, 300))}`);
  check(/result/.test(toolText) && toolText.includes("notes.md"), `the tool's result is not shown: ${JSON.stringify(toolText.slice(-300))}`);
  check(!toolText.includes("END-OF-NOTES"), "the long arguments were not cut");
  const showAll = tool.getByTestId("show-all");
  check(await showAll.count() === 1, "no show all on the cut arguments");
  await showAll.click();
  await tool.locator("pre.json").filter({ hasText: "END-OF-NOTES" }).waitFor();
  const pretty = await tool.locator("pre.json").filter({ hasText: "END-OF-NOTES" }).innerText();
  check(pretty.includes('\n  "filename": "notes.md"'), `the whole arguments are not pretty-printed JSON: ${JSON.stringify(pretty.slice(0, 200))}`);
  step("tool call: arguments and result readable, show all fetched the whole arguments");

  // ---- the streamed answer ----
  await gateway("POST", "/v1/sessions", { session_id: streamSession, goal: "Tell a slow story" });
  await page.goto(url + "#/session/" + encodeURIComponent(streamSession));
  // The step's call (not the planner's, which streams too).
  const sel = 'li[data-purpose="step"] [data-testid="live-answer"]';
  await page.waitForFunction((s) => {
    const el = document.querySelector(s);
    return el && el.textContent.length > 0;
  }, sel);
  const first = (await page.locator(sel).textContent()).length;
  await page.waitForFunction(([s, n]) => {
    const el = document.querySelector(s);
    return el && el.textContent.length > n;
  }, [sel, first]);
  const grown = await page.locator(sel).textContent();
  const stored = await gateway("GET", `/v1/sessions/${encodeURIComponent(streamSession)}/events?follow=false`);
  const answered = stored.split("\n").filter(Boolean).map((l) => JSON.parse(l))
    .filter((f) => f.type === "llm_responded" && f.step_id);
  check(answered.length === 0, `the step's answer was already recorded (${answered.length} llm_responded) when the text had grown`);
  check(story.includes(grown) && grown.length < story.length, `the live text reads ${JSON.stringify(grown)}`);
  step(`streamed text grew from ${first} to ${grown.length} characters before llm_responded`);
  await page.getByTestId("final-result").filter({ hasText: "happily ever after" }).waitFor();
  check(await page.getByTestId("live-answer").count() === 0, "a live answer is left once the session completed");
  step("the streamed session completed; its result is at the top");
} catch (e) {
  console.error(`console-transcript-e2e: ${e.stack || e}`);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
