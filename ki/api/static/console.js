// The "Insertion pipeline" page: stage cards, run banner, settings with an unsaved-changes bar.
// Everything comes from the console API (spec: "The console page"); the first answers are embedded
// in the page so it renders without a round trip.
import { api, clearMessage, report, showMessage } from "./api.js";
import { duration, h, lockBadge, num, plural, replace, when } from "./dom.js";
import { mountSearch } from "./search.js";
import { mountSources } from "./sources.js";
import { openRerunDialog, renderQuarantine, renderRuns } from "./tables.js";

const initial = JSON.parse(document.getElementById("initial").textContent);
const S = {
  status: initial.status,
  config: initial.config,
  runs: initial.runs,
  quarantine: initial.quarantine,
  identity: initial.identity,
  catalog: null,
  pending: new Map(),     // dotted key -> new value (not yet saved)
  fieldErrors: {},        // dotted key -> [messages] from a 422
  qFilter: { stage: "", reason: "", error_class: "", offset: 0, limit: 25 },
  runKind: "",            // "Recent runs" filter: "" (all), "insertion" (with access refresh) or "sync"
  saving: false,
};
const canWrite = S.identity.can_write;

export const BUCKETS = [
  ["pending", "queued"], ["running", "running"], ["done", "done"], ["failed", "awaiting retry"],
  ["waiting", "waiting on the stage before"], ["disabled", "skipped — stage is off"], ["skipped", "skipped"],
  ["quarantined", "quarantined"],
];

const RUN_SETTINGS = [
  { key: "pipeline.auto_insert_after_sync", label: "Start insertion after every sync",
    help: "A sync that found new or changed files starts an insertion run by itself. Off: start runs here, e.g. after reviewing a scanned estate." },
  { key: "pipeline.max_file_mb", label: "Maximum file size", unit: "MB",
    help: "A larger file is quarantined at Fetch as too_large." },
  { key: "pipeline.claim_timeout_seconds", label: "Claim timeout", unit: "seconds",
    help: "A stage silent for this long is treated as a dead worker: the file is retried." },
  { key: "pipeline.retry_base_seconds", label: "Retry backoff", unit: "seconds",
    help: "Base of the wait between attempts: base × 2^(attempts − 1)." },
];

const field = (key) => S.config.fields[key];
const current = (key) => (S.pending.has(key) ? S.pending.get(key) : field(key).value);
const stageName = (stage) => (S.config.stages.find((s) => s.stage === stage) || { name: stage }).name;

function labelOf(key) {
  const m = key.match(/^pipeline\.stages\.(\w+)\.(\w+)$/);
  if (m) {
    if (m[2] === "enabled") return stageName(m[1]);
    const what = { max_attempts: "Attempts before quarantine", rerun_token: "Re-run marker",
      timeout_seconds: "Deadline per attempt (seconds)" }[m[2]] || m[2];
    return `${stageName(m[1])}: ${what}`;
  }
  const s = RUN_SETTINGS.find((r) => r.key === key);
  return s ? s.label : key;
}

function show(value, key) {
  if (value === true) return "on";
  if (value === false) return "off";
  if (value === null || value === "") return "none";
  const unit = (RUN_SETTINGS.find((r) => r.key === key) || {}).unit;
  return unit ? `${value} ${unit}` : String(value);
}

function needsRun(key, oldValue, newValue) {
  const f = field(key);
  if (!f || !f.run_rule || oldValue === newValue) return null;
  if (f.run_rule === "on_enable" && !(newValue === true && oldValue !== true)) return null;
  if (f.run_rule === "on_set" && !newValue) return null;
  return f.run_reason;
}

// --- edits and the unsaved-changes bar ---------------------------------------------------------------

function edit(key, value) {
  delete S.fieldErrors[key];
  if (value === field(key).value) S.pending.delete(key);
  else S.pending.set(key, value);
  renderSettings();
  renderSavebar();
}

