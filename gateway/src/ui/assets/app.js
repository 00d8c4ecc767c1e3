// mcp-gateway console: one page, no dependencies. Every page polls the JSON API under
// /ui/api while it is shown; state-changing requests carry the CSRF token the login gave.
"use strict";

const POLL_MS = 1500;
const state = { csrf: null, page: null, timer: null, catalog: null, selected: null,
                activityAfter: 0, calls: [], rendered: {}, tokenless: false };

// ---- DOM helpers: text always goes through textContent, never through HTML parsing.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
const $ = (sel) => document.querySelector(sel);

// Replaces `container`'s children, keeping keyboard focus on the element with the same
// data-key, and skipping the work when the data did not change.
function render(container, key, data, build) {
  const json = JSON.stringify(data);
  if (state.rendered[key] === json) return;
  state.rendered[key] = json;
  const focused = document.activeElement && container.contains(document.activeElement)
    ? document.activeElement.dataset.key : null;
  container.replaceChildren(...build());
  if (focused) {
    const again = container.querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
}

function toast(text) {
  const el = $("#toast");
  el.textContent = text;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.textContent = ""; }, 4000);
}

const fmtTime = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
const fmtMs = (ms) => ms === null || ms === undefined ? "—" : ms < 10 ? ms.toFixed(2) + " ms" : ms < 10000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(1) + " s";
const fmtBytes = (n) => n < 1024 ? n + " B" : n < 1048576 ? (n / 1024).toFixed(1) + " KiB" : (n / 1048576).toFixed(1) + " MiB";
const short = (id) => (id || "").slice(0, 8);

// ---- API
class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}
async function api(path, options = {}) {
  const init = { method: options.method || "GET", headers: {}, credentials: "same-origin" };
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  if (init.method !== "GET" && state.csrf) init.headers["X-CSRF-Token"] = state.csrf;
  const response = await fetch("/ui/api/" + path, init);
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const error = body && body.error ? body.error : { code: "HTTP_" + response.status, message: response.statusText };
    // A login that ended (expired, or the gateway restarted) signs in again; `me` and
    // `login` are how signing in starts.
    if (response.status === 401 && path !== "login" && path !== "me") openConsole();
    throw new ApiError(response.status, error.code, error.message);
  }
  return body;
}

// ---- Login
// Without tokens to ask for ([listen] tokens empty, loopback only) the console opens at
// once; otherwise it asks for one.
async function openConsole() {
  try {
    const info = await api("login");
    if (!info.token_required) {
      const answer = await api("login", { method: "POST", body: { token: "" } });
      state.csrf = answer.csrf;
      state.tokenless = true;
      enterApp();
      return;
    }
  } catch (_) { /* ask, as with tokens */ }
  showLogin();
}

async function showLogin() {
  stopPolling();
  state.csrf = null;
  $("#nav").hidden = true;
  $("#logout").hidden = true;
  document.querySelectorAll(".page").forEach((p) => { p.hidden = true; });
  $("#login").hidden = false;
  try {
    const info = await api("login");
    if (!info.token_required) {
      $("#login-hint").textContent = "No tokens are configured ([listen] tokens is empty, loopback only): log in without one.";
    }
  } catch (_) { /* the form still works */ }
  $("#token").focus();
}

async function login(event) {
  event.preventDefault();
  $("#login-error").textContent = "";
  try {
    const answer = await api("login", { method: "POST", body: { token: $("#token").value } });
    $("#token").value = "";
    state.csrf = answer.csrf;
    enterApp();
  } catch (e) {
    $("#login-error").textContent = e.message;
  }
}

async function logout() {
  try { await api("logout", { method: "POST" }); } catch (_) { /* gone anyway */ }
  showLogin();
}

function enterApp() {
  $("#login").hidden = true;
  $("#nav").hidden = false;
  // Without tokens, logging out would only open the console again.
  $("#logout").hidden = Boolean(state.tokenless);
  route();
}

// ---- Pages and polling
const pages = {
  servers: refreshServers, catalog: refreshCatalog, activity: refreshActivity,
  sessions: refreshSessions, metrics: refreshMetrics, config: refreshConfig,
  approvals: refreshAsks,
};

