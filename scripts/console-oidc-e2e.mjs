// End-to-end test of the web console's OIDC sign-in (the authorization-code flow with
// PKCE) in headless Chromium, driven by playwright-core. cmd/fathom/console_oidc_test.go
// (TestConsoleOIDCSignIn) runs it against `fathom node --oidc-issuer ISSUER
// --console-oidc-client-id CLIENT_ID` and a test issuer (internal/testissuer) whose
// /authorize signs alice of acme in at once. The console redirects to the issuer, comes
// back with a code, exchanges it with its verifier, shows "read + write as alice@acme"
// and lists acme's session only; a redirect back whose state was tampered with is
// refused before any token request. A Content-Security-Policy violation fails the run.
// Environment: CONSOLE_URL, ISSUER, CLIENT_ID, ACME_SESSION, GLOBEX_SESSION,
// PLAYWRIGHT_DIR, CHROMIUM. Exits 0 on success.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) {
    console.error(`console-oidc-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const issuer = env("ISSUER");
const clientID = env("CLIENT_ID");
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");
const step = (msg) => console.log(`console-oidc-e2e: ${msg}`);
const check = (ok, msg) => {
  if (!ok) throw new Error(msg);
};

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
// newPage opens a fresh browser context (its own sessionStorage) and records the
// requests to the issuer.
const newPage = async () => {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) { console.error(`CSP violation: ${m.text()}`); failed = true; }
  });
  const issued = [];
  page.on("request", (r) => { if (r.url().startsWith(issuer)) issued.push(r); });
  return { ctx, page, issued };
};

try {
  // Sign in: the button names the issuer's host; one click goes to the issuer and back.
  const { page, issued } = await newPage();
  await page.goto(url);
  const host = new URL(issuer).host;
  await page.getByTestId("oidc-signin").filter({ hasText: `Sign in with ${host}` }).waitFor();
  await page.getByTestId("oidc-signin").click();
  await page.getByTestId("scope").filter({ hasText: /^read \+ write as alice@acme$/ }).waitFor();
  step("signed in: read + write as alice@acme");

  const authz = issued.find((r) => new URL(r.url()).pathname === "/authorize");
  check(authz, "no request to the authorization endpoint");
  const q = new URL(authz.url()).searchParams;
  check(q.get("response_type") === "code" && q.get("client_id") === clientID && q.get("redirect_uri") === url &&
    q.get("code_challenge_method") === "S256" && /^[\w-]{43}$/.test(q.get("code_challenge") || "") && (q.get("state") || "").length >= 16 &&
    q.get("scope") === "openid profile", `authorization request: ${authz.url()}`);
  const tok = issued.find((r) => new URL(r.url()).pathname === "/token");
  check(tok && tok.method() === "POST", "no POST to the token endpoint");
  const form = new URLSearchParams(tok.postData() || "");
  check(form.get("grant_type") === "authorization_code" && form.get("client_id") === clientID && form.get("redirect_uri") === url &&
    /^[\w.~-]{43,128}$/.test(form.get("code_verifier") || "") && form.get("code"), `token request: ${tok.postData()}`);
  check(/application\/x-www-form-urlencoded/.test(tok.headers()["content-type"] || ""), "token request content type");
  check(!page.url().includes("code=") && !page.url().includes("state="), `the URL still holds the code: ${page.url()}`);
  check(await page.evaluate(() => sessionStorage.getItem("fathom.oidc")) === null, "the verifier stayed in sessionStorage");
  step("authorization request and token exchange carry PKCE (S256), client id, redirect URI and state");

  // The list shows acme's session and not globex's.
  await page.locator(`tr[data-session="${env("ACME_SESSION")}"]`).waitFor();
  check(await page.locator(`tr[data-session="${env("GLOBEX_SESSION")}"]`).count() === 0, "globex's session is listed to alice");
  await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
  step("lists acme's session only");

  // A redirect back with another state is refused: no token request, no sign-in.
  const t = await newPage();
  await t.page.route(`${issuer}/authorize**`, async (route) => {
    const resp = await route.fetch({ maxRedirects: 0 });
    const back = new URL(resp.headers()["location"]);
    back.searchParams.set("state", "tampered");
    await route.fulfill({ status: 302, headers: { location: back.toString() } });
  });
  await t.page.goto(url);
  await t.page.getByTestId("oidc-signin").click();
  await t.page.getByTestId("toast").filter({ hasText: "state does not match" }).waitFor();
  await t.page.getByTestId("scope").filter({ hasText: /^no access$/ }).waitFor();
  check(!t.issued.some((r) => new URL(r.url()).pathname === "/token"), "a tampered state reached the token endpoint");
  check(!t.page.url().includes("code="), `the URL still holds the code: ${t.page.url()}`);
  step("a tampered state is refused");
} catch (e) {
  console.error(e);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
