// Drives the operator console (/ui) of a running gateway in headless Chromium, the way
// an operator would: log in with the token, watch servers, kill an upstream and see it
// come back, run a tool from "try it" and find it in Activity with its gate decision,
// answer questions waiting for a person, and check that requests without the cookie or
// with a wrong CSRF token are refused. Screenshots of every page go to SCREENSHOTS.
//
// First, a gateway with no tokens configured opens its console at once, without a login.
//
// Run by tests/tests/ui_console.rs, which starts the gateways and sets:
//   GATEWAY_URL (http://127.0.0.1:PORT), GATEWAY_TOKEN, SCREENSHOTS (a folder),
//   SLOW_EVENTS (the slow server's event log), OPEN_GATEWAY_URL (the one without tokens).
// Prints one line per step; exits non-zero with the reason on the first failure.
// Nothing here depends on pixel positions: elements are found by role, label and text.

import { createRequire } from "node:module";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(new URL("../peers/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const URL_ = process.env.GATEWAY_URL;
const TOKEN = process.env.GATEWAY_TOKEN;
const SHOTS = process.env.SCREENSHOTS;
const SLOW_EVENTS = process.env.SLOW_EVENTS;
const OPEN_URL = process.env.OPEN_GATEWAY_URL;
const WAIT_MS = 30000;

if (!URL_ || !TOKEN || !SHOTS || !SLOW_EVENTS || !OPEN_URL) {
  console.error("set GATEWAY_URL, GATEWAY_TOKEN, SCREENSHOTS, SLOW_EVENTS and OPEN_GATEWAY_URL");
  process.exit(2);
}

// Whether the slow server has logged the start of the call labelled `label`.
function slowCallStarted(label) {
  let text = "";
  try { text = readFileSync(SLOW_EVENTS, "utf8"); } catch (_) { return false; }
  return text.split("\n").filter(Boolean).map((line) => JSON.parse(line))
    .some((event) => event.event === "start" && event.label === label);
}
mkdirSync(SHOTS, { recursive: true });

function step(text) { console.log("ok - " + text); }
function fail(text) { throw new Error(text); }

// Polls `probe` until it returns a truthy value (returned), or fails with `what`.
async function until(what, probe, timeout = WAIT_MS) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await probe();
      if (last) return last;
    } catch (e) { last = e.message; }
    await new Promise((r) => setTimeout(r, 200));
  }
  fail(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

// ---- A real MCP client over streamable HTTP, without elicitation (so `ask` falls back
// to the console).
function sseMessages(text) {
  return text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim())
    .filter(Boolean).map((l) => JSON.parse(l));
}
async function mcp(body, session) {
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    Authorization: `Bearer ${TOKEN}`,
  };
  if (session) headers["Mcp-Session-Id"] = session;
  const response = await fetch(URL_ + "/mcp", { method: "POST", headers, body: JSON.stringify(body) });
  const text = await response.text();
  const type = response.headers.get("content-type") || "";
  const messages = type.includes("event-stream") ? sseMessages(text) : text ? [JSON.parse(text)] : [];
  return { response, message: messages.find((m) => m.id === body.id) };
}
async function mcpClient() {
  const init = await mcp({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
    protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "ui-test-client", version: "1.0.0" } } });
  const session = init.response.headers.get("mcp-session-id");
  if (!session) fail("no Mcp-Session-Id from initialize: " + JSON.stringify(init.message));
  await mcp({ jsonrpc: "2.0", method: "notifications/initialized" }, session);
  return {
    call: async (id, name, args) => (await mcp({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } }, session)).message,
  };
}

async function shot(page, name) {
  await audit(page, name);
  await page.screenshot({ path: join(SHOTS, name + ".png"), fullPage: true });
  step("screenshot " + name + " (every control labelled, every text at WCAG AA contrast)");
}