function pendingReasons() {
  const reasons = [];
  for (const [key, value] of S.pending) {
    const r = needsRun(key, field(key).value, value);
    if (r && !reasons.includes(r)) reasons.push(r);
  }
  return reasons;
}

function renderSavebar() {
  const bar = document.getElementById("savebar");
  const n = S.pending.size;
  bar.hidden = n === 0;
  if (!n) return;
  const reasons = pendingReasons();
  const items = [...S.pending].map(([k, v]) => h("li", {}, `${labelOf(k)}: ${show(field(k).value, k)} → ${show(v, k)}`));
  replace(document.getElementById("savebar-summary"),
    h("p", {}, h("b", {}, plural(n, "unsaved change", "unsaved changes"))), h("ul", {}, items),
    reasons.map((r) => h("p", { class: "reason" }, `Requires a run: ${r}.`)));
  const save = document.getElementById("save");
  save.textContent = S.saving ? "Saving…" : reasons.length ? "Save and re-run" : "Save";
  save.disabled = S.saving;
  document.getElementById("discard").disabled = S.saving;
}

async function save() {
  if (!S.pending.size || S.saving) return;
  S.saving = true;
  renderSavebar();
  clearMessage("save");
  const changes = Object.fromEntries(S.pending);
  try {
    const saved = await api("PUT", "/api/config", { changes, version: S.config.version }, { quiet: true });
    S.pending.clear();
    S.fieldErrors = {};
    let note = `Saved ${plural(saved.changed.length, "change", "changes")}.`;
    if (saved.requires_run) {
      const launched = await api("POST", "/api/actions/pipeline");
      note += launched.run ? ` Run ${launched.run.id} ${launched.follow_up ? "is active; another run follows it" : "started"} ` +
        `because ${saved.reasons.join("; ")}.` : "";
    } else {
      note += " No run is needed for these changes.";
    }
    showMessage("saved", "info", note);
    await refreshConfig();
    await tick();
  } catch (failure) {
    if (failure.body && failure.body.error === "invalid_config") S.fieldErrors = failure.body.fields || {};
    report(failure);
  } finally {
    S.saving = false;
    renderAll();
  }
}

function discard() {
  S.pending.clear();
  S.fieldErrors = {};
  clearMessage("save");
  renderAll();
}

// --- stage cards -----------------------------------------------------------------------------------------

function catalogChip(stage) {
  if (!S.catalog) return null;
  const e = S.catalog.entries.find((x) => x.stage === stage);
  if (!e) return null;
  let text;
  let warn = false;
  if (e.kind === "rules") text = "Rules (offline, no model)";
  else if (e.kind === "none") text = "No embedding model";
  else if (e.kind === "local") text = `${e.alias} (local)`;
  else if (e.resolved) {
    text = e.resolved === e.alias ? e.alias : `${e.alias} → ${e.resolved}`;
    if (e.input_usd_per_million !== null) text += ` · $${e.input_usd_per_million}/$${e.output_usd_per_million} per 1M tokens`;
  } else { text = e.alias ? `${e.alias} (not resolved)` : "no model assigned"; warn = true; }
  return h("div", { class: "setting" }, h("span", { class: "muted small" }, stage === "index" ? "Embeddings" : "Model"),
    h("span", { class: warn ? "chip warn" : "chip", title: e.reason || text }, h("span", { class: "mono" }, text)));
}

function versionLabel(version) {
  const code = version.split("+")[0];
  return h("span", { class: "muted small version", title: `producer_version ${version}` }, "Version ",
    h("span", { class: "mono" }, code));
}

function numberInput(key, id, placeholder = null) {
  const f = field(key);
  return h("input", { type: "number", id, min: f.minimum, max: f.maximum, step: 1, placeholder,
    value: current(key) ?? "", disabled: !f.editable || !canWrite,
    class: [S.pending.has(key) ? "changed" : "", S.fieldErrors[key] ? "invalid" : ""].join(" "),
    "aria-invalid": S.fieldErrors[key] ? "true" : null,
    "aria-describedby": S.fieldErrors[key] ? `err-${id}` : f.env_var ? `lock-${id}` : null,
    onchange: (ev) => edit(key, ev.target.value === "" ? (placeholder === null ? "" : null) : Number(ev.target.value)) });
}

