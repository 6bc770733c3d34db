// Recent runs, the quarantined-files table, and the two dialogs (re-run preview, quarantine detail).
import { api } from "./api.js";
import { duration, h, money, num, plural, replace, when } from "./dom.js";

const STAGES = ["fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index"];

function td(label, content, cls) {
  return h("td", { "data-label": label, class: cls || null }, h("div", {}, content));
}

const RUN_KINDS = [["insertion", "Insertion and access refresh"], ["sync", "Sync"]];

function runOutcome(r) {
  if (r.kind === "sync") {
    const what = r.source_id !== null && r.source_id !== undefined ? `scan of source ${r.source_id}` : "scan";
    return r.insertion_run_id ? `${what} · handed to run ${r.insertion_run_id}` : what;
  }
  return [`${num(r.done)} done · ${num(r.skipped)} skipped`, r.retried ? ` · ${num(r.retried)} retried` : "",
    r.quarantined ? ` · ${num(r.quarantined)} quarantined` : ""].join("");
}

export function renderRuns(el, page, { kind = "", onKind } = {}) {
  const filter = onKind ? h("div", { class: "filters" },
    select("Show", "run-kind", kind, RUN_KINDS, onKind, "All runs")) : null;
  if (!page.runs.length) {
    replace(el, filter, h("p", { class: "empty" }, kind ? "No run of this kind yet." :
      "No runs yet. Start one above, or run ki insert on the server."));
    return;
  }
  const rows = page.runs.map((r) => h("tr", { "data-kind": r.kind },
    td("Run", h("span", { class: "mono" }, String(r.id))),
    td("Kind", r.label),
    td("Status", h("span", { class: `badge ${r.status}` }, r.status)),
    td("Trigger", r.trigger),
    td("Provider", r.provider),
    td("Stage executions", r.kind === "sync" ? "–" : `${num(r.processed)}`, "num"),
    td("Outcome", runOutcome(r)),
    td("Started", when(r.started_at)),
    td("Duration", r.duration_seconds !== null ? duration(r.duration_seconds) : "running"),
    td("Error", r.error ? h("span", { class: "err-msg" }, r.error) : "–")));
  replace(el, filter, h("div", { class: "table-wrap" }, h("table", { class: "stack" },
    h("caption", { class: "sr-only" }, "Recent runs, newest first"),
    h("thead", {}, h("tr", {}, ["Run", "Kind", "Status", "Trigger", "Provider"].map((t) => h("th", { scope: "col" }, t)),
      h("th", { scope: "col", class: "num" }, "Stage executions"),
      ["Outcome", "Started", "Duration", "Error"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows))));
}

function select(label, name, value, options, onChange, all = "All") {
  const id = `q-${name}`;
  return h("label", { for: id }, label, h("select", { id, onchange: (ev) => onChange(ev.target.value) },
    h("option", { value: "" }, all),
    options.map(([v, text]) => h("option", { value: v, selected: v === value }, text))));
}

// a stage as every surface names it: the console name with the id where they differ ("Parse (convert)")
export function stageLabel(stage, name) {
  return !name || name.toLowerCase() === stage ? (name || stage) : `${name} (${stage})`;
}

export function renderQuarantine(el, page, { filter, canWrite, onFilter, afterRetry, stageName = (s) => s }) {
  const f = page.facets;
  const facetOptions = (facet) => Object.entries(f[facet] || {}).sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, `${k} (${num(n)})`]);
  const stageOptions = STAGES.filter((s) => (f.stage || {})[s]).map((s) => [s, `${stageLabel(s, stageName(s))}: ${num(f.stage[s])}`]);
  const filters = h("div", { class: "filters" },
    select("Stage", "stage", filter.stage, stageOptions, (v) => onFilter({ stage: v, offset: 0 })),
    select("Reason", "reason", filter.reason, facetOptions("reason"), (v) => onFilter({ reason: v, offset: 0 })),
    select("Error class", "error_class", filter.error_class, facetOptions("class"), (v) => onFilter({ error_class: v, offset: 0 })));
  if (!page.items.length) {
    const any = filter.stage || filter.reason || filter.error_class;
    replace(el, any ? filters : null, h("p", { class: "empty" }, any ? "No quarantined file matches these filters." :
      "No file is quarantined."));
    return;
  }
  const rows = page.items.map((q) => {
    const tipId = `tip-${q.source_object_id}-${q.stage}`;
    const tipText = q.deterministic
      ? "This failure was deterministic: the file will quarantine again on its first attempt unless the file itself changed."
      : "Releases the file with a fresh attempt budget, sends its later stages back to waiting and starts a run.";
    const retry = h("span", { class: "tip" },
      h("button", { type: "button", disabled: !canWrite, "aria-describedby": tipId,
        onclick: (ev) => retryFile(ev.currentTarget, q, afterRetry) }, "Retry"),
      h("span", { class: "tiptext", role: "tooltip", id: tipId }, tipText));
    return h("tr", {},
      td("File", [h("span", { class: "file-name" }, q.path.split("/").pop()),
        h("span", { class: "file-dir mono", title: q.path }, q.path.slice(0, q.path.lastIndexOf("/") + 1))], "path"),
      td("Stage", stageLabel(q.stage, q.name)),
      td("Error", [h("span", { class: "err-class" }, q.error.reason || q.error.class || "error"),
        q.error.class && q.error.reason ? h("span", { class: "muted" }, ` · ${q.error.class}`) : null,
        h("span", { class: "err-msg" }, (q.error.message || "").slice(0, 240))]),
      td("Kind", h("span", { class: q.deterministic ? "badge det" : "badge nondet" }, q.deterministic ? "deterministic" : "retryable")),
      td("Attempts", num(q.attempts), "num"),
      td("When", when(q.updated_at)),
      td("Actions", h("div", { class: "actions" },
        h("button", { type: "button", onclick: () => openDetail(q.source_object_id) }, "Details"), retry)));
  });
  const from = page.total ? page.offset + 1 : 0;
  const to = page.offset + page.items.length;
  replace(el, filters, h("div", { class: "table-wrap" }, h("table", { class: "stack" },
    h("caption", { class: "sr-only" }, "Quarantined files, newest first"),
    h("thead", {}, h("tr", {}, ["File", "Stage", "Error", "Kind"].map((t) => h("th", { scope: "col" }, t)),
      h("th", { scope: "col", class: "num" }, "Attempts"), h("th", { scope: "col" }, "When"),
      h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
    h("tbody", {}, rows))),
    h("div", { class: "pager" }, h("span", {}, `${num(from)}–${num(to)} of ${num(page.total)}`),
      h("button", { type: "button", disabled: page.offset === 0,
        onclick: () => onFilter({ offset: Math.max(0, page.offset - page.limit) }) }, "Previous"),
      h("button", { type: "button", disabled: to >= page.total, onclick: () => onFilter({ offset: page.offset + page.limit }) }, "Next")));
}

async function retryFile(button, q, afterRetry) {
  button.disabled = true;
  button.textContent = "Retrying…";
  try {
    const res = await api("POST", `/api/quarantine/${q.source_object_id}/retry?stage=${encodeURIComponent(q.stage)}`);
    let note = `Released ${q.path.split("/").pop()} at ${res.released_stage} with ${plural(res.max_attempts, "attempt", "attempts")}` +
      (res.invalidated_stages.length ? `; ${res.invalidated_stages.length} later stages wait again` : "") + ".";
    if (res.run) note += ` Run ${res.run.id} ${res.follow_up ? "is active; another run follows it" : "started"}.`;
    if (res.warning) note += ` Note: ${res.warning}.`;
    await afterRetry(note);
  } catch (failure) {
    button.disabled = false;
    button.textContent = "Retry";
  }
}

function dialogFrame(dialog, titleId, title, body, buttons) {
  replace(dialog, h("div", { class: "dlg-head" }, h("h2", { id: titleId }, title)),
    h("div", { class: "dlg-body" }, body), h("div", { class: "dlg-foot" }, buttons));
  if (!dialog.open) dialog.showModal();
}

async function openDetail(oid) {
  const dialog = document.getElementById("detail-dialog");
  const close = h("button", { type: "button", onclick: () => dialog.close() }, "Close");
  dialogFrame(dialog, "detail-title", "Quarantined file", h("p", { class: "muted" }, "Loading…"), close);
  try {
    const d = await api("GET", `/api/quarantine/${oid}`);
    const rows = d.stages.filter((s) => s.error && (s.status === "quarantined" || s.status === "failed"));
    dialogFrame(dialog, "detail-title", "Quarantined file", [
      h("p", { class: "mono" }, d.path),
      rows.map((s) => [
        h("h3", {}, `${s.name}: ${s.error.reason || s.error.class}`),
        h("dl", { class: "kv" },
          h("dt", {}, "Error class"), h("dd", {}, s.error.class || "–"),
          h("dt", {}, "Reason"), h("dd", {}, s.error.reason || "–"),
          h("dt", {}, "Deterministic"), h("dd", {}, s.error.deterministic ? "yes: retrying cannot change the outcome unless the file changes" : "no"),
          h("dt", {}, "Attempts"), h("dd", {}, `${s.attempts} of ${s.max_attempts}`),
          h("dt", {}, "When"), h("dd", {}, when(s.updated_at))),
        h("p", {}, s.error.message || ""),
        s.error.traceback ? h("details", {}, h("summary", {}, "Traceback (last lines)"),
          h("pre", { class: "trace", tabindex: "0" }, s.error.traceback)) : null]),
      h("p", { class: "small muted" }, "Stages: " + d.stages.map((s) => `${s.name} ${s.bucket}`).join(" · ")),
    ], close);
  } catch (_) {
    dialog.close();
  }
}

export async function openRerunDialog(stage, { stageName, version, afterRun }) {
  const dialog = document.getElementById("rerun-dialog");
  const cancel = h("button", { type: "button", onclick: () => dialog.close() }, "Cancel");
  dialogFrame(dialog, "rerun-title", `Re-run all files — ${stageName(stage)}`, h("p", { class: "muted" }, "Counting files…"), cancel);
  let p;
  try {
    p = await api("GET", `/api/stages/${stage}/rerun-preview`);
  } catch (_) {
    dialog.close();
    return;
  }
  const confirm = h("button", { type: "button", class: "primary", disabled: p.files === 0,
    onclick: () => rerun(stage, p, confirm, dialog, version, afterRun) }, p.files ? `Re-run ${plural(p.files, "file", "files")}` : "Nothing to re-run");
  const perStage = h("table", {}, h("caption", { class: "sr-only" }, "Estimate per stage"),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Stage"), h("th", { scope: "col", class: "num" }, "Files"),
      h("th", { scope: "col", class: "num" }, "Cost"), h("th", { scope: "col" }, "Basis"))),
    h("tbody", {}, p.per_stage.map((e) => h("tr", {}, h("td", {}, stageName(e.stage)), h("td", { class: "num" }, num(e.executions)),
      h("td", { class: "num" }, money(e.cost_usd)), h("td", { class: "small muted" }, e.basis)))));
  dialogFrame(dialog, "rerun-title", `Re-run all files — ${p.name}`, [
    h("div", {}, h("div", { class: "big" }, num(p.files)),
      h("p", { class: "muted", style: { margin: 0 } }, `files re-run ${p.name}: ${num(p.buckets.done)} done, ` +
        `${num(p.buckets.skipped)} skipped by the stage, ${num(p.buckets.disabled)} while it was switched off. Files still waiting are not counted.`)),
    h("dl", { class: "kv" },
      h("dt", {}, "Later stages that re-run too"), h("dd", {}, p.downstream_stages.length ? p.downstream_stages.map(stageName).join(", ") : "none"),
      h("dt", {}, `Spent on ${p.name} so far`), h("dd", {}, `${money(p.spent_usd)} (${plural(p.spent_calls, "model call", "model calls")})`),
      h("dt", {}, "Estimated cost"), h("dd", {}, money(p.estimate_usd)),
      p.budget_remaining_usd === null ? null : [h("dt", {}, "Budget left"), h("dd", { id: "rerun-budget" },
        money(p.budget_remaining_usd), p.budget_note ? h("span", { class: "small muted" }, ` — ${p.budget_note}`) : null)],
      h("dt", {}, "Estimated time"), h("dd", {}, p.estimate_seconds === null ? "unknown" : `about ${duration(p.estimate_seconds)}`)),
    h("details", {}, h("summary", {}, "Cost per stage"), perStage),
    p.notes.map((n) => h("p", { class: "small muted" }, n)),
  ], [cancel, confirm]);
  confirm.focus();
}

async function rerun(stage, preview, button, dialog, version, afterRun) {
  button.disabled = true;
  button.textContent = "Starting…";
  const token = "r" + new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "");
  try {
    await api("PUT", "/api/config", { changes: { [`pipeline.stages.${stage}.rerun_token`]: token }, version: version() });
    const launched = await api("POST", "/api/actions/pipeline");
    dialog.close();
    await afterRun(`${preview.name}: ${plural(preview.files, "file re-runs", "files re-run")}. ` +
      (launched.run ? `Run ${launched.run.id} ${launched.follow_up ? "is active; another run follows it" : "started"}.` : ""));
  } catch (_) {  // api() has shown the failure
    button.disabled = false;
    button.textContent = `Re-run ${plural(preview.files, "file", "files")}`;
  }
}