function route() {
  if (!state.csrf) return;
  const page = (location.hash || "#servers").slice(1);
  state.page = pages[page] ? page : "servers";
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== "page-" + state.page; });
  document.querySelectorAll("#nav a").forEach((a) => {
    if (a.dataset.page === state.page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  });
  document.title = "mcp-gateway console: " + state.page;
  startPolling();
}

function stopPolling() { clearTimeout(state.timer); state.timer = null; }
function startPolling() {
  stopPolling();
  const tick = async () => {
    try {
      await Promise.all([pages[state.page](), state.page === "approvals" ? null : refreshAskCount()]);
      // Which page has been drawn from the API at least once (tests wait on it).
      document.body.dataset.drawn = state.page;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) console.warn(e);
    }
    if (state.csrf) state.timer = setTimeout(tick, POLL_MS);
  };
  tick();
}

// ---- Servers
async function refreshServers() {
  const [{ servers }] = await Promise.all([api("servers"), refreshSignIns()]);
  render($("#servers-table tbody"), "servers", servers, () => servers.map((s) => {
    const act = (action, label, cls) => h("button", {
      type: "button", class: cls, "data-key": s.name + ":" + action,
      "aria-label": `${label} ${s.name}`, onclick: () => serverAction(s.name, action),
    }, label);
    return h("tr", { "data-server": s.name },
      h("th", { scope: "row" }, s.name, h("div", { class: "note mono" }, s.kind)),
      h("td", { class: "state state-" + s.state, "data-field": "state" }, s.state),
      h("td", { class: "num", "data-field": "pid" }, s.pid ?? "—"),
      h("td", { class: "num", "data-field": "restarts" }, s.restarts),
      h("td", { class: "num" }, s.tools), h("td", { class: "num" }, s.prompts),
      h("td", { class: "num" }, s.resources),
      h("td", { "data-field": "sign_in" }, signIn(s.sign_in)),
      h("td", { "data-field": "sandbox", title: sandboxDetail(s.sandbox) }, sandboxSummary(s.sandbox)),
      h("td", { class: "error-text", "data-field": "last_error" }, s.last_error || ""),
      h("td", {}, h("div", { class: "actions" },
        s.enabled ? act("restart", "Restart") : null,
        s.enabled ? act("disable", "Disable", "quiet") : act("enable", "Enable", "quiet"))));
  }));
}

// A stdio server's confinement in a few words; what it may read and write on hover.
function sandboxSummary(sandbox) {
  if (!sandbox) return "—";
  if (sandbox.state === "off") return "off";
  const state = sandbox.state === "partial" ? "partly confined" : "confined";
  const refused = (sandbox.refused ?? []).length;
  return `${state}, network ${Array.isArray(sandbox.network) ? sandbox.network.join(" ") : sandbox.network}` +
    (refused ? `, ${refused} refused` : "");
}

function sandboxDetail(sandbox) {
  if (!sandbox || !sandbox.read) return "";
  return [
    "read: " + sandbox.read.join(" "),
    "write: " + sandbox.write.join(" "),
    "hidden: " + sandbox.hidden.join(" "),
    ...(sandbox.missing ?? []).map((m) => "lacking: " + m),
    ...(sandbox.refused ?? []).map((r) => "refused " + r),
  ].join("\n");
}

// The per-user servers' sign-ins, one row per person; hidden when there is no such server.
async function refreshSignIns() {
  const { servers } = await api("sign-ins");
  $("#sign-ins").hidden = servers.length === 0;
  const rows = servers.flatMap((s) => s.error
    ? [{ key: s.server + ":error", server: s.server, error: s.error }]
    : s.people.map((p) => ({ key: s.server + ":" + p.identity, server: s.server, ...p })));
  render($("#sign-ins-table tbody"), "sign-ins", rows, () => rows.map((r) => r.error
    ? h("tr", { "data-sign-in": r.key }, h("th", { scope: "row" }, r.server),
        h("td", { class: "error-text", colspan: "5" }, r.error))
    : h("tr", { "data-sign-in": r.key },
        h("th", { scope: "row" }, r.server),
        h("td", { class: "mono", "data-field": "identity" }, r.identity),
        h("td", { class: "state state-" + r.state, "data-field": "state" }, r.state),
        h("td", {}, r.expires_at ?? "—"),
        h("td", {}, (r.scopes ?? []).join(" ")),
        h("td", {}, h("div", { class: "actions" }, h("button", {
          type: "button", class: "quiet", "data-key": r.key + ":revoke",
          "aria-label": `Revoke ${r.identity} at ${r.server}`,
          onclick: () => revokeSignIn(r.server, r.identity),
        }, "Revoke"))))));
}