function stageCard(st, i) {
  const s = st.stage;
  const enabledKey = `pipeline.stages.${s}.enabled`;
  const attemptsKey = `pipeline.stages.${s}.max_attempts`;
  const ef = field(enabledKey);
  const af = field(attemptsKey);
  const enabled = current(enabledKey);
  const total = st.total;
  const parts = BUCKETS.filter(([b]) => st.buckets[b] > 0).map(([b, label]) => `${num(st.buckets[b])} ${label}`);
  const bar = h("div", { class: "bar", role: "img", "aria-label": `${st.name}: ${parts.join(", ") || "no rows yet"}` },
    BUCKETS.filter(([b]) => st.buckets[b] > 0).map(([b]) =>
      h("span", { class: `b-${b}`, style: { width: `${(100 * st.buckets[b]) / total}%` } })));
  // rows a quarantined earlier stage blocks: counted in "waiting", said apart (they move only after a retry)
  const blockedNote = st.blocked ? h("li", { class: "blocked-note" },
    h("span", { class: "label" }, `of which blocked by a quarantined stage`), h("b", {}, num(st.blocked))) : null;
  const legend = h("ul", { class: "legend" }, BUCKETS.map(([b, label]) => [
    h("li", { class: st.buckets[b] ? "" : "zero" }, h("span", { class: `sw b-${b}`, "aria-hidden": "true" }),
      h("span", { class: "label", title: label }, label), h("b", {}, num(st.buckets[b]))),
    b === "waiting" ? blockedNote : null]));
  const toggleId = `enabled-${s}`;
  const toggle = h("input", { type: "checkbox", role: "switch", id: toggleId, checked: enabled,
    class: S.pending.has(enabledKey) ? "changed" : "", disabled: !ef.editable || !canWrite,
    "aria-describedby": ef.env_var ? `lock-${toggleId}` : null, onchange: (ev) => edit(enabledKey, ev.target.checked) });
  const attemptsId = `attempts-${s}`;
  const attempts = numberInput(attemptsKey, attemptsId);
  const deadlineKey = `pipeline.stages.${s}.timeout_seconds`;
  const df = field(deadlineKey);
  const deadlineId = `deadline-${s}`;
  // unset: the stage's default deadline, shown as the placeholder; emptying the field restores it
  const deadline = numberInput(deadlineKey, deadlineId,
    String(S.config.stages.find((x) => x.stage === s).timeout_seconds));
  return h("li", { class: enabled ? "stage" : "stage off", "data-stage": s },
    h("div", { class: "stage-head" }, h("span", { class: "step", "aria-hidden": "true" }, String(i + 1)),
      h("div", { style: { flex: "1" } }, h("h3", {}, st.name), h("span", { class: "stage-id mono" }, s)),
      h("label", { class: "switch", for: toggleId }, toggle, h("span", {}, enabled ? "On" : "Off"),
        h("span", { class: "sr-only" }, ` ${st.name} stage`))),
    ef.env_var ? lockBadge(ef.env_var, `lock-${toggleId}`) : null,
    bar, legend,
    h("div", { class: "stage-settings" },
      catalogChip(s),
      h("div", { class: "setting" }, h("label", { for: attemptsId }, "Attempts before quarantine"),
        af.env_var ? lockBadge(af.env_var, `lock-${attemptsId}`) : null, attempts),
      S.fieldErrors[attemptsKey] ? h("p", { class: "field-error", id: `err-${attemptsId}` }, S.fieldErrors[attemptsKey].join(" ")) : null,
      h("div", { class: "setting" }, h("label", { for: deadlineId }, "Deadline per attempt (seconds)"),
        df.env_var ? lockBadge(df.env_var, `lock-${deadlineId}`) : null, deadline),
      S.fieldErrors[deadlineKey] ? h("p", { class: "field-error", id: `err-${deadlineId}` }, S.fieldErrors[deadlineKey].join(" ")) : null,
      S.fieldErrors[enabledKey] ? h("p", { class: "field-error" }, S.fieldErrors[enabledKey].join(" ")) : null,
      h("div", { class: "setting stage-foot" },
        versionLabel(S.config.stages.find((x) => x.stage === s).producer_version),
        h("button", { type: "button", class: "link", disabled: !canWrite || !enabled,
          title: enabled ? null : "Switch the stage on to re-run it",
          onclick: () => openRerunDialog(s, { stageName, version: () => S.config.version, afterRun }) },
          "Re-run all files…"))));
}

