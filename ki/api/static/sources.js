// The console's "Sources" panel: each source's folder, who may see its documents (its permission model),
// and a loud warning where every principal sees them (a public source, or a share whose files others may read).
import { api } from "./api.js";
import { h, num, replace, when } from "./dom.js";

const MODELS = {
  share: ["From the share", "Readers come from each file's owner, group, mode and ACLs on the share."],
  configured: ["Configured grants", "Readers come from the grants in the source's configuration."],
  public: ["Public", "Every principal sees every document of this source (ki insert --public)."],
};

function td(label, content, cls) {
  return h("td", { "data-label": label, class: cls || null }, h("div", {}, content));
}

function openNote(s) {
  if (s.permissions === "public") return h("span", { class: "badge failed wrap" }, "open to everyone");
  if (!s.indexed) return h("span", { class: "muted" }, "nothing indexed yet");
  if (!s.open_to_everyone) return `${num(s.indexed)} indexed, none open to everyone`;
  const all = s.open_to_everyone === s.indexed;
  return h("span", { class: "badge failed wrap", title: "Restrict them on the share (chmod o-r, setfacl) or with .ki-grants.json" },
    `${all ? "all " : ""}${num(s.open_to_everyone)} of ${num(s.indexed)} open to everyone`);
}

export function renderSources(el, sources) {
  if (!sources.length) {
    replace(el, h("p", { class: "empty" }, "No sources yet. Add one on the server with ki insert FOLDER."));
    return;
  }
  const rows = sources.map((s) => {
    const [label, tip] = MODELS[s.permissions] || [s.permissions, ""];
    return h("tr", { "data-source": String(s.id), "data-permissions": s.permissions },
      td("Source", h("span", { class: "mono" }, String(s.id))),
      td("Folder", h("span", { class: "mono source-path" }, s.path)),
      td("Who sees it", h("span", { class: s.permissions === "public" ? "chip warn" : "chip", title: tip }, label)),
      td("Everyone", openNote(s)),
      td("Files", num(s.files), "num"),
      td("Last scan", s.last_scan_at ? when(s.last_scan_at) : "never"),
      td("Watcher", s.watcher || "–"));
  });
  // the wrapper scrolls sideways on a narrow screen: focusable, so a keyboard can scroll it too
  replace(el, h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Sources" }, h("table", { class: "stack" },
    h("caption", { class: "sr-only" }, "Sources and who may see their documents"),
    h("thead", {}, h("tr", {}, ["Source", "Folder", "Who sees it", "Everyone"].map((t) => h("th", { scope: "col" }, t)),
      h("th", { scope: "col", class: "num" }, "Files"), ["Last scan", "Watcher"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows))));
}

// loads GET /api/sources now and once a minute (it counts every chunk of each source: not on every poll)
export async function mountSources(el) {
  try {
    renderSources(el, await api("GET", "/api/sources", undefined, { quiet: true }));
  } catch (_) {
    replace(el, h("p", { class: "empty" }, "Sources could not be loaded; retrying in a minute."));
  }
  setTimeout(() => mountSources(el), 60000);
}
