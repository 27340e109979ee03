// The connectors page: the connectors the principal may read, filtered, sorted and a page at a time,
// kept current. The daemon filters, sorts and cuts the page (emulator/server/ui/connector_list.py):
// with every row in each answer, 10,000 connectors were 4.2 MB at every refresh.

import { call } from "./api.js";
import { ago, h, keepingFocus, pagerButtons, sortHeader, when } from "./dom.js";

const PAGE = 100;
const TYPING_MS = 150; // a filter is asked for once typing pauses, not at every key

const state = { filter: "", kind: "", sort: { key: "name", dir: 1 }, at: 0, rows: [], matching: 0, total: 0 };
let asked = 0; // the latest request's number: an answer to an older one (a poll overtaken by a click) is dropped
let typing = null;

function who(change) {
  if (!change) return "—";
  if (change.origin !== "daemon") return "Connect (external)";
  return `${change.principal || "daemon"} · ${change.operation || ""}`.trim();
}

function stateBadge(row) {
  const title = row.target ? `target state ${row.target}, ${row.tasks ?? "?"} task(s)` : "no Connect cluster configured";
  return h("span", { class: `badge state-${String(row.state).toLowerCase()}`, title }, row.state);
}

export function renderConnectors(main, data) {
  keep(data);
  const list = h("div", { id: "connector-list" });
  const filter = h("input", { id: "filter", type: "search", value: state.filter, placeholder: "name contains…" });
  filter.addEventListener("input", () => {
    state.filter = filter.value;
    state.at = 0;
    clearTimeout(typing);
    typing = setTimeout(() => reload(list), TYPING_MS);
  });
  const kind = h("select", { id: "kind" },
    h("option", { value: "" }, "all"), h("option", { value: "source" }, "source"), h("option", { value: "sink" }, "sink"));
  kind.value = state.kind;
  kind.addEventListener("change", () => { state.kind = kind.value; state.at = 0; reload(list); });
  main.replaceChildren(
    h("h2", {}, "Connectors"),
    h("div", { class: "toolbar" },
      h("label", { for: "filter" }, "Filter connectors"), filter,
      h("label", { for: "kind" }, "Kind"), kind,
      h("span", { class: "muted", id: "count" })),
    list,
    h("div", { class: "pager", id: "connectors-pager" }));
  draw(list);
}

export function updateConnectors(data) {
  if (!keep(data)) return;
  const list = document.getElementById("connector-list");
  if (list) draw(list);
}

// The page's rows from an answer; false (nothing kept) when a newer request was made since it was asked.
function keep(data) {
  if (data.asked !== undefined && data.asked !== asked) return false;
  state.rows = data.connectors || [];
  state.matching = data.matching ?? state.rows.length;
  state.total = data.total ?? state.rows.length;
  state.at = data.at ?? 0;
  return true;
}

async function reload(list) {
  const data = await loadConnectors();
  if (keep(data) && list.isConnected) draw(list);
}

function draw(list) {
  keepingFocus(() => drawNow(list));
}

function drawNow(list) {
  const count = document.getElementById("count");
  if (count) count.textContent = `${state.matching} of ${state.total}`;
  const onSort = (sort) => { state.sort = sort; state.at = 0; reload(list); };
  const header = h("tr", {},
    sortHeader("Name", "name", state.sort, onSort),
    sortHeader("Kind", "kind", state.sort, onSort),
    sortHeader("State", "state", state.sort, onSort),
    sortHeader("Partitions", "partitions", state.sort, onSort),
    sortHeader("Last change", "last", state.sort, onSort),
    sortHeader("Claim", "claim", state.sort, onSort),
    sortHeader("Lag", "lag", state.sort, onSort));
  const body = state.rows.map((r) => h("tr", { "data-connector": r.name },
    h("th", { scope: "row" }, h("a", { href: `#/connector/${encodeURIComponent(r.name.toWellFormed())}`, class: "name", "data-focus": `open:${r.name}` }, r.name)),
    h("td", {}, r.kind),
    h("td", {}, stateBadge(r)),
    h("td", { class: "num" }, r.partitions ?? "—"),
    h("td", {}, r.last_change
      ? h("span", { title: when(r.last_change.time_ms) }, `${ago(r.last_change.time_ms)} · ${who(r.last_change)}`)
      : "—"),
    h("td", {}, r.claim ? (r.claim.error ? r.claim.error : `${r.claim.owner} (epoch ${r.claim.epoch})`) : "—"),
    h("td", { class: "num" }, r.kind === "sink" ? (r.lag ?? "unknown") : "—")));
  const table = h("table", { class: "connectors" },
    h("caption", { class: "visually-hidden" }, "Connectors"),
    h("thead", {}, header),
    h("tbody", {}, body.length ? body : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No connector matches."))));
  list.replaceChildren(h("div", { class: "table-wrap" }, table));
  document.getElementById("connectors-pager")?.replaceChildren(
    ...pagerButtons(state.matching, state.at, PAGE, (at) => { state.at = at; reload(list); }));
}

// The list's current page as the page's controls say; with `only`, that connector's row alone (the
// poll on a connector's own page, which asks whether it changed).
export async function loadConnectors(only) {
  if (only !== undefined) return call("GET", "/ui/api/connectors", { query: { connector: only } });
  const query = {
    sort: state.sort.key,
    desc: state.sort.dir < 0 ? "true" : undefined,
    q: state.filter.trim() || undefined,
    kind: state.kind || undefined,
    at: state.at,
    limit: PAGE,
  };
  const number = ++asked;
  const data = await call("GET", "/ui/api/connectors", { query });
  data.asked = number;
  return data;
}