async function revokeSignIn(server, identity) {
  $("#sign-ins-note").textContent = `revoking ${identity} at ${server}…`;
  try {
    await api(`sign-ins/${encodeURIComponent(server)}/revoke`, { method: "POST", body: { identity } });
    $("#sign-ins-note").textContent = `${identity} at ${server}: revoked; their next call asks them to sign in.`;
  } catch (e) {
    $("#sign-ins-note").textContent = `${identity} at ${server}: revoking failed: ${e.message}`;
  }
  refreshSignIns();
}

// The server status' OAuth state, as it has it: a word, or an object with a `state`.
function signIn(oauth) {
  if (oauth == null) return h("span", { title: "this server does not sign in with OAuth" }, "—");
  if (typeof oauth !== "object") return String(oauth);
  return h("span", { title: JSON.stringify(oauth) }, String(oauth.state ?? oauth.status ?? JSON.stringify(oauth)));
}

async function serverAction(name, action) {
  $("#servers-note").textContent = `${action}: ${name}…`;
  try {
    await api(`servers/${encodeURIComponent(name)}/${action}`, { method: "POST" });
    $("#servers-note").textContent = `${name}: ${action} done.`;
  } catch (e) {
    $("#servers-note").textContent = `${name}: ${action} failed: ${e.message}`;
  }
  refreshServers();
}

// ---- Catalog
async function refreshCatalog() {
  state.catalog = await api("catalog");
  drawCatalog();
}

function drawCatalog() {
  const catalog = state.catalog;
  if (!catalog) return;
  const kind = $("#catalog-kind").value;
  const filter = $("#catalog-filter").value.trim().toLowerCase();
  const items = catalog[kind].filter((item) => !filter ||
    [item.name, item.uri, item.server, item.description].some((v) => (v || "").toLowerCase().includes(filter)));
  const table = $("#catalog-table");
  const head = kind === "tools" ? ["Tool", "Server", "Gate", "Profiles"]
    : kind === "prompts" ? ["Prompt", "Server", "Profiles"] : ["Resource", "Server", "Kind"];
  render(table.querySelector("thead"), "catalog-head", head, () =>
    [h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))]);
  render(table.querySelector("tbody"), "catalog-body", { kind, items, selected: state.selected }, () => items.map((item) => {
    const name = item.name || item.uri;
    const cells = kind === "tools"
      ? [h("td", {}, item.server), h("td", { class: "gate-" + item.decision }, item.decision), h("td", {}, item.profiles.join(", "))]
      : kind === "prompts" ? [h("td", {}, item.server), h("td", {}, item.profiles.join(", "))]
      : [h("td", {}, item.server), h("td", {}, item.template ? "template" : "resource")];
    const open = kind === "tools"
      ? h("button", { type: "button", class: "link", "data-key": name, "aria-pressed": String(state.selected === name),
          onclick: () => selectTool(name) }, name)
      : h("span", { class: "mono" }, name);
    return h("tr", { "data-item": name }, h("th", { scope: "row" }, open), cells);
  }));
  if (kind === "tools" && state.selected && !$("#tool-detail").dataset.tool) selectTool(state.selected);
}

