// A partition's history chart, drawn with D3 (v3, from the XStatic-D3 package): one point per
// archived change, the chosen numeric offset field over time, coloured by who wrote it.
//
// Every change gets its point, also when the chosen field is missing or the change deleted the
// partition (a tombstone): those sit on the bottom edge, drawn as a cross, so the count of points
// is the count of history rows the chart was given.

import { JsonDouble, jsonText } from "./api.js";

const d3 = window.d3;
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];

// Who wrote a change, as the legend names it: Connect (or any writer outside this daemon), else the
// daemon's principal, which is how a Spark query (its token) and an operator (their login) differ.
export function originLabel(change) {
  if (change.origin !== "daemon") return "Connect (external)";
  return `${change.principal || "daemon"} (${(change.operation || "write").toLowerCase()})`;
}

// Numeric fields of the partition's offsets, most common first; position-like names lead on ties.
export function numericFields(changes) {
  const counts = new Map();
  for (const c of changes) {
    if (!c.offset || typeof c.offset !== "object") continue;
    for (const [k, v] of Object.entries(c.offset)) {
      if (typeof v === "number" || typeof v === "bigint" || v instanceof JsonDouble) counts.set(k, (counts.get(k) || 0) + 1);
    }
  }
  const preferred = ["position", "offset", "kafka_offset", "lsn", "lsn_proc", "line"];
  return [...counts.keys()].sort((a, b) => {
    const byCount = counts.get(b) - counts.get(a);
    if (byCount) return byCount;
    const pa = preferred.indexOf(a), pb = preferred.indexOf(b);
    return (pa < 0 ? 99 : pa) - (pb < 0 ? 99 : pb) || a.localeCompare(b);
  });
}

function valueOf(change, field) {
  const v = change.offset && typeof change.offset === "object" ? change.offset[field] : undefined;
  // A BigInt or a double kept as written (JsonDouble, 2.0) is drawn as its number.
  return typeof v === "bigint" || v instanceof JsonDouble ? Number(v) : typeof v === "number" ? v : null;
}

export function drawChart(container, changes, { field, selected, onPick, tooltip }) {
  container.textContent = "";
  const width = Math.max(280, container.clientWidth || 600);
  const height = 260;
  const margin = { top: 12, right: 16, bottom: 36, left: 72 };
  const h = height - margin.top - margin.bottom;
  const labels = [...new Set(changes.map(originLabel))].sort((a, b) =>
    (a.startsWith("Connect") ? -1 : b.startsWith("Connect") ? 1 : a.localeCompare(b)));
  const color = d3.scale.ordinal().domain(labels).range(PALETTE);
  const times = changes.map((c) => c.time_ms);
  const values = changes.map((c) => valueOf(c, field)).filter((v) => v !== null);
  let t0 = d3.min(times), t1 = d3.max(times);
  if (t0 === t1) { t0 -= 1000; t1 += 1000; }
  let v0 = values.length ? d3.min(values) : 0, v1 = values.length ? d3.max(values) : 1;
  if (v0 === v1) { v0 -= 1; v1 += 1; }
  const y = d3.scale.linear().domain([v0, v1]).range([h, 0]).nice();

  const svg = d3.select(container).append("svg")
    .attr("width", width).attr("height", height)
    .attr("role", "img")
    .attr("aria-label", `${field || "offset"} over time: ${changes.length} changes`)
    .attr("data-points", changes.length);
  const plot = svg.append("g");
  // The y axis first: its widest label (1,795,460,055,001,000) sets the left margin, so none is cut.
  const yAxis = plot.append("g").attr("class", "axis")
    .call(d3.svg.axis().scale(y).orient("left").ticks(6).tickFormat(d3.format(",g")));
  const labelWidth = d3.max(yAxis.selectAll("text")[0], (t) => t.getBBox().width) || 0;
  margin.left = Math.max(margin.left, Math.ceil(labelWidth) + 16); // + the tick and its padding
  plot.attr("transform", `translate(${margin.left},${margin.top})`);
  const w = Math.max(40, width - margin.left - margin.right);
  const x = d3.time.scale.utc().domain([new Date(t0), new Date(t1)]).range([0, w]).nice();
  const span = t1 - t0;
  const timeFormat = d3.time.format.utc(span < 10e3 ? "%H:%M:%S.%L" : span < 864e5 ? "%H:%M:%S" : "%Y-%m-%d %H:%M");
  plot.append("g").attr("class", "axis").attr("transform", `translate(0,${h})`)
    .call(d3.svg.axis().scale(x).orient("bottom").ticks(Math.max(2, Math.floor(w / 120))).tickFormat(timeFormat));

  const drawn = changes.map((c, i) => ({ c, i, v: valueOf(c, field) }));
  const line = d3.svg.line().interpolate("step-after")
    .x((d) => x(new Date(d.c.time_ms))).y((d) => y(d.v));
  plot.append("path").attr("class", "line").attr("d", line(drawn.filter((d) => d.v !== null)));

  const points = plot.selectAll(".point").data(drawn).enter().append("path")
    .attr("class", (d) => `point${d.v === null ? " missing" : ""}${selected.has(d.i) ? " selected" : ""}`)
    .attr("d", (d) => d3.svg.symbol().type(d.v === null ? "cross" : "circle").size(d.v === null ? 50 : 42)())
    .attr("transform", (d) => `translate(${x(new Date(d.c.time_ms))},${d.v === null ? h : y(d.v)})`)
    .attr("fill", (d) => color(originLabel(d.c)))
    .attr("data-index", (d) => d.i);
  points.on("mouseover", (d) => showTip(tooltip, d.c, d3.event))
    .on("mousemove", (d) => showTip(tooltip, d.c, d3.event))
    .on("mouseout", () => { tooltip.hidden = true; })
    .on("click", (d) => onPick(d.i, d3.event));

  const legend = d3.select(container).append("ul").attr("class", "legend").attr("aria-label", "Who wrote each change");
  const item = legend.selectAll("li").data(labels).enter().append("li");
  item.append("span").attr("class", "swatch").style("background", (d) => color(d));
  item.append("span").text((d) => d);
  return { color };
}

function showTip(tooltip, change, event) {
  const lines = [
    change.time,
    `${originLabel(change)}${change.remote ? ` from ${change.remote}` : ""}`,
    `log ${change.kafka_partition}@${change.kafka_offset}${change.epoch ? ` (epoch ${change.epoch})` : ""}`,
    change.tombstone ? "deleted (tombstone)" : jsonText(change.offset),
  ];
  if (change.value_problem) lines.push(change.value_problem);
  tooltip.textContent = lines.join("\n");
  tooltip.hidden = false;
  const pad = 14;
  const left = Math.min(event.clientX + pad, window.innerWidth - tooltip.offsetWidth - 8);
  const top = Math.min(event.clientY + pad, window.innerHeight - tooltip.offsetHeight - 8);
  tooltip.style.left = `${Math.max(8, left)}px`;
  tooltip.style.top = `${Math.max(8, top)}px`;
}