function renderUnreadable() {
  // files the share will not let ki read: parked (waiting, source_unreadable) until their permissions change
  const box = document.getElementById("unreadable");
  const files = S.status.unreadable || [];
  box.hidden = files.length === 0;
  if (!files.length) return;
  const n = files.length;
  replace(box, [
    h("p", {}, `${n}${n >= 200 ? "+" : ""} ${n === 1 ? "file" : "files"} ki may not read, waiting until ` +
      `${n === 1 ? "its" : "their"} permissions change (source_unreadable):`),
    h("ul", { class: "mono small" }, files.map((f) =>
      h("li", {}, f.path, h("span", { class: "muted" }, f.mode ? `  mode ${f.mode}` : "")))),
  ]);
}

function renderStages() {
  renderUnreadable();
  replace(document.getElementById("stages"), S.status.stages.map(stageCard));
  document.getElementById("status-time").textContent = `Updated ${when(S.status.generated_at)}`;
}

// --- run settings ----------------------------------------------------------------------------------------

function renderSettings() {
  renderStages();
  const items = RUN_SETTINGS.map((r) => {
    const f = field(r.key);
    const id = `set-${r.key.replace(/\./g, "-")}`;
    const value = current(r.key);
    const changed = S.pending.has(r.key) ? "changed" : "";
    const err = S.fieldErrors[r.key];
    const described = [`help-${id}`, f.env_var ? `lock-${id}` : null, err ? `err-${id}` : null].filter(Boolean).join(" ");
    let control;
    if (f.type === "boolean") {
      control = h("div", {}, h("div", { class: "setting-title", id: `title-${id}` }, r.label),
        h("label", { class: "switch", for: id },
          h("input", { type: "checkbox", role: "switch", id, checked: value, class: changed,
            disabled: !f.editable || !canWrite, "aria-labelledby": `title-${id}`, "aria-describedby": described,
            onchange: (ev) => edit(r.key, ev.target.checked) }),
          h("span", { "aria-hidden": "true" }, value ? "On" : "Off")));
    } else {
      control = h("div", {}, h("label", { for: id, class: "setting-title" }, r.label), h("div", {},
        h("input", { type: "number", id, value, min: f.minimum ?? f.exclusive_minimum, max: f.maximum,
          step: f.type === "integer" ? 1 : "any", disabled: !f.editable || !canWrite,
          class: [changed, err ? "invalid" : ""].join(" "), "aria-invalid": err ? "true" : null,
          "aria-describedby": described,
          onchange: (ev) => edit(r.key, ev.target.value === "" ? "" : Number(ev.target.value)) }),
        h("span", { class: "unit" }, r.unit || "")));
    }
    return h("div", { class: "setting" }, control, f.env_var ? lockBadge(f.env_var, `lock-${id}`) : null,
      h("p", { class: "help", id: `help-${id}` }, r.help, ` Default ${show(f.default, r.key)}.`),
      err ? h("p", { class: "field-error", id: `err-${id}` }, err.join(" ")) : null);
  });
  replace(document.getElementById("run-settings"), items);
}

