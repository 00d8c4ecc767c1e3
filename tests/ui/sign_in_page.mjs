// Completes a per-user sign-in in headless Chromium, the way a person would: open the link
// the client showed, type the gateway token into the gateway's page, and follow the
// authorization server (tests/servers/idp.mjs signs in and consents at once) back to the
// gateway's callback. A real browser keeps the sign-in's cookie by its own rules
// (SameSite, Path, HttpOnly), which is what the callback relies on.
//
// Run by tests/tests/ui_console.rs with:
//   SIGN_IN_URL (the link), GATEWAY_TOKEN (the token typed in),
//   EXPECT (text the last page must show: "Signed in to" or a refusal's code).
// Prints one line per step; exits non-zero with the reason on the first failure.

import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(new URL("../peers/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const { SIGN_IN_URL, GATEWAY_TOKEN, EXPECT } = process.env;
const WAIT_MS = 30000;

if (!SIGN_IN_URL || !GATEWAY_TOKEN || !EXPECT) {
  console.error("set SIGN_IN_URL, GATEWAY_TOKEN and EXPECT");
  process.exit(2);
}

function step(text) { console.log("ok - " + text); }

async function run(page) {
  await page.goto(SIGN_IN_URL);
  await page.getByLabel("Token").fill(GATEWAY_TOKEN);
  step("the gateway's page asks for the token");
  await page.getByRole("button", { name: "Continue" }).click();
  await page.getByText(EXPECT).waitFor({ timeout: WAIT_MS });
  step(`the browser ended at ${new URL(page.url()).pathname}, which says "${EXPECT}"`);
}

const profile = mkdtempSync(join(tmpdir(), "mcp-gateway-sign-in-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let status = 0;
try {
  await run(await context.newPage());
  console.log("all sign-in page checks passed");
} catch (error) {
  console.log("not ok - " + error.message);
  status = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(status);
