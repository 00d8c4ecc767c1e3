// Drives the console's "People signed in" panel (per-user servers) in headless Chromium,
// the way an operator would: log in with the token, find the person's sign-in on the
// Servers page (never a token on the page), revoke it with its button, and see it go.
//
// Run by tests/tests/per_user_oauth.rs, which signs a person in first and sets:
//   GATEWAY_URL (http://127.0.0.1:PORT), GATEWAY_TOKEN, IDENTITY (the person's, as the
//   gateway names it), SECRETS (tokens that must not be on the page, one a line).
// Prints one line per step; exits non-zero with the reason on the first failure.

import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(new URL("../peers/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const { GATEWAY_URL, GATEWAY_TOKEN, IDENTITY } = process.env;
const SECRETS = (process.env.SECRETS || "").split("\n").filter(Boolean);
const WAIT_MS = 30000;

if (!GATEWAY_URL || !GATEWAY_TOKEN || !IDENTITY) {
  console.error("set GATEWAY_URL, GATEWAY_TOKEN and IDENTITY");
  process.exit(2);
}

function step(text) { console.log("ok - " + text); }

async function run(page) {
  await page.goto(GATEWAY_URL + "/ui/#servers");
  await page.getByLabel("Token").fill(GATEWAY_TOKEN);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: "People signed in" }).waitFor({ timeout: WAIT_MS });
  const row = page.locator(`tr[data-sign-in="who:${IDENTITY}"]`);
  await row.waitFor({ timeout: WAIT_MS });
  const state = (await row.locator('[data-field="state"]').textContent()).trim();
  if (state !== "signed_in") throw new Error(`the sign-in shows ${state}`);
  step(`the console lists ${IDENTITY}'s sign-in to who as signed_in`);
  const html = await page.content();
  for (const secret of SECRETS) {
    if (html.includes(secret)) throw new Error("a token is on the page");
  }
  step("no token is on the page");
  await page.getByRole("button", { name: `Revoke ${IDENTITY} at who` }).click();
  await page.getByText(`${IDENTITY} at who: revoked`).waitFor({ timeout: WAIT_MS });
  await row.waitFor({ state: "detached", timeout: WAIT_MS });
  step("Revoke removes the sign-in");
}

const profile = mkdtempSync(join(tmpdir(), "mcp-gateway-ui-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1280, height: 800 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let status = 0;
try {
  await run(await context.newPage());
  console.log("all sign-in checks passed");
} catch (error) {
  console.log("not ok - " + error.message);
  status = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(status);
