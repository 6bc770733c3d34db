// Talking to the console API: one fetch wrapper that turns every failure into something a person
// can act on, and the message area that shows it.
import { h, replace } from "./dom.js";

export class ApiFailure extends Error {
  constructor(kind, status, body, message) {
    super(message);
    this.kind = kind;      // "network" | "http"
    this.status = status;  // HTTP status (0 for network)
    this.body = body || {};
  }
}

export async function api(method, path, body, { quiet = false } = {}) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    const failure = new ApiFailure("network", 0, null, "The ki server cannot be reached.");
    if (!quiet) report(failure);
    throw failure;
  }
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const failure = new ApiFailure("http", response.status, data, (data && data.message) || `HTTP ${response.status}`);
    if (!quiet) report(failure);
    throw failure;
  }
  clearMessage("network");
  return data;
}

const messages = () => document.getElementById("messages");

export function clearMessage(key) {
  const el = messages().querySelector(`[data-key="${key}"]`);
  if (el) el.remove();
}

export function showMessage(key, level, text, action) {
  clearMessage(key);
  const close = h("button", { type: "button", class: "link", onclick: () => clearMessage(key) }, "Dismiss");
  const el = h("div", { class: `alert ${level}`, role: level === "error" ? "alert" : "status", "data-key": key },
    h("p", {}, text), h("div", { class: "actions" }, action || null, close));
  messages().append(el);
  return el;
}

// Every failure in words: unreachable, session ended, not allowed, pinned by the environment, stale.
export function report(failure) {
  if (failure.kind === "network") {
    showMessage("network", "error", "The ki server cannot be reached. The page keeps trying every few seconds; " +
      "check that `ki serve` is running.");
    return;
  }
  const b = failure.body || {};
  if (failure.status === 401) {
    showMessage("auth", "error", "Your session has ended: the token was revoked or is no longer valid.",
      h("a", { class: "button", href: "/login?ended=1" }, "Sign in again"));
  } else if (failure.status === 403) {
    showMessage("forbidden", "warn", b.message || "This token is not allowed to do that.");
  } else if (b.error === "env_pinned") {
    showMessage("save", "error", `${b.field} is set by the environment variable ${b.env_var} on the server, so ` +
      `it cannot be changed here. Unset ${b.env_var} and restart ki serve to edit it.`);
  } else if (b.error === "stale_version") {
    showMessage("save", "error", "Someone changed the configuration since this page loaded. Reload it to see " +
      "their changes, then apply yours again.", h("button", { type: "button", onclick: () => location.reload() }, "Reload"));
  } else if (b.error === "invalid_config") {
    showMessage("save", "error", "Some values are not valid; nothing was saved. " + (b.message || ""));
  } else {
    showMessage("http", "error", b.message || failure.message);
  }
}

export function replaceMessages() { replace(messages()); }