function selectTool(name) {
  const tool = state.catalog.tools.find((t) => t.name === name);
  if (!tool) return;
  state.selected = name;
  const detail = $("#tool-detail");
  detail.dataset.tool = name;
  const a = tool.annotations || {};
  const hints = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]
    .filter((k) => a[k] !== undefined).map((k) => `${k}: ${a[k]}`).join(", ");
  detail.replaceChildren(
    h("h3", {}, tool.title || a.title || tool.name),
    h("dl", {},
      h("dt", {}, "Name"), h("dd", { class: "mono" }, tool.name),
      h("dt", {}, "Server"), h("dd", {}, `${tool.server} (its name: ${tool.original})`),
      h("dt", {}, "Description"), h("dd", {}, tool.description || "—"),
      h("dt", {}, "Gate"), h("dd", { class: "gate-" + tool.decision },
        tool.decision + (tool.reason ? `: ${tool.reason}` : "") +
        (tool.decision === "ask" ? ` (clients that cannot be asked: ${state.catalog.ask_fallback})` : "")),
      h("dt", {}, "Profiles"), h("dd", {}, tool.profiles.join(", ") || "none"),
      h("dt", {}, "Annotations"), h("dd", {}, hints || "none"),
      h("dt", {}, "Timeout"), h("dd", {}, tool.timeout_ms ? tool.timeout_ms + " ms" : "none"),
      h("dt", {}, "Concurrency-safe"), h("dd", {}, String(tool.concurrency_safe))),
    h("details", {}, h("summary", {}, "Input schema"),
      h("pre", { class: "code", tabindex: "0" }, JSON.stringify(tool.input_schema, null, 2))),
    tool.output_schema ? h("details", {}, h("summary", {}, "Output schema"),
      h("pre", { class: "code", tabindex: "0" }, JSON.stringify(tool.output_schema, null, 2))) : null,
    tryForm(tool));
  state.rendered["catalog-body"] = null;
  drawCatalog();
}

// A form generated from the input schema: one field per property.
function tryForm(tool) {
  const schema = tool.input_schema || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const id = (k) => "try-" + k.replace(/[^A-Za-z0-9_-]/g, "_");
  const fields = Object.entries(props).map(([key, prop]) => {
    const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== "null") : prop.type;
    let input;
    if (Array.isArray(prop.enum)) {
      input = h("select", { id: id(key), name: key, "data-type": "enum" },
        required.has(key) ? null : h("option", { value: "" }, "(none)"),
        prop.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))));
    } else if (type === "boolean") {
      input = h("input", { id: id(key), name: key, type: "checkbox", "data-type": "boolean" });
    } else if (type === "integer" || type === "number") {
      input = h("input", { id: id(key), name: key, type: "number", step: type === "integer" ? "1" : "any", "data-type": type });
    } else if (type === "string" || type === undefined && !prop.properties) {
      input = h("input", { id: id(key), name: key, type: "text", "data-type": "string" });
    } else {
      input = h("textarea", { id: id(key), name: key, rows: "3", "data-type": "json", placeholder: "JSON" });
    }
    if (required.has(key) && type !== "boolean") input.required = true;
    const hint = [type || "any", required.has(key) ? "required" : "optional", prop.description].filter(Boolean).join(" · ");
    input.setAttribute("aria-describedby", id(key) + "-hint");
    return h("div", { class: "field" },
      h("label", { for: id(key) }, key),
      input,
      h("span", { class: "hint", id: id(key) + "-hint" }, hint));
  });
  const profiles = state.catalog.profiles;
  const result = h("div", { id: "try-result", "aria-live": "polite" });
  const form = h("form", { class: "try", "aria-labelledby": "try-title",
    onsubmit: (e) => { e.preventDefault(); runTry(tool, form, result); } },
    h("h3", { id: "try-title" }, "Try it"),
    h("p", { class: "note" }, "Runs one call through the whole pipeline: gate, guards, validation, timeout and the session log."),
    fields.length ? fields : h("p", { class: "note" }, "This tool takes no arguments."),
    h("div", { class: "row" },
      h("label", { for: "try-profile" }, "Profile"),
      h("select", { id: "try-profile" }, profiles.map((p) =>
        h("option", { value: p, selected: tool.profiles.includes(p) && p === (tool.profiles[0]) ? true : null }, p))),
      h("button", { type: "submit", id: "try-run" }, "Run")),
    result);
  return form;
}

function collectArguments(form) {
  const args = {};
  for (const input of form.querySelectorAll("[data-type]")) {
    const type = input.dataset.type;
    if (type === "boolean") { if (input.checked) args[input.name] = true; continue; }
    if (input.value === "") continue;
    if (type === "integer" || type === "number") args[input.name] = Number(input.value);
    else if (type === "enum") args[input.name] = JSON.parse(input.value);
    else if (type === "json") {
      try { args[input.name] = JSON.parse(input.value); }
      catch (_) { throw new Error(`${input.name}: not valid JSON`); }
    } else args[input.name] = input.value;
  }
  return args;
}

