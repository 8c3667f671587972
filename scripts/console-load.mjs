// Page-load timer in headless Chromium (npm playwright-core, Debian's chromium) for
// BenchmarkConsoleLoad (gateway/console_bench_test.go). It launches the browser once, then
// reads one JSON request per line on stdin — {"op":"load"|"dump","url":URL,"selector":CSS,
// "nth":N} — and answers one JSON line on stdout: {"ms":…} (from navigation until the
// selector's nth match is visible, in a fresh page), with "html" (the page's DOM without
// its scripts) for "dump", or {"error":…}. It exits when stdin closes.
//
// Environment: PLAYWRIGHT_DIR (where node_modules/playwright-core is), CHROMIUM (the
// browser binary), TOKEN (put in sessionStorage as the console's bearer token).
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const env = (k, d) => {
  const v = process.env[k] ?? d;
  if (v === undefined) throw new Error(`${k} is not set`);
  return v;
};
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
await ctx.addInitScript((t) => { if (t) sessionStorage.setItem("fathom.token", t); }, env("TOKEN", ""));
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
try {
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    let page;
    try {
      const req = JSON.parse(line);
      page = await ctx.newPage();
      const t0 = performance.now();
      await page.goto(req.url);
      await page.locator(req.selector).nth(req.nth ?? 0).waitFor({ timeout: 60_000 });
      const ms = performance.now() - t0;
      let html;
      if (req.op === "dump") {
        html = await page.evaluate(() => {
          document.querySelectorAll("script").forEach((s) => s.remove());
          return "<!doctype html>\n" + document.documentElement.outerHTML;
        });
      }
      out({ ms, html });
    } catch (e) {
      out({ error: String(e?.message ?? e) });
    } finally {
      await page?.close();
    }
  }
} finally {
  await browser.close();
}
