// End-to-end test of the console's approval card in headless Chromium (playwright-core).
// gateway/console_test.go (TestConsoleApproval) runs it against an in-process node whose
// session SESSION_ID waits for the approval of a write_artifact call: it opens the
// session's page, checks the card shows the tool, its arguments and that the deadline
// rejects the call, edits the arguments
// to name the file EDITED_FILENAME, runs the call with them and waits for the session to
// complete. It exits 0 on success and prints what failed otherwise.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) {
    console.error(`console-approval-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const sessionID = env("SESSION_ID");
const edited = env("EDITED_FILENAME");
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const step = (msg) => console.log(`console-approval-e2e: ${msg}`);
const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  await page.goto(url);
  await page.getByTestId("token").fill(env("WRITE_TOKEN"));
  await page.getByTestId("token-save").click();
  await page.getByTestId("scope").filter({ hasText: "read + write" }).waitFor();
  await page.goto(url + "#/session/" + encodeURIComponent(sessionID));
  const card = page.locator('[data-kind="approval"]');
  await card.waitFor();
  const question = await card.getByTestId("question").textContent();
  if (!question.includes("write_artifact")) throw new Error(`the approval card says ${JSON.stringify(question)}`);
  const args = JSON.parse(await card.getByTestId("approval-args").inputValue());
  if (args.filename !== "notes.md") throw new Error(`the card shows args ${JSON.stringify(args)}`);
  const deadline = await card.getByTestId("approval-deadline").textContent();
  if (!deadline.includes("the call is rejected")) throw new Error(`the card's deadline says ${JSON.stringify(deadline)}`);
  // The deadline counts down.
  const left = await card.getByTestId("approval-deadline-left").textContent();
  if (!/^\d+:\d\d left$/.test(left)) throw new Error(`the card's countdown says ${JSON.stringify(left)}`);
  step(`approval card for write_artifact ${JSON.stringify(args)}; ${deadline}`);
  args.filename = edited;
  await card.getByTestId("approval-args").fill(JSON.stringify(args));
  await card.getByTestId("approve-edited").click();
  await page.getByTestId("session-status").filter({ hasText: "completed" }).waitFor();
  await page.locator('[data-testid="artifacts"] [data-artifact]').filter({ hasText: edited }).waitFor();
  step(`ran with the edited args; ${edited} is in the artifacts`);
} catch (e) {
  console.error(`console-approval-e2e: ${e.stack || e}`);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