async function runTry(tool, form, result) {
  let args;
  try { args = collectArguments(form); } catch (e) { result.replaceChildren(h("p", { class: "error" }, e.message)); return; }
  const button = form.querySelector("#try-run");
  button.disabled = true;
  result.replaceChildren(h("p", { role: "status" }, "Running… (an ask waits for an answer under Approvals)"));
  try {
    const answer = await api("call", { method: "POST", body: { tool: tool.name, arguments: args, profile: $("#try-profile").value } });
    const r = answer.result;
    const meta = (r._meta || {})["mcp-gateway/error"];
    const text = (r.content || []).map((c) => c.type === "text" ? c.text : JSON.stringify(c)).join("\n");
    result.replaceChildren(
      h("p", { class: r.isError ? "error" : "state-ready", "data-outcome": r.isError ? "error" : "ok" },
        r.isError ? `Failed${meta ? " [" + meta.code + "]" : ""}` : "Succeeded"),
      h("pre", { class: "code", tabindex: "0", id: "try-output" }, text + (r.structuredContent ? "\n" + JSON.stringify(r.structuredContent, null, 2) : "")),
      answer.seq ? h("p", {}, h("a", { href: "#activity", onclick: () => { state.trace = answer.seq; } }, "See this call in Activity")) : null);
  } catch (e) {
    result.replaceChildren(h("p", { class: "error" }, e.message));
  } finally {
    button.disabled = false;
  }
}

// ---- Activity
async function refreshActivity() {
  const answer = await api(`activity?after=${state.activityAfter}`);
  if (answer.calls.length) {
    state.calls = answer.calls.reverse().concat(state.calls).slice(0, 500);
    state.activityAfter = answer.latest;
  }
  render($("#activity-table tbody"), "activity", state.calls.map((c) => c.seq), () => state.calls.map((c) =>
    h("tr", { "data-seq": c.seq, "data-tool": c.tool },
      h("td", { class: "mono" }, fmtTime(c.at_ms)),
      h("td", { class: "mono", title: c.session }, short(c.session)),
      h("td", {}, c.profile),
      h("th", { scope: "row" }, h("button", { type: "button", class: "link", "data-key": "call-" + c.seq,
        "aria-label": `Trace of ${c.tool} at ${fmtTime(c.at_ms)}`, onclick: () => showTrace(c.seq) }, c.tool),
        c.origin === "code" ? h("span", { class: "note" }, " (run_code)") : null),
      h("td", { class: "gate-" + (c.gate || "none"), "data-field": "gate" },
        (c.gate || "—") + (c.approved === true ? " → approved" : c.approved === false ? " → refused" : "")),
      h("td", { class: "num" }, fmtMs(c.duration_ms)),
      h("td", { class: "num" }, fmtBytes(c.result_bytes)),
      h("td", { class: c.error_code ? "code-error" : "", "data-field": "error" }, c.error_code || (c.is_error ? "tool error" : "")))));
  if (state.trace) { const seq = state.trace; state.trace = null; showTrace(seq); }
}

async function showTrace(seq) {
  const box = $("#trace");
  try {
    const c = await api(`activity/${seq}`);
    box.replaceChildren(
      h("h3", { id: "trace-title", tabindex: "-1" }, `Trace of call ${c.seq}: ${c.tool}`),
      h("dl", {},
        h("dt", {}, "Session"), h("dd", { class: "mono" }, c.session),
        h("dt", {}, "Profile"), h("dd", {}, c.profile),
        h("dt", {}, "Arrived"), h("dd", {}, new Date(c.at_ms).toISOString()),
        h("dt", {}, "Duration"), h("dd", {}, fmtMs(c.duration_ms)),
        h("dt", {}, "Result"), h("dd", {}, c.error_code ? `${c.error_code}: ${c.error_message}` : c.is_error ? "the tool reported an error" : "ok")),
      h("h4", {}, "Pipeline"),
      h("ol", { class: "trace-steps" }, c.steps.map(describeStep)),
      h("details", {}, h("summary", {}, "Arguments (secrets masked)"), h("pre", { class: "code" }, JSON.stringify(c.arguments, null, 2))),
      h("details", {}, h("summary", {}, "Result"), h("pre", { class: "code" }, c.result_preview)));
    $("#trace-title").focus();
  } catch (e) {
    box.replaceChildren(h("p", { class: "error" }, e.message));
  }
}

