// The connector page: its offsets table, the chosen partition's history chart and changes, the
// comparison of two points in time, and the changes a writer may make.

import { call, enc, jsonText, plain } from "./api.js";
import { alterPartition, resetConnector, rollbackConnector } from "./changes.js";
import { drawChart, numericFields, originLabel } from "./chart.js";
import { copyText, h, keepingFocus, pagerButtons, sortHeader, toast, when } from "./dom.js";

const PAGE = 100;
const TYPING_MS = 150; // a filter is asked for once typing pauses, not at every key
let page = null; // the state of the page on screen
let asked = 0; // the latest request's number: an answer to an older one is dropped
let typing = null;

function changeKey(c) {
  return `${c.epoch}:${c.kafka_partition}:${c.kafka_offset}`;
}

// The connector and one page of its offsets table, as the table's controls say: the daemon filters,
// sorts and cuts the table (emulator/server/ui/offsets_table.py; 10,000 partitions were 1.9 MB).
export async function loadConnector(name) {
  const mine = page && page.name === name;
  const query = {
    sort: mine ? page.sort.key : "partition",
    desc: mine && page.sort.dir < 0 ? "true" : undefined,
    q: mine && page.filter.trim() ? page.filter.trim() : undefined,
    at: mine ? page.offset : 0,
    limit: PAGE,
  };
  const number = ++asked;
  const data = await call("GET", `/ui/api/connectors/${enc(name)}`, { query });
  data.asked = number;
  return data;
}

async function reloadTable() {
  const data = await loadConnector(page.name);
  if (!page || data.asked !== asked || !data.serving) return;
  page.data = data;
  drawTable();
}

async function loadHistory(name, partition) {
  return call("GET", `/ui/api/connectors/${enc(name)}/history`, { query: { partition: jsonText(partition) } });
}

export function renderConnector(main, data, session) {
  page = {
    name: data.name, data, session, filter: "", sort: { key: "partition", dir: 1 }, offset: 0,
    selected: null, history: null, field: null, picks: [], first: true,
    changesOpen: null, // the changes table's <details>, as the user left it (null: not touched)
  };
  const readOnly = !data.can_write;
  const stoppedNote = data.stopped === false
    ? h("p", { class: "warning", id: "stopped-note" },
        `Connect runs this connector (${data.state}): changes will be refused until it is STOPPED. `,
        `Stop it with Connect's REST API (PUT /connectors/${enc(data.name)}/stop), then change its offsets here.`)
    : null;
  const actions = readOnly
    ? h("p", { class: "muted", id: "read-only" }, "Read only: your principal may not change this connector's offsets.")
    : h("div", { class: "actions" },
        h("button", { type: "button", id: "reset", class: "danger",
          onclick: () => resetConnector(data.name, data.kind, refresh) }, "Reset offsets…"));
  const filter = h("input", { id: "offset-filter", type: "search", placeholder: "partition or offset contains…" });
  filter.addEventListener("input", () => {
    page.filter = filter.value;
    page.offset = 0;
    clearTimeout(typing);
    typing = setTimeout(reloadTable, TYPING_MS);
  });
  main.replaceChildren(...[
    h("p", {}, h("a", { href: "#/" }, "← All connectors")),
    h("h2", {}, h("span", { class: "name", id: "connector-name" }, data.name), " ", h("span", { class: "badge" }, data.kind), " ",
      h("span", { class: `badge state-${String(data.state).toLowerCase()}`, id: "state" }, data.state)),
    h("p", { id: "claim-line", class: "muted" }, claimText(data.claim)),
    stoppedNote, actions,
    h("section", { "aria-labelledby": "history-title", id: "history-section" },
      h("h3", { id: "history-title" }, "History of a partition"),
      h("div", { id: "history" })),
    h("section", { "aria-labelledby": "offsets-title" },
      h("h3", { id: "offsets-title" }, "Offsets"),
      h("div", { class: "toolbar" }, h("label", { for: "offset-filter" }, "Filter partitions"), filter,
        h("span", { class: "muted", id: "offset-count" })),
      h("div", { id: "offsets" }),
      h("div", { class: "pager", id: "pager" })),
  ].filter(Boolean));
  drawTable();
  const rows = page.data.offsets;
  if (rows.length) selectPartition(rows[0]);
  else mark("chart");
}