// What a screen-reader and a low-vision user need of the page as it is now: every visible
// control has an accessible name, and every visible text meets WCAG AA contrast against
// its actual background (4.5:1, or 3:1 for large text).
async function audit(page, name) {
  const problems = await page.evaluate(() => {
    const visible = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
    const found = [];
    for (const el of document.querySelectorAll("input, select, textarea, button, a[href]")) {
      if (!visible(el) || el.type === "hidden") continue;
      const named = (el.labels && el.labels.length) || el.getAttribute("aria-label")
        || el.getAttribute("aria-labelledby") || (el.textContent || "").trim();
      if (!named) found.push(`unlabelled ${el.outerHTML.slice(0, 80)}`);
    }
    const rgba = (text) => (text.match(/[\d.]+/g) || []).map(Number);
    const luminance = ([r, g, b]) => {
      const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
      return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
    };
    // The colour behind `el`: its own background composited over its ancestors'.
    const background = (el) => {
      const layers = [];
      for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
        const [r, g, b, a = 1] = rgba(getComputedStyle(node).backgroundColor);
        if (a > 0) layers.push([r, g, b, a]);
        if (a >= 1) break;
      }
      return layers.reverse().reduce((under, [r, g, b, a]) =>
        [r * a + under[0] * (1 - a), g * a + under[1] * (1 - a), b * a + under[2] * (1 - a)], [255, 255, 255]);
    };
    for (const el of document.querySelectorAll("body *")) {
      if (el.closest("svg") || !visible(el) || el.disabled) continue;
      const text = [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join("").trim();
      if (!text) continue;
      const style = getComputedStyle(el);
      const [r, g, b] = rgba(style.color);
      const [l1, l2] = [luminance([r, g, b]), luminance(background(el))].sort((x, y) => y - x);
      const ratio = (l1 + 0.05) / (l2 + 0.05);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      if (ratio < (large ? 3 : 4.5)) found.push(`contrast ${ratio.toFixed(2)} for "${text.slice(0, 40)}" (${style.color})`);
    }
    return found;
  });
  if (problems.length) fail(`${name}: ${problems.join("; ")}`);
}

async function cellText(page, selector) {
  return ((await page.locator(selector).first().textContent({ timeout: 2000 })) || "").trim();
}

