// Small DOM helpers: elements from data (text only, never HTML strings), sortable tables, toasts.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function when(ms) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function ago(ms) {
  if (ms === null || ms === undefined) return "";
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

// A header cell whose button sorts the table by `key`; aria-sort tells screen readers the order.
export function sortHeader(label, key, sort, onSort) {
  const active = sort.key === key;
  const th = h("th", { scope: "col", "aria-sort": active ? (sort.dir > 0 ? "ascending" : "descending") : "none" });
  th.append(h("button", {
    type: "button",
    class: "sort",
    onclick: () => onSort(active ? { key, dir: -sort.dir } : { key, dir: 1 }),
  }, label, h("span", { class: "arrow", "aria-hidden": "true" }, active ? (sort.dir > 0 ? " ▲" : " ▼") : "")));
  return th;
}

let toastTimer = null;
export function toast(message) {
  const el = document.getElementById("toast");
  el.textContent = message;
  el.classList.add("shown");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.classList.remove("shown"), 4000);
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Clipboard API needs a secure context (https or localhost); fall back to a selected textarea.
    const area = h("textarea", { class: "offscreen", "aria-hidden": "true" });
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

// Previous / "first–last of total" / Next for a table shown a page at a time (the daemon cuts the
// page: emulator/server/ui/paging.py). `at` is the first row shown; `go(at)` asks for another page.
export function pagerButtons(total, at, size, go) {
  if (total <= size) return [];
  const last = Math.floor((total - 1) / size) * size;
  return [
    h("button", { type: "button", disabled: at === 0, onclick: () => go(at - size) }, "Previous"),
    h("span", {}, `${at + 1}–${Math.min(at + size, total)} of ${total}`),
    h("button", { type: "button", disabled: at >= last, onclick: () => go(at + size) }, "Next"),
  ];
}
