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
  // Flattened at every depth: a child list may hold lists (a quoted name is ["“", <code>, "”"]),
  // which String() would turn into "“,[object HTMLElement],”".
  for (const child of children.flat(Infinity)) {
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
    "data-focus": `sort:${key}`,
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
    h("button", { type: "button", "data-focus": "pager:previous", disabled: at === 0, onclick: () => go(at - size) }, "Previous"),
    h("span", {}, `${at + 1}–${Math.min(at + size, total)} of ${total}`),
    h("button", { type: "button", "data-focus": "pager:next", disabled: at >= last, onclick: () => go(at + size) }, "Next"),
  ];
}

// Keyboard focus across a re-render (a sort, a page, a live update): the focused control's stable
// identifier (its data-focus, else its id) before, the control with that identifier after. A
// control that came back disabled (Next on the last page) hands the focus to an enabled sibling.
export function focusKey() {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  if (el.dataset && el.dataset.focus) return { attr: "data-focus", value: el.dataset.focus };
  return el.id ? { attr: "id", value: el.id } : null;
}

export function restoreFocus(key) {
  if (!key) return;
  const now = document.activeElement;
  if (now && now !== document.body && now.isConnected) return; // the focus survived, or moved on
  const el = document.querySelector(`[${key.attr}="${CSS.escape(key.value)}"]`);
  if (!el) return;
  const target = el.disabled ? [...el.parentElement.querySelectorAll("button")].find((b) => !b.disabled) : el;
  if (target) target.focus();
}

// Draw: fn() replaces part of the page; the focus stays on the control it was on.
export function keepingFocus(fn) {
  const key = focusKey();
  const result = fn();
  restoreFocus(key);
  return result;
}