// --- run banner ------------------------------------------------------------------------------------------

function budgetNotice() {
  const b = S.status.budget;
  if (!b) return null;
  return h("p", { class: "alert warn", id: "budget-wait", role: "status" },
    `${b.message}. ${plural(b.waiting, "model-stage row waits", "model-stage rows wait")} (reason: budget); nothing is quarantined.`);
}

function renderBanner() {
  const el = document.getElementById("banner");
  const active = S.status.runs;
  if (active.length) {
    const r = active[active.length - 1];
    const pct = r.total ? Math.min(100, (100 * r.processed) / r.total) : 0;
    replace(el,
      h("div", { class: "banner-row" },
        h("div", { class: "banner-title" }, h("span", { class: "pulse", "aria-hidden": "true" }),
          h("h2", { id: "banner-title" }, `${r.label} run ${r.id} is ${r.cancel_requested_at ? "cancelling" : r.status}`)),
        h("div", { class: "banner-actions" },
          h("span", { class: "muted small" }, active.length > 1 ? `${active.length} runs active` : "Updates every 5 seconds"),
          r.kind === "sync" ? null : h("button", { type: "button", class: "danger", id: "cancel-run",
            disabled: !canWrite || Boolean(r.cancel_requested_at), onclick: () => cancelRun(r),
            title: !canWrite ? "This token has no write:pipeline scope"
              : "Stop claiming: the stages in progress finish, everything else stays as it is for the next run" },
            r.cancel_requested_at ? "Cancelling…" : "Cancel run"))),
      h("div", { class: "progress", role: "progressbar", "aria-label": "Run progress", "aria-valuemin": 0,
        "aria-valuemax": r.total, "aria-valuenow": r.processed }, h("span", { style: { width: `${pct}%` } })),
      h("ul", { class: "facts" },
        h("li", {}, h("b", {}, num(r.processed)), ` of ${num(r.total)} stage executions`),
        r.rate_per_second ? h("li", {}, h("b", {}, r.rate_per_second.toFixed(1)), " per second") : null,
        r.eta_seconds !== null ? h("li", {}, "about ", h("b", {}, duration(r.eta_seconds)), " left") : null,
        r.quarantined ? h("li", {}, h("b", {}, num(r.quarantined)), " quarantined") : null,
        h("li", {}, `started ${when(r.started_at)}`), h("li", {}, `provider ${r.provider}`)),
      budgetNotice());
    return;
  }
  const last = S.runs.runs.find((r) => r.kind !== "sync");
  const start = h("button", { type: "button", class: "primary", disabled: !canWrite, onclick: startRun,
    title: canWrite ? null : "This token has no write:pipeline scope" }, "Start insertion run");
  replace(el, h("div", { class: "banner-row" },
    h("div", {}, h("h2", { id: "banner-title" }, "No run is active"),
      h("p", { class: "muted small", style: { margin: ".2rem 0 0" } }, last
        ? `Last run ${last.id} ${last.status} ${when(last.finished_at || last.started_at)}: ` +
          plural(last.processed, "stage execution", "stage executions") +
          (last.duration_seconds !== null ? ` in ${duration(last.duration_seconds)}` : "") +
          (last.quarantined ? `, ${num(last.quarantined)} quarantined` : "") + "."
        : "No run has been started yet.")),
    start), budgetNotice());
}

async function startRun() {
  try {
    const launched = await api("POST", "/api/actions/pipeline");
    showMessage("saved", "info", launched.message);
    await tick();
  } catch (_) { /* reported */ }
}

async function cancelRun(r) {
  if (!window.confirm(`Cancel ${r.label.toLowerCase()} run ${r.id}? The stages in progress finish; ` +
    "nothing else is claimed, and the next run resumes where this one stopped.")) return;
  try {
    const out = await api("POST", `/api/runs/${r.id}/cancel`, {});
    showMessage("saved", "info", out.message);
    await tick();
  } catch (_) { /* reported */ }
}