async function main() {
  const profile = mkdtempSync(join(tmpdir(), "mcp-gateway-ui-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    await run(context);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

async function run(context) {
  // ---- No tokens configured: the console opens at once, without a login form.
  const open = await context.newPage();
  await open.goto(OPEN_URL + "/ui");
  await open.getByRole("heading", { name: "Servers" }).waitFor({ timeout: WAIT_MS });
  if (await open.locator("#login").isVisible()) fail("the login form is shown though no token is configured");
  if (await open.getByRole("button", { name: "Log out" }).isVisible()) fail("a Log out button without tokens");
  await open.close();
  step("with no tokens configured, /ui opens at once without a login");

  const page = context.pages()[0] || await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  // Everything the page needs is inside the binary: nothing is fetched from elsewhere.
  page.on("request", (r) => { if (!r.url().startsWith(URL_ + "/")) problems.push("fetched from elsewhere: " + r.url()); });
  page.on("console", (m) => { if (m.type() === "error" && !/401|Unauthorized/.test(m.text())) problems.push("console: " + m.text()); });

  // ---- Log in: with tokens the console asks; a wrong token is refused, the right one
  // opens the console.
  await page.goto(URL_ + "/ui");
  await page.getByLabel("Token").waitFor({ timeout: WAIT_MS });
  if (await page.locator("#page-servers").isVisible()) fail("the console opened without a token");
  await page.getByLabel("Token").fill("not-the-token");
  await page.getByRole("button", { name: "Log in" }).click();
  await until("the wrong-token message", async () => /not valid/.test(await cellText(page, "#login-error")));
  step("a wrong token is refused at login");
  await shot(page, "login");
  await page.getByLabel("Token").fill(TOKEN);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: "Servers" }).waitFor({ timeout: WAIT_MS });
  const cookie = (await context.cookies()).find((c) => c.name === "mcp_gateway_console");
  if (!cookie || !cookie.httpOnly || cookie.sameSite !== "Strict") fail("login cookie not HttpOnly+Strict: " + JSON.stringify(cookie));
  if (cookie.value.includes(TOKEN)) fail("the cookie carries the token");
  step("logged in; the cookie is HttpOnly and SameSite=Strict");

  // ---- Servers: both example upstreams are ready.
  const state = (name) => cellText(page, `tr[data-server="${name}"] [data-field="state"]`);
  const pid = async (name) => Number(await cellText(page, `tr[data-server="${name}"] [data-field="pid"]`));
  const restarts = async (name) => Number(await cellText(page, `tr[data-server="${name}"] [data-field="restarts"]`));
  for (const name of ["kv", "slow"]) {
    await until(`${name} ready`, async () => (await state(name)) === "ready");
  }
  if ((await cellText(page, 'tr[data-server="kv"] [data-field="sign_in"]')) !== "—") fail("kv does not sign in with OAuth, yet its Sign-in cell says otherwise");
  step("servers kv and slow are shown ready; Sign-in shows — for servers without OAuth");
  await shot(page, "servers");

  // ---- Kill an upstream: the supervisor restarts it and the page shows the new pid.
  const killed = await pid("kv");
  if (!(killed > 0)) fail("no pid for kv");
  process.kill(killed, "SIGKILL");
  await until("kv back with a new pid", async () => {
    const now = await pid("kv");
    return now > 0 && now !== killed && (await state("kv")) === "ready" && (await restarts("kv")) >= 1;
  });
  step(`killed kv (pid ${killed}); the page shows it restarted (pid ${await pid("kv")}, restarts ${await restarts("kv")})`);

  // ---- Restart, disable and enable from the buttons. A restart loses no call: one in
  // flight on the old instance still gets its answer.
  const client = await mcpClient();
  const before = await pid("slow");
  const inFlight = client.call(3, "mcp__slow__sleep", { ms: 3000, label: "across-restart" });
  await until("the call running on slow", async () => slowCallStarted("across-restart"));
  await page.getByRole("button", { name: "Restart slow" }).click();
  await until("slow restarted", async () => (await pid("slow")) > 0 && (await pid("slow")) !== before && (await state("slow")) === "ready");
  const slept = await inFlight;
  if (!slept || !slept.result || slept.result.isError || slept.result.structuredContent?.ms !== 3000) fail("the call in flight across the restart was lost: " + JSON.stringify(slept));
  step("the Restart button restarted slow; the call in flight on the old instance got its answer");
  await page.getByRole("button", { name: "Disable slow" }).click();
  await until("slow disabled", async () => (await state("slow")) === "disabled");
  await page.getByRole("button", { name: "Enable slow" }).click();
  await until("slow enabled again", async () => (await state("slow")) === "ready");
  step("Disable and Enable took slow down and up");

  // ---- Catalog and "try it".
  await page.getByRole("link", { name: "Catalog", exact: true }).click();
  await page.getByLabel("Filter").fill("kv__set");
  await page.getByRole("button", { name: "mcp__kv__set" }).click();
  await page.getByRole("heading", { name: "Try it" }).waitFor({ timeout: WAIT_MS });
  await page.getByLabel("key", { exact: true }).fill("colour");
  await page.getByLabel("value", { exact: true }).fill("teal");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await until("the try-it result", async () => (await cellText(page, "#try-result [data-outcome]")) === "Succeeded");
  if (!(await cellText(page, "#try-output")).includes("teal")) fail("the result does not show the value");
  step("try it ran mcp__kv__set through the pipeline");
  await shot(page, "catalog");

  // ---- Activity: the call is in the feed with its gate decision and a trace.
  await page.getByRole("link", { name: "See this call in Activity" }).click();
  await page.getByRole("heading", { name: /Trace of call \d+: mcp__kv__set/ }).waitFor({ timeout: WAIT_MS });
  const row = page.locator('#activity-table tr[data-tool="mcp__kv__set"]').first();
  await until("the call in the feed", async () => (await row.locator('[data-field="gate"]').textContent()) === "allow");
  const steps = await page.locator("#trace .trace-steps li").allTextContents();
  if (!steps.some((s) => s.startsWith("Gate: allow")) || !steps.some((s) => s.startsWith("Dispatch"))) fail("trace lacks gate/dispatch: " + steps);
  step("the feed shows mcp__kv__set with gate decision allow, and its trace: " + steps.join(" | "));
  await shot(page, "activity");

  // ---- A question from a client that cannot elicit waits in Approvals; approve it.
  const asked = client.call(2, "mcp__kv__delete", { key: "colour" });
  await page.getByRole("link", { name: /Approvals/ }).click();
  const question = page.locator("#asks li[data-ask]").filter({ hasText: "mcp__kv__delete" }).first();
  await question.waitFor({ timeout: WAIT_MS });
  if ((await cellText(page, "#ask-count")) !== "1") fail("the badge does not count the question");
  await shot(page, "approvals");
  await question.getByRole("button", { name: "Approve" }).click();
  const approved = await asked;
  if (!approved || !approved.result || approved.result.isError) fail("the approved call failed: " + JSON.stringify(approved));
  step("approved a waiting ask from an MCP client; its call ran");

  // ---- And deny one asked from the console itself.
  await page.getByRole("link", { name: "Catalog", exact: true }).click();
  await page.getByLabel("Filter").fill("kv__delete");
  await page.getByRole("button", { name: "mcp__kv__delete" }).click();
  await page.getByLabel("key", { exact: true }).fill("colour");
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await page.getByRole("link", { name: /Approvals/ }).click();
  await page.locator("#asks li[data-ask]").first().getByRole("button", { name: "Deny" }).click();
  await page.getByRole("link", { name: "Activity", exact: true }).click();
  await until("the denied call in the feed", async () => {
    const denied = page.locator('#activity-table tr[data-tool="mcp__kv__delete"]').first();
    return (await denied.locator('[data-field="gate"]').textContent()) === "ask → refused"
      && (await denied.locator('[data-field="error"]').textContent()) === "DENIED";
  });
  step("denied a waiting ask from the console; the feed shows ask → refused, DENIED");
  await page.getByRole("button", { name: "Load past calls" }).click();
  await until("past calls from the session logs", async () =>
    (await page.locator("#history-table tbody").textContent()).includes("mcp__kv__set"));
  step("Load past calls reads the try-it call back from the session logs");

  // ---- Sessions: the MCP client, with its name and transport.
  await page.getByRole("link", { name: "Sessions", exact: true }).click();
  await until("the client's session", async () => {
    const text = await page.locator("#sessions-table tbody").textContent();
    return text.includes("ui-test-client 1.0.0") && text.includes("streamable-http") && text.includes("console");
  });
  step("Sessions lists the MCP client (streamable-http, ui-test-client 1.0.0) and the console's own");
  await shot(page, "sessions");

  // ---- Metrics: charts from the gateway's counters after the first interval.
  await page.getByRole("link", { name: "Metrics", exact: true }).click();
  // The counters are read every 5 s: wait for the interval that holds the calls above.
  const busy = await until("a metrics interval with calls", () => page.evaluate(async () => {
    const m = await (await fetch("/ui/api/metrics?scope=all")).json();
    return m.points.find((p) => p.calls_per_s > 0 && p.p50_ms > 0) || null;
  }), 20000);
  await until("the charts", async () => (await page.locator("#chart-rate svg path").count()) > 0
    && (await page.locator("#chart-latency svg path").count()) > 0);
  const top = Number(await page.locator("#chart-rate svg text").first().textContent());
  if (!(top > 0)) fail("the calls/s chart's scale is empty: " + top);
  step(`Metrics draws calls/s and latency (an interval with ${busy.calls_per_s.toFixed(2)} calls/s, p50 ${busy.p50_ms.toFixed(2)} ms)`);
  await shot(page, "metrics");

  // ---- Config: effective, secrets masked.
  await page.getByRole("link", { name: "Config", exact: true }).click();
  await until("the configuration", async () => (await cellText(page, "#config-toml")).includes("[servers.kv]"));
  const toml = await cellText(page, "#config-toml");
  if (toml.includes(TOKEN)) fail("the config page shows the token");
  if (!toml.includes("***")) fail("the config page masks nothing");
  step("Config shows the effective configuration with the token masked");
  await shot(page, "config");

  // ---- Keyboard: after a reload (the login cookie keeps the session) the first Tab
  // reaches the skip link.
  await page.reload();
  await page.getByRole("heading", { name: "Config" }).waitFor({ timeout: WAIT_MS });
  await page.keyboard.press("Tab");
  if (!(await page.evaluate(() => document.activeElement.classList.contains("skip")))) fail("Tab does not reach the skip link first");
  step("keyboard: the first Tab focuses 'Skip to content'");

  // ---- Phone width: nothing overflows the page sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const name of ["servers", "catalog", "activity", "approvals", "sessions", "metrics", "config"]) {
    await page.getByRole("link", { name: new RegExp("^" + name, "i") }).click();
    await page.waitForFunction((drawn) => document.body.dataset.drawn === drawn, name, { timeout: WAIT_MS });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    if (wide > 392) fail(`${name} is ${wide}px wide at phone width`);
    if (["servers", "catalog", "activity"].includes(name)) await shot(page, name + "-phone");
    else await audit(page, name + "-phone");
  }
  step("at 390px every page fits the width (tables scroll inside)");
  await page.setViewportSize({ width: 1280, height: 800 });

  // ---- Requests the console must refuse.
  const cookieHeader = `mcp_gateway_console=${cookie.value}`;
  const request = (path, init = {}) => fetch(URL_ + "/ui/api/" + path, init);
  let r = await request("servers");
  if (r.status !== 401) fail(`no cookie: ${r.status}`);
  r = await request("servers/kv/restart", { method: "POST", headers: { Cookie: cookieHeader } });
  if (r.status !== 403 || (await r.json()).error.code !== "UI_BAD_CSRF") fail(`no CSRF token: ${r.status}`);
  r = await request("servers/kv/restart", { method: "POST", headers: { Cookie: cookieHeader, "X-CSRF-Token": "0".repeat(64) } });
  if (r.status !== 403) fail(`wrong CSRF token: ${r.status}`);
  r = await request("servers", { headers: { Cookie: cookieHeader, Origin: "https://evil.example" } });
  if (r.status !== 403) fail(`foreign Origin: ${r.status}`);
  r = await request("servers", { headers: { Cookie: cookieHeader } });
  if (r.status !== 200) fail(`with the cookie: ${r.status}`);
  step("refused: no cookie (401), no or wrong CSRF token (403), foreign Origin (403)");

  // ---- Log out: the cookie stops working.
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByLabel("Token").waitFor({ timeout: WAIT_MS });
  r = await request("servers", { headers: { Cookie: cookieHeader } });
  if (r.status !== 401) fail(`after logout: ${r.status}`);
  step("after Log out the old cookie is refused");

  if (problems.length) fail(problems.join("\n"));
}

main().then(() => { console.log("all console checks passed"); }, (e) => {
  console.error("FAILED: " + (e && e.stack || e));
  process.exit(1);
});
