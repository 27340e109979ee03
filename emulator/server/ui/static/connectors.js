// The connectors page: every connector the principal may read, filtered and sorted, kept current.

import { call } from "./api.js";
import { ago, clampPage, compare, h, pagerButtons, sortHeader, when } from "./dom.js";

const PAGE = 100;

const state = { filter: "", kind: "", sort: { key: "name", dir: 1 }, rows: [], at: 0 };

function who(change) {
  if (!change) return "—";
  if (change.origin !== "daemon") return "Connect (external)";
  return `${change.principal || "daemon"} · ${change.operation || ""}`.trim();
}

function sortValue(row, key) {
  switch (key) {
    case "last": return row.last_change ? -row.last_change.time_ms : null;
    case "claim": return row.claim ? row.claim.owner : null;
    default: return row[key];
  }
}

function stateBadge(row) {
  const title = row.target ? `target state ${row.target}, ${row.tasks ?? "?"} task(s)` : "no Connect cluster configured";
  return h("span", { class: `badge state-${String(row.state).toLowerCase()}`, title }, row.state);
}

export function renderConnectors(main, data) {
  state.rows = data.connectors || [];
  const list = h("div", { id: "connector-list" });
  const filter = h("input", { id: "filter", type: "search", value: state.filter, placeholder: "name contains…" });
  filter.addEventListener("input", () => { state.filter = filter.value; state.at = 0; draw(list); });
  const kind = h("select", { id: "kind" },
    h("option", { value: "" }, "all"), h("option", { value: "source" }, "source"), h("option", { value: "sink" }, "sink"));
  kind.value = state.kind;
  kind.addEventListener("change", () => { state.kind = kind.value; state.at = 0; draw(list); });
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
  state.rows = data.connectors || [];
  const list = document.getElementById("connector-list");
  if (list) draw(list);
}

function draw(list) {
  const needle = state.filter.trim().toLowerCase();
  const rows = state.rows
    .filter((r) => (!needle || r.name.toLowerCase().includes(needle)) && (!state.kind || r.kind === state.kind))
    .sort((a, b) => state.sort.dir * compare(sortValue(a, state.sort.key), sortValue(b, state.sort.key)) || compare(a.name, b.name));
  const count = document.getElementById("count");
  if (count) count.textContent = `${rows.length} of ${state.rows.length}`;
  const onSort = (sort) => { state.sort = sort; state.at = 0; draw(list); };
  state.at = clampPage(state.at, rows.length, PAGE);
  const shown = rows.slice(state.at, state.at + PAGE);
  const header = h("tr", {},
    sortHeader("Name", "name", state.sort, onSort),
    sortHeader("Kind", "kind", state.sort, onSort),
    sortHeader("State", "state", state.sort, onSort),
    sortHeader("Partitions", "partitions", state.sort, onSort),
    sortHeader("Last change", "last", state.sort, onSort),
    sortHeader("Claim", "claim", state.sort, onSort),
    sortHeader("Lag", "lag", state.sort, onSort));
  const body = shown.map((r) => h("tr", { "data-connector": r.name },
    h("th", { scope: "row" }, h("a", { href: `#/connector/${encodeURIComponent(r.name)}` }, r.name)),
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
    ...pagerButtons(rows.length, state.at, PAGE, (at) => { state.at = at; draw(list); }));
}

export async function loadConnectors() {
  return call("GET", "/ui/api/connectors");
}