function describeStep(step) {
  const err = (e) => e ? ` — ${e.code}: ${e.message}` : "";
  switch (step.stage) {
    case "gate": return h("li", {}, "Gate: ", h("strong", { class: "gate-" + step.decision }, step.decision), step.reason ? ` (${step.reason})` : step.decision === "pass" ? " (no rule matched)" : "");
    case "ask": return h("li", {}, "Ask: ", step.approved ? "approved" : "not approved" + err(step.error));
    case "guards": return h("li", {}, "Guards: ", step.refused ? "refused — " + step.refused : "passed");
    case "validate": return h("li", {}, "Arguments: ", step.error ? "invalid" + err(step.error) : "valid");
    case "dispatch": return h("li", {}, `Dispatch: ${fmtMs(step.elapsed_ms)}`, step.error ? err(step.error) : " — answered");
    case "post": return h("li", {}, "Post-execute: ", JSON.stringify(step.decision));
    default: return h("li", {}, JSON.stringify(step));
  }
}

async function loadHistory() {
  const answer = await api("history");
  const table = $("#history-table");
  table.hidden = false;
  if (!answer.enabled) { toast("Session logs are off ([log] sessions_dir = false)."); }
  table.querySelector("tbody").replaceChildren(...answer.calls.slice().reverse().map((c) =>
    h("tr", {}, h("td", { class: "mono" }, new Date(c.at_ms).toLocaleString()),
      h("td", { class: "mono", title: c.session }, c.session.slice(-8)),
      h("th", { scope: "row" }, c.tool), h("td", { class: "num" }, fmtMs(c.duration_ms)),
      h("td", { class: c.error_code ? "code-error" : "" }, c.error_code || (c.is_error ? "tool error" : "")))));
}

// ---- Sessions
async function refreshSessions() {
  const { sessions } = await api("sessions");
  render($("#sessions-table tbody"), "sessions", sessions, () => sessions.map((s) =>
    h("tr", { "data-session": s.id },
      h("th", { scope: "row", class: "mono", title: s.id }, short(s.id)),
      h("td", {}, s.transport),
      h("td", {}, s.client_name ? `${s.client_name} ${s.client_version || ""}` : "—"),
      h("td", {}, s.profile),
      h("td", { class: "num" }, s.calls),
      h("td", {}, fmtTime(s.since_ms)))));
}

// ---- Metrics: hand-drawn SVG
const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  el.append(...children.map((c) => c instanceof Node ? c : document.createTextNode(String(c))));
  return el;
}

function lineChart(points, series, label) {
  const W = 600, H = 180, L = 44, B = 22, T = 8, R = 8;
  const values = points.flatMap((p) => series.map((k) => p[k]).filter((v) => v !== null && v !== undefined));
  const max = Math.max(1e-9, ...values) * 1.1;
  const n = Math.max(points.length - 1, 1);
  const x = (i) => L + (W - L - R) * (i / n);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, preserveAspectRatio: "none" });
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  svg.append(s("text", { x: 2, y: T + 10 }, max >= 10 ? Math.round(max) : max.toFixed(2)), s("text", { x: 2, y: H - B }, "0"));
  if (points.length) {
    svg.append(s("text", { x: L, y: H - 6 }, fmtTime(points[0].at_ms)),
      s("text", { x: W - R - 50, y: H - 6 }, fmtTime(points[points.length - 1].at_ms)));
  }
  series.forEach((key, i) => {
    const d = points.map((p, j) => p[key] === null || p[key] === undefined ? null : `${x(j).toFixed(1)},${y(p[key]).toFixed(1)}`)
      .filter(Boolean).map((pt, j) => (j ? "L" : "M") + pt).join(" ");
    if (d) svg.append(s("path", { class: "l" + (i + 1), d }));
    // A dot per reading, so a lone interval (or one between gaps) shows too.
    points.forEach((p, j) => {
      if (p[key] === null || p[key] === undefined) return;
      svg.append(s("circle", { class: "d" + (i + 1), cx: x(j).toFixed(1), cy: y(p[key]).toFixed(1), r: 2.5 },
        s("title", {}, `${fmtTime(p.at_ms)}: ${key} ${p[key] >= 10 ? Math.round(p[key]) : p[key].toFixed(2)}`)));
    });
  });
  return svg;
}