function claimText(claim) {
  if (!claim) return "Not claimed.";
  if (claim.error) return claim.error;
  return `Claimed by ${claim.owner} (epoch ${claim.epoch}) since ${claim.claimed_at}.`;
}

function mark(what) {
  if (!page.first) return;
  performance.mark(`console:${what}`);
  page.done = (page.done || new Set()).add(what);
  if (page.done.has("table") && page.done.has("chart")) {
    page.first = false;
    performance.mark("console:interactive");
    document.body.dataset.interactive = "true";
  }
}

function drawTable() {
  keepingFocus(drawTableNow);
}

function drawTableNow() {
  const shown = page.data.offsets.map((r) => {
    r.partitionText ??= jsonText(r.partition);
    r.offsetText ??= jsonText(r.offset);
    return r;
  });
  const matching = page.data.matching ?? shown.length;
  const total = page.data.partitions ?? shown.length;
  document.getElementById("offset-count").textContent = `${matching} of ${total} partition(s)`;
  page.offset = page.data.at ?? 0;
  const onSort = (sort) => { page.sort = sort; page.offset = 0; reloadTable(); };
  const writable = page.data.can_write;
  const table = h("table", { class: "offsets", id: "offsets-table" },
    h("caption", { class: "visually-hidden" }, `Offsets of ${page.name}`),
    h("thead", {}, h("tr", {},
      sortHeader("Partition", "partition", page.sort, onSort),
      sortHeader("Offset", "offset", page.sort, onSort),
      sortHeader("Changes", "changes", page.sort, onSort),
      sortHeader("Log position", "log_offset", page.sort, onSort),
      h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")))),
    h("tbody", {}, shown.map((r) => h("tr", { "data-lid": r.lid, class: page.selected === r.lid ? "selected" : "" },
      h("td", {}, h("code", {}, r.partitionText)),
      h("td", {}, h("code", {}, r.offsetText)),
      h("td", { class: "num" }, r.changes ?? "—"),
      h("td", { class: "num", title: r.timestamp_ms >= 0 ? when(r.timestamp_ms) : "" }, r.kafka_partition === undefined ? "—" : `${r.kafka_partition}@${r.log_offset}`),
      h("td", { class: "row-actions" },
        h("button", { type: "button", class: "link", "data-focus": `history:${r.lid}`, "aria-label": `History of ${r.partitionText}`, onclick: () => selectPartition(r) }, "History"),
        h("button", { type: "button", class: "link", "data-focus": `copy:${r.lid}`, "aria-label": `Copy ${r.partitionText} as JSON`,
          onclick: async () => toast(await copyText(jsonText({ partition: r.partition, offset: r.offset }))
            ? "Copied the partition's JSON." : "Copying failed: select and copy the text instead.") }, "Copy"),
        writable ? h("button", { type: "button", class: "link", "data-focus": `edit:${r.lid}`, "aria-label": `Edit ${r.partitionText}`,
          onclick: () => alterPartition(page.name, page.data.kind, r, refresh) }, "Edit") : null)))));
  document.getElementById("offsets").replaceChildren(h("div", { class: "table-wrap" }, table));
  document.getElementById("pager").replaceChildren(
    ...pagerButtons(matching, page.offset, PAGE, (at) => { page.offset = at; reloadTable(); }));
  mark("table");
}

async function selectPartition(row) {
  page.selected = row.lid;
  page.selectedRow = row;
  page.picks = [];
  for (const tr of document.querySelectorAll("#offsets-table tbody tr")) {
    tr.classList.toggle("selected", tr.dataset.lid === row.lid);
  }
  await loadAndDrawHistory();
}

async function loadAndDrawHistory() {
  const box = document.getElementById("history");
  if (!page.session.history) {
    box.replaceChildren(h("p", { class: "muted" }, "History is off on this daemon (--no-history)."));
    mark("chart");
    return;
  }
  const row = page.selectedRow;
  let history;
  try {
    history = await loadHistory(page.name, row.partition);
  } catch (error) {
    box.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
    mark("chart");
    return;
  }
  if (!history.history.ready) {
    const done = history.history.records;
    box.replaceChildren(h("p", {}, `Indexing the history archive (${done} records so far)…`),
      h("progress", { "aria-label": "Indexing the history archive" }));
    setTimeout(() => { if (page && page.selectedRow === row) loadAndDrawHistory(); }, 1000);
    return;
  }
  page.history = history;
  drawHistory();
}

function drawHistory() {
  keepingFocus(drawHistoryNow);
}

function drawHistoryNow() {
  const box = document.getElementById("history");
  const { changes, total } = page.history;
  const row = page.selectedRow;
  const fields = numericFields(changes);
  if (!fields.includes(page.field)) page.field = fields[0] || null;
  const select = h("select", { id: "field" }, fields.map((f) => h("option", { value: f }, f)));
  select.value = page.field || "";
  select.addEventListener("change", () => { page.field = select.value; drawHistory(); });
  const chartBox = h("div", { class: "chart", id: "chart" });
  box.replaceChildren(
    h("p", {}, "Partition ", h("code", {}, jsonText(row.partition)), " · ",
      total > changes.length ? `the newest ${changes.length} of ${total} changes` : `${total} change(s)`),
    h("div", { class: "toolbar" },
      fields.length ? [h("label", { for: "field" }, "Field"), select] : h("span", { class: "muted" }, "No numeric field to draw."),
      h("span", { class: "muted" }, "Click two points (or pick A and B below) to compare them.")),
    chartBox,
    h("div", { id: "compare", "aria-live": "polite" }),
    changesTable(changes));
  if (changes.length) {
    const picked = new Set(page.picks.map((k) => changes.findIndex((c) => changeKey(c) === k)));
    drawChart(chartBox, changes, {
      field: page.field,
      selected: picked,
      tooltip: document.getElementById("tooltip"),
      onPick: (i) => pick(changes[i]),
    });
  } else {
    chartBox.append(h("p", { class: "muted" }, "The archive holds no change of this partition."));
  }
  drawCompare();
  mark("chart");
}

function pick(change) {
  const key = changeKey(change);
  page.picks = page.picks.includes(key) ? page.picks.filter((k) => k !== key) : [...page.picks, key].slice(-2);
  drawHistory();
}

function changesTable(changes) {
  const writable = page.data.can_write;
  const newest = changes.slice().reverse().slice(0, 200);
  const open = page.changesOpen ?? changes.length <= 20;
  return h("details", { class: "changes", id: "changes", open, ontoggle: (event) => {
    if (event.target.open !== open) page.changesOpen = event.target.open; // the user's, not the drawing's
  } },
    h("summary", { id: "changes-summary" }, `Changes of this partition, newest first${changes.length > 200 ? " (200 newest)" : ""}`),
    h("div", { class: "table-wrap" }, h("table", { class: "history-table" },
      h("thead", {}, h("tr", {}, ["Time", "Who", "Offset", "Compare", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, newest.map((c) => {
        const key = changeKey(c);
        const picked = page.picks.includes(key);
        return h("tr", { class: picked ? "selected" : "" },
          h("td", {}, c.time),
          h("td", {}, originLabel(c)),
          h("td", {}, h("code", {}, c.tombstone ? "deleted" : jsonText(c.offset))),
          h("td", {}, h("button", { type: "button", class: "link", "data-focus": `pick:${key}`, "aria-pressed": String(picked),
            "aria-label": `${picked ? "Unpick" : "Pick"} the change of ${c.time} for comparison`, onclick: () => pick(c) },
            picked ? "Picked" : "Pick")),
          h("td", {}, writable ? h("button", { type: "button", class: "link", "data-focus": `rollback:${key}`,
            "aria-label": `Roll back the connector to ${c.time}`,
            onclick: () => rollbackConnector(page.name, c, refresh) }, "Roll back to here") : null));
      })))));
}

function drawCompare() {
  const box = document.getElementById("compare");
  const changes = page.history.changes;
  const picked = page.picks.map((k) => changes.find((c) => changeKey(c) === k)).filter(Boolean);
  if (picked.length < 2) {
    box.replaceChildren(picked.length ? h("p", { class: "muted" }, `A: ${picked[0].time}. Pick a second point.`) : "");
    return;
  }
  const [a, b] = picked.sort((x, y) => x.time_ms - y.time_ms);
  const fa = a.offset || {}, fb = b.offset || {};
  const keys = [...new Set([...Object.keys(fa), ...Object.keys(fb)])];
  const writable = page.data.can_write;
  box.replaceChildren(h("div", { class: "table-wrap" }, h("table", { class: "diff-table", id: "diff" },
    h("caption", {}, `From ${a.time} (${originLabel(a)}) to ${b.time} (${originLabel(b)})`),
    h("thead", {}, h("tr", {}, ["Field", "A", "B", "Change"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, keys.map((k) => {
      const va = fa[k], vb = fb[k];
      const same = jsonText(va) === jsonText(vb);
      const delta = same ? "" : difference(va, vb);
      return h("tr", { class: same ? "" : "changed" }, h("th", { scope: "row" }, k),
        h("td", {}, h("code", {}, va === undefined ? "—" : jsonText(va))),
        h("td", {}, h("code", {}, vb === undefined ? "—" : jsonText(vb))), h("td", {}, delta));
    })))),
  writable ? h("p", {}, h("button", { type: "button", class: "secondary", id: "rollback-to-a", onclick: () => rollbackConnector(page.name, a, refresh) },
    `Roll back the connector to A (${when(a.time_ms)})…`)) : null);
}

// B − A of two numbers, exact for integers beyond 2^53 (BigInt, from parseJson) and for a number
// beside a BigInt; a double kept as written (JsonDouble: 2.0) counts as its number; "changed" for
// anything else, and where only the type changed (2 → 2.0).
function difference(a, b) {
  const va = plain(a), vb = plain(b);
  const numeric = (v) => typeof v === "bigint" || (typeof v === "number" && Number.isFinite(v));
  if (!numeric(va) || !numeric(vb)) return "changed";
  let d;
  if (typeof va === "number" && typeof vb === "number") d = vb - va;
  else if (Number.isInteger(Number(va)) && Number.isInteger(Number(vb))) d = BigInt(vb) - BigInt(va);
  else return "changed";
  if (d === 0 || d === 0n) return "changed"; // the same number written otherwise (2 → 2.0)
  return `${d > 0 ? "+" : ""}${d}`;
}

// After a change, and when the connectors poll says this connector moved: table and chart again.
export async function refresh() {
  if (!page) return;
  const data = await loadConnector(page.name);
  if (!page || data.asked !== asked || !data.serving) return;
  page.data = data;
  document.getElementById("state").textContent = data.state;
  document.getElementById("claim-line").textContent = claimText(data.claim);
  const selected = data.offsets.find((r) => r.lid === page.selected);
  drawTable();
  if (selected) page.selectedRow = selected; // a partition just deleted keeps its (now longer) history
  if (page.selectedRow) await loadAndDrawHistory();
}

export function currentConnector() {
  return page ? page.name : null;
}

export function leaveConnector() {
  page = null;
}
