// The console's search box: GET /v1/search as the signed-in token's principal (its permission filter
// applied, the CLI's query semantics), so a team can check what was just inserted without a terminal.
// Snippets mark hits between « »; they are shown as <mark> spans built from text nodes (never markup).
import { api } from "./api.js";
import { h, num, replace } from "./dom.js";

const PAGE = 10;

// "a «b» c" -> ["a ", <mark>b</mark>, " c"]
export function marked(snippet) {
  const out = [];
  let rest = snippet || "";
  while (rest) {
    const a = rest.indexOf("«");
    const b = a < 0 ? -1 : rest.indexOf("»", a + 1);
    if (a < 0 || b < 0) { out.push(rest); break; }
    if (a > 0) out.push(rest.slice(0, a));
    out.push(h("mark", {}, rest.slice(a + 1, b)));
    rest = rest.slice(b + 1);
  }
  return out;
}

function where(hit) {
  if (hit.part === "deleted") return "struck text (tracked deletion)";
  if (hit.part === "fields" && !hit.matched.length) return "the document's fields (by meaning)";
  return hit.matched.join(", ") || hit.part;
}

function hitItem(hit) {
  const cut = hit.path.lastIndexOf("/") + 1;
  return h("li", { class: "hit" },
    h("div", { class: "hit-head" },
      h("span", { class: "file-name" }, hit.path.slice(cut)),
      h("span", { class: "muted small" }, ` in ${where(hit)} · score ${hit.score.toFixed(2)}`),
      hit.doc_type ? h("span", { class: "muted small" }, ` · ${hit.doc_type}`) : null),
    h("span", { class: "file-dir mono", title: hit.path }, hit.path.slice(0, cut)),
    hit.missing ? h("p", { class: "hit-missing", role: "note" }, `${hit.missing}: it leaves search once the deletion is confirmed`) : null,
    hit.anchor ? h("p", { class: "small muted hit-anchor" }, "on ", h("q", {}, hit.anchor)) : null,
    h("p", { class: "snippet" }, marked(hit.snippet)),
    hit.also_at.length ? h("p", { class: "small muted" }, `also at ${hit.also_at.join(", ")}`) : null);
}

export function mountSearch(el, identity) {
  if (!identity.can_search || !identity.principal) {
    replace(el, h("p", { class: "muted" }, identity.can_search
      ? `The token ${identity.name} has no principal to search as: make one with ki token create --scope search --principal P.`
      : `The token ${identity.name} may not search: make one with ki token create --scope search --principal P.`));
    return;
  }
  const input = h("input", { type: "search", id: "search-q", name: "q", autocomplete: "off", required: true,
    placeholder: "words, \"a phrase\", -excluded", maxlength: 1000 });
  const results = h("div", { id: "search-results", "aria-live": "polite" });
  let state = { query: "", hits: [], cursor: null };

  async function run(query, cursor) {
    const params = new URLSearchParams({ q: query, limit: PAGE });
    if (cursor) params.set("cursor", cursor);
    let page;
    try {
      page = await api("GET", `/v1/search?${params}`, undefined, { quiet: true });
    } catch (f) {
      replace(results, h("p", { class: "alert error", role: "alert" }, f.message));
      return;
    }
    state = { query, hits: cursor ? state.hits.concat(page.hits) : page.hits, cursor: page.next_cursor };
    const more = state.cursor ? h("button", { type: "button", onclick: () => run(state.query, state.cursor) }, "More results") : null;
    replace(results,
      page.notes.map((n) => h("p", { class: "small muted" }, n)),
      state.hits.length
        ? [h("p", { class: "small muted" }, `${num(state.hits.length)} ${state.hits.length === 1 ? "hit" : "hits"}${state.cursor ? " so far" : ""} for `,
            h("b", {}, query), ` as ${page.principal}`),
          h("ol", { class: "hits" }, state.hits.map(hitItem)), more]
        : h("p", { class: "empty" }, `Nothing ${page.principal} may see matches `, h("b", {}, query), "."));
  }

  const form = h("form", { class: "search-form", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const q = input.value.trim();
    if (q) run(q, null);
  } },
  h("label", { for: "search-q" }, "Search the indexed documents as ", h("b", {}, identity.principal)),
  h("div", { class: "search-row" }, input, h("button", { type: "submit", class: "primary" }, "Search")));
  replace(el, form, results);
}