function barChart(points, key, label) {
  const W = 600, H = 180, L = 44, B = 22, T = 8, R = 8;
  const max = Math.max(1, ...points.map((p) => p[key]));
  const bw = (W - L - R) / Math.max(points.length, 1);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, preserveAspectRatio: "none" });
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("text", { x: 2, y: T + 10 }, max), s("text", { x: 2, y: H - B }, "0"));
  points.forEach((p, i) => {
    if (!p[key]) return;
    const hgt = (H - T - B) * p[key] / max;
    svg.append(s("rect", { class: "bar", x: L + i * bw, y: H - B - hgt, width: Math.max(bw - 1, 1), height: hgt },
      s("title", {}, `${fmtTime(p.at_ms)}: ${p[key]} errors ${JSON.stringify(p.errors_by_code)}`)));
  });
  return svg;
}

function errorBars(byKey) {
  const rows = Object.entries(byKey).flatMap(([name, codes]) => Object.entries(codes).map(([code, n]) => ({ name, code, n })));
  if (!rows.length) return [h("p", { class: "note" }, "No errors in the last hour.")];
  const max = Math.max(...rows.map((r) => r.n));
  return [h("div", { class: "bars", role: "list" }, rows.map((r) => h("div", { class: "barrow", role: "listitem" },
    h("span", {}, `${r.name} · ${r.code}: ${r.n}`),
    h("span", { "aria-hidden": "true" }, barFill(Math.max(2, 100 * r.n / max))))))];
}

// The CSP allows no style attributes; the CSSOM sets the width instead.
function barFill(percent) {
  const fill = h("span", { class: "fill" });
  fill.style.width = percent + "%";
  return fill;
}

async function refreshMetrics() {
  const select = $("#metrics-scope");
  const m = await api("metrics?scope=" + encodeURIComponent(select.value));
  const scopes = ["all", ...m.servers.map((x) => "server:" + x), ...m.tools.map((x) => "tool:" + x)];
  render(select, "metrics-scopes", scopes, () => scopes.map((v) =>
    h("option", { value: v, selected: v === m.scope ? true : null }, v === "all" ? "All calls" : v.replace(":", ": "))));
  const last = m.points[m.points.length - 1];
  $("#metrics-note").textContent = m.points.length
    ? `${m.points.length} intervals of ${m.interval_s} s. Last: ${last.calls_per_s.toFixed(2)} calls/s, p50 ${fmtMs(last.p50_ms)}, p99 ${fmtMs(last.p99_ms)}.`
    : `The first interval ends ${m.interval_s} s after the gateway starts.`;
  render($("#chart-rate"), "chart-rate", m.points, () => [lineChart(m.points, ["calls_per_s"], "Calls per second over the last hour")]);
  render($("#chart-latency"), "chart-latency", m.points, () => [lineChart(m.points, ["p50_ms", "p99_ms"], "p50 and p99 latency in milliseconds"),
    h("div", { class: "legend" }, h("span", { class: "k1" }, "p50"), h("span", { class: "k2" }, "p99"))]);
  render($("#chart-errors"), "chart-errors", m.points, () => [barChart(m.points, "errors", "Failed calls per interval")]);
  render($("#errors-tool"), "errors-tool", m.errors_by_tool, () => errorBars(m.errors_by_tool));
  render($("#errors-server"), "errors-server", m.errors_by_server, () => errorBars(m.errors_by_server));
}

// ---- Config
async function refreshConfig() {
  const c = await api("config");
  const r = c.last_reload;
  $("#config-reload").textContent = r
    ? `Last reload ${new Date(r.at_ms).toLocaleString()}: ${r.ok ? "applied" : "refused"} — ${r.message}`
    : `Loaded from ${c.source || "(no file)"} at start; not reloaded since.`;
  $("#config-reload").className = r && !r.ok ? "error" : "";
  if ($("#config-toml").textContent !== c.toml) $("#config-toml").textContent = c.toml;
}

// ---- Approvals
function setAskCount(n) {
  const badge = $("#ask-count");
  badge.textContent = n;
  badge.classList.toggle("on", n > 0);
  badge.setAttribute("aria-label", `${n} question${n === 1 ? "" : "s"} waiting`);
}

async function refreshAskCount() {
  const [a, p] = await Promise.all([api("asks"), api("pins")]);
  setAskCount(a.pending.length + p.held.length);
}