async function afterRun(note) {
  if (note) showMessage("saved", "info", note);
  await refreshConfig();
  await tick();
}

// --- polling -----------------------------------------------------------------------------------------------

let timer = null;

function schedule(ms) {
  clearTimeout(timer);
  if (document.hidden) return;
  timer = setTimeout(tick, ms ?? (S.status.runs.length ? 5000 : 30000));
}

export async function tick() {
  try {
    S.status = await api("GET", "/api/status", undefined, { quiet: true });
    clearMessage("network");
    await refreshLists();  // the run ledger and quarantine move with the counts
    renderStages();
    renderBanner();
    schedule();
  } catch (failure) {
    report(failure);
    schedule(5000);
  }
}

export async function refreshLists() {
  const q = S.qFilter;
  const params = new URLSearchParams({ limit: q.limit, offset: q.offset });
  for (const k of ["stage", "reason", "error_class"]) if (q[k]) params.set(k, q[k]);
  [S.runs, S.quarantine] = await Promise.all([
    api("GET", `/api/runs?${runKinds(S.runKind)}limit=10`, undefined, { quiet: true }),
    api("GET", `/api/quarantine?${params}`, undefined, { quiet: true }),
  ]);
  renderLists();
}

async function refreshConfig() {
  S.config = await api("GET", "/api/config", undefined, { quiet: true });
}

// the kinds of the "Recent runs" filter, as query parameters
const runKinds = (k) => ({ insertion: "kind=insertion&kind=access_refresh&", sync: "kind=sync&" })[k] || "";

function renderLists() {
  renderRuns(document.getElementById("runs"), S.runs, {
    kind: S.runKind,
    onKind: async (k) => { S.runKind = k; try { await refreshLists(); } catch (f) { report(f); } },
  });
  renderQuarantine(document.getElementById("quarantine"), S.quarantine, {
    filter: S.qFilter, canWrite, stageName,
    onFilter: async (patch) => { Object.assign(S.qFilter, patch); try { await refreshLists(); } catch (f) { report(f); } },
    afterRetry: afterRun,
  });
}

async function loadCatalog() {
  try {
    S.catalog = await api("GET", "/api/models/catalog", undefined, { quiet: true });
    renderStages();
  } catch (_) { /* the chips stay empty; the rest works */ }
}

async function loadHealth() {
  const el = document.getElementById("health");
  try {
    const res = await fetch("/healthz", { headers: { Accept: "application/json" } });
    const data = await res.json();
    const bad = data.components.filter((c) => c.status !== "ok");
    const text = bad.length ? bad.map((c) => `${c.name.replace("_", " ")}: ${c.status}`).join(", ") : "All components OK";
    replace(el, h("span", { class: `dot ${data.status}`, "aria-hidden": "true" }),
      h("span", { title: data.components.map((c) => `${c.name}: ${c.status}${c.detail ? " — " + c.detail : ""}`).join("\n") }, text));
  } catch (_) {
    replace(el, h("span", { class: "dot error", "aria-hidden": "true" }), h("span", {}, "Server unreachable"));
  }
  setTimeout(loadHealth, 60000);
}

function renderAll() {
  renderSettings();
  renderBanner();
  renderSavebar();
  renderLists();
}

document.getElementById("save").addEventListener("click", save);
document.getElementById("discard").addEventListener("click", discard);
document.addEventListener("visibilitychange", () => { if (document.hidden) clearTimeout(timer); else tick(); });
window.addEventListener("beforeunload", (ev) => { if (S.pending.size) { ev.preventDefault(); ev.returnValue = ""; } });
if (!canWrite) showMessage("readonly", "info", "Read-only: this token has no write:pipeline scope, so settings and actions are locked.");
renderAll();
mountSearch(document.getElementById("search"), S.identity);
mountSources(document.getElementById("sources"));
schedule();
loadCatalog();
loadHealth();
