// Small DOM and formatting helpers for the ki console. Text always goes in as text nodes (file
// names and error messages are data, never markup).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "style") Object.assign(el.style, value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

const numberFormat = new Intl.NumberFormat(undefined);
export const num = (n) => (n === null || n === undefined ? "–" : numberFormat.format(n));

export function money(usd) {
  if (usd === null || usd === undefined) return "unknown";
  if (usd === 0) return "$0.00";
  if (Math.abs(usd) < 0.01) return "< $0.01";
  return "$" + usd.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const hours = Math.floor(m / 60);
  return `${hours} h ${m % 60} min`;
}

export function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  const today = new Date();
  // the 24-hour clock whatever the locale says (a 12-hour "02:05 PM" reads wrong in a German firm)
  const time = d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  if (d.toDateString() === today.toDateString()) return time;
  return d.toLocaleDateString(undefined, { day: "numeric", month: "short" }) + " " + time;
}

export function plural(n, one, many) {
  return `${num(n)} ${n === 1 ? one : many}`;
}

export function lockBadge(envVar, id) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("fill", "currentColor");
  path.setAttribute("d", "M5 7V5a3 3 0 0 1 6 0v2h1a1 1 0 0 1 1 1v6a1 1 0 0 1-1 1H4a1 1 0 0 1-1-1V8a1 1 0 0 1 1-1zm1.5 0h3V5a1.5 1.5 0 0 0-3 0z");
  svg.append(path);
  return h("span", { class: "lock", id }, svg, "Set by ", h("code", { text: envVar }));
}