async function refreshAsks() {
  const [a, p] = await Promise.all([api("asks"), api("pins")]);
  setAskCount(a.pending.length + p.held.length);
  drawPins(p);
  $("#approvals-note").textContent = a.ask_fallback === "console"
    ? `Calls gated "ask" from clients that cannot be asked wait here for ${Math.round(a.timeout_ms / 1000)} s, then are denied.`
    : `[gate] ask_fallback is "${a.ask_fallback}": set it to "console" to answer questions here.`;
  render($("#asks"), "asks", a.pending, () => a.pending.length ? a.pending.map((q) =>
    h("li", { "data-ask": q.id, "aria-labelledby": "ask-" + q.id },
      h("strong", { id: "ask-" + q.id }, `Allow ${q.tool}?`),
      h("div", {}, `Reason: ${q.reason}`),
      h("div", { class: "note" }, `Session ${short(q.session)}${q.profile ? ` (profile ${q.profile})` : ""}, asked ${fmtTime(q.asked_at_ms)}, denied at ${fmtTime(q.deadline_ms)} without an answer.`),
      h("pre", { class: "code" }, JSON.stringify(q.arguments, null, 2)),
      h("div", { class: "row" },
        h("button", { type: "button", "data-key": `ask-${q.id}-yes`, onclick: () => answer(q.id, true) }, "Approve"),
        h("button", { type: "button", class: "danger", "data-key": `ask-${q.id}-no`, onclick: () => answer(q.id, false) }, "Deny"))))
    : [h("li", { class: "note empty" }, "Nothing is waiting.")]);
}

// A held tool definition: why it is held, what changed (approved → held), one button.
function drawPins(p) {
  $("#pins-note").textContent = p.error
    ? `The approved definitions cannot be read (${p.error}): every pinned server's tools are withheld.`
    : `A server that changes a tool's definition keeps showing clients the approved one, and its calls are refused, until it is approved here (or with mcp-gateway tools approve NAME). Approvals are kept in ${p.place}.`;
  render($("#pins"), "pins", p.held, () => p.held.length ? p.held.map((d) => {
    const id = "pin-" + d.sha256.slice(0, 12);
    return h("li", { "data-pin": d.name, "aria-labelledby": id },
      h("strong", { id }, `${d.name} (server ${d.server})`),
      h("ul", { class: "reasons" }, d.reasons.map((r) => h("li", {}, `${r.code}: ${r.text}`))),
      h("div", { class: "note" }, `${d.approved ? "Approved → held" : "Held, nothing of it approved before"}; held since ${fmtTime(d.since_ms)}; sha256 ${d.sha256.slice(0, 16)}…`),
      h("pre", { class: "code diff", tabindex: "0", "aria-label": `what changed in ${d.name}` },
        d.diff.map((line) => h("span", { class: line[0] === "+" ? "add" : line[0] === "-" ? "del" : null }, line + "\n"))),
      h("div", { class: "row" },
        h("button", { type: "button", "data-key": `${id}-approve`, onclick: () => approveDefinition(d.name, d.sha256) }, `Approve ${d.name}`)));
  }) : [h("li", { class: "note empty" }, "No tool definition is held.")]);
}

async function approveDefinition(name, sha256) {
  try {
    await api("pins/approve", { method: "POST", body: { name, sha256 } });
    toast(`Approved: clients see the new definition of ${name}, and its calls run.`);
  } catch (e) {
    toast(e.message);
  }
  refreshAsks();
}

async function answer(id, approve) {
  try {
    await api(`asks/${id}`, { method: "POST", body: { approve } });
    toast(approve ? "Approved: the call runs." : "Denied.");
  } catch (e) {
    toast(e.message);
  }
  refreshAsks();
}

// ---- Start
document.addEventListener("DOMContentLoaded", async () => {
  $("#login-form").addEventListener("submit", login);
  $("#logout").addEventListener("click", logout);
  $("#catalog-filter").addEventListener("input", drawCatalog);
  $("#catalog-kind").addEventListener("change", () => { delete $("#tool-detail").dataset.tool; drawCatalog(); });
  $("#metrics-scope").addEventListener("change", () => { state.rendered = {}; refreshMetrics(); });
  $("#history-load").addEventListener("click", loadHistory);
  window.addEventListener("hashchange", route);
  try {
    const me = await api("me");
    state.csrf = me.csrf;
    enterApp();
  } catch (_) {
    openConsole();
  }
});
