// Changing offsets: alter one partition, reset the connector, roll it back to a point in time.
//
// Every change is first sent with dry_run=true — the daemon's own checks and plan, exactly what the
// API would do — and the dialog shows that plan as a diff. Only then can it be applied: alter with
// an explicit "Apply" button, the destructive ones (reset, rollback) only after the connector's
// name is typed. Refusals are shown with what to do about them (Connect's STOPPED rule above all).

import { JsonDouble, call, enc, jsonText, parseJson } from "./api.js";
import { h, toast } from "./dom.js";

const dialog = () => document.getElementById("dialog");

// A connector's name as typed: spaces kept (leading, trailing, repeated; console.css .name), quoted.
const nameOf = (connector) => ["“", h("code", { class: "name" }, connector), "”"];

export function explain(error, connector) {
  const box = h("div", { class: "error", role: "alert" }, h("p", { class: "error-message" }, error.message));
  const advice = {
    not_stopped: [
      "Connect runs this connector, and Connect only lets a STOPPED connector's offsets change.",
      `Stop it through Connect's REST API: curl -X PUT http://CONNECT:8083/connectors/${enc(connector)}/stop`,
      "wait until its state shows STOPPED here, then preview again. Resume it afterwards with PUT …/resume.",
    ],
    claim_held: [
      "Someone holds a claim on this connector: only the claim's holder may write.",
      `Wait for it, or release the claim: DELETE /connectors/${enc(connector)}/claim?epoch=N (the epoch is in the message).`,
    ],
    forbidden: ["Your principal's scopes do not allow this change (it needs write on this connector)."],
    unauthenticated: ["Your credentials were not accepted: sign in again."],
    write_outcome_unknown: ["The write may still land. Wait for the table to refresh before you try again."],
    answer_lost: [
      "The request may have reached the daemon and been applied: do not simply try again.",
      "Check the offsets in the table (read again now), then preview again if the change is still needed.",
    ],
    unreachable: ["Nothing was changed. Check that the daemon runs and the network reaches it, then try again."],
    log_timeout: ["The log did not answer in time; nothing was written. Try again."],
    write_partly_applied: [
      "Part of this change is in effect (the message says how much); the rest was not written.",
      "Apply the same change again to write the rest.",
    ],
    connector_not_found: ["The daemon does not know this connector (any more)."],
  }[error.kind];
  if (advice) box.append(h("div", { class: "advice" }, advice.map((line) => h("p", {}, line))));
  return box;
}

function offsetCell(value) {
  return h("code", {}, value === null || value === undefined ? "null (deleted)" : jsonText(value));
}

function plannedRecords(records) {
  if (!records || !records.length) return h("p", {}, "Nothing would be written.");
  const body = records.map((r) =>
    "consumer_group" in r
      ? h("tr", {}, h("td", {}, r.action), h("td", {}, `${r.kafka_topic}[${r.kafka_partition}]`),
          h("td", {}, r.kafka_offset === null || r.kafka_offset === undefined ? "—" : String(r.kafka_offset)), h("td", {}, r.consumer_group))
      : h("tr", {}, h("td", {}, h("code", {}, r.key)), h("td", {}, r.value === null ? h("em", {}, "tombstone") : h("code", {}, r.value)),
          h("td", {}, String(r.kafka_partition)), h("td", {}, r.existing_key ? "existing key" : "new key")));
  const head = "consumer_group" in records[0]
    ? ["Action", "Topic partition", "Offset", "Consumer group"]
    : ["Key", "Value", "Kafka partition", ""];
  return h("div", { class: "table-wrap" }, h("table", { class: "plan" },
    h("caption", {}, `${records.length} record(s) would be written`),
    h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, body)));
}

function rollbackPlan(result) {
  if (!result.changes.length) return h("p", {}, result.message);
  return h("div", { class: "table-wrap" }, h("table", { class: "plan" },
    h("caption", {}, result.message),
    h("thead", {}, h("tr", {}, ["Action", "Partition", "Now", "Then"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, result.changes.map((c) => h("tr", {},
      h("td", {}, c.action), h("td", {}, h("code", {}, jsonText(c.partition))),
      h("td", {}, offsetCell(c.current_offset)), h("td", {}, offsetCell(c.target_offset)))))));
}

// What a dry run plans, for comparing two of them: the records (alter, reset) or the changes (roll back).
function planOf(result) {
  return jsonText(result && (result.records ?? result.changes ?? result));
}

// The dialog's life: optional editor → dry run → plan → confirmation → dry run again → apply.
//
// What is applied is exactly what was previewed, and still is what the daemon plans: an offset
// edited after its preview disables Apply until it is previewed again, and Apply first asks for the
// plan again, so that a partition another writer added meanwhile is not reset unseen (a changed
// plan is shown and must be confirmed again). An Apply whose answer never came may have been
// applied: the table is read again and the change must be previewed again before another try.
function openChange({ title, intro, editor, preview, renderPlan, destructive, connector, apply, done }) {
  const d = dialog();
  document.getElementById("dialog-title").textContent = title;
  const content = document.getElementById("dialog-content");
  const actions = document.getElementById("dialog-actions");
  content.replaceChildren(h("p", { id: "dialog-intro" }, intro), editor ? editor.node : "", h("div", { id: "plan", "aria-live": "polite" }));
  const plan = content.querySelector("#plan");
  const cancel = h("button", { type: "button", class: "secondary", onclick: () => d.close() }, "Cancel");
  const previewButton = h("button", { type: "button", id: "preview" }, "Preview (dry run)");
  actions.replaceChildren(cancel, previewButton);
  let planned = null; // { text, input, result, plan } of the preview on screen
  let confirmed = () => true; // the typed name matches (destructive changes)
  const applyButton = () => actions.querySelector("#apply");
  const edited = () => Boolean(editor && planned && editor.text() !== planned.text);
  const settle = () => {
    const button = applyButton();
    if (!button) return;
    button.disabled = edited() || !confirmed();
    plan.querySelector("#stale")?.toggleAttribute("hidden", !edited());
  };
  if (editor) editor.node.addEventListener("input", settle);

  const showPlan = (result, note) => {
    const confirmBox = h("div", { class: "confirm" });
    const button = h("button", { type: "button", id: "apply", class: destructive ? "danger" : "" }, destructive ? `${title}` : "Apply");
    confirmed = () => true;
    if (destructive) {
      const typed = h("input", { id: "confirm-name", type: "text", autocomplete: "off", spellcheck: "false" });
      confirmed = () => typed.value === connector;
      typed.addEventListener("input", settle);
      confirmBox.append(h("label", { for: "confirm-name" }, "Type the connector's name, ", nameOf(connector), ", to confirm"), typed);
    }
    button.addEventListener("click", () => applyNow(button));
    plan.replaceChildren(note || "", h("h3", {}, "What the daemon would write"), renderPlan(result, planned.input),
      h("p", { class: "warning stale", id: "stale", role: "status", hidden: true },
        "The offset was edited after this preview: preview it again to apply what the editor shows."),
      confirmBox);
    actions.replaceChildren(cancel, previewButton, button);
    settle();
    (destructive ? confirmBox.querySelector("input") : button).focus();
  };

  // After Apply's failure: what to say, and whether a fresh preview is needed before another try.
  const failed = async (error) => {
    plan.append(explain(error, connector));
    if (error.kind !== "answer_lost" && error.kind !== "write_outcome_unknown") {
      settle(); // nothing was applied: Apply may be tried again
      return;
    }
    applyButton().remove(); // not a blind retry: the change may be in effect already
    try {
      await done(); // the table (and chart) as the daemon has them now
      plan.append(h("p", { id: "reread" }, "The offsets were read again: check the table, then preview again if the change is still needed."));
    } catch (again) {
      plan.append(h("p", { id: "reread" }, `The offsets could not be read again (${again.message}): reload the page before trying again.`));
    }
  };

  const applyNow = async (button) => {
    if (edited()) return settle();
    button.disabled = true;
    let result;
    try {
      const now = await preview(planned.input);
      if (planOf(now) !== planned.plan) {
        planned = { ...planned, result: now, plan: planOf(now) };
        return showPlan(now, h("p", { class: "error", role: "alert", id: "plan-changed" },
          "The plan changed since your preview (another writer?): this is what the daemon would write now. Check it and confirm again."));
      }
      result = await apply(planned.input);
    } catch (error) {
      return failed(error);
    }
    d.close();
    toast(result && result.message ? result.message : "Done.");
    await done();
  };

  previewButton.addEventListener("click", async () => {
    planned = null; // no Apply of an older plan while (or after) this one is asked for
    actions.replaceChildren(cancel, previewButton);
    plan.replaceChildren(h("p", { class: "muted" }, "Asking the daemon for its plan…"));
    let input;
    const text = editor ? editor.text() : null;
    try {
      input = editor ? editor.value() : undefined;
    } catch (problem) {
      plan.replaceChildren(h("div", { class: "error", role: "alert" }, h("p", {}, problem.message)));
      return;
    }
    let result;
    try {
      result = await preview(input);
    } catch (error) {
      plan.replaceChildren(explain(error, connector));
      return;
    }
    planned = { text, input, result, plan: planOf(result) };
    showPlan(result);
  });
  d.showModal();
  (editor ? editor.focus : () => previewButton.focus())();
}

function query(kind) {
  return kind === "sink" ? { kind: "sink" } : {};
}

// Where a number of the typed JSON became ±Infinity (1e400): its field's path, else null. Browsers,
// Python and Java would each read it differently (Infinity, an error), so it is not sent.
function nonFinite(value, path = "") {
  if (value instanceof JsonDouble) return null; // an integer's value, so finite
  if (typeof value === "number") return Number.isFinite(value) ? null : `"${path || "the offset"}"`;
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const found = nonFinite(v, Array.isArray(value) ? `${path}[${k}]` : path ? `${path}.${k}` : k);
    if (found) return found;
  }
  return null;
}

export function alterPartition(connector, kind, row, done) {
  const area = h("textarea", { id: "offset-editor", rows: 6, spellcheck: "false" });
  area.value = jsonText(row.offset, 2);
  const editor = {
    node: h("div", { class: "editor" },
      h("p", {}, "Partition ", h("code", {}, jsonText(row.partition))),
      h("label", { for: "offset-editor" }, "New offset (a JSON object, or null to delete the partition)"), area),
    focus: () => area.focus(),
    text: () => area.value,
    value: () => {
      let parsed;
      try {
        parsed = parseJson(area.value);
      } catch (problem) {
        throw new Error(`Not JSON: ${problem.message}`);
      }
      if (parsed !== null && (typeof parsed !== "object" || Array.isArray(parsed))) {
        throw new Error("The offset must be a JSON object (or null).");
      }
      const huge = nonFinite(parsed);
      if (huge) {
        throw new Error(`The number of ${huge} is beyond what a JSON number holds (it would be read as Infinity): ` +
          "write a smaller one; an integer written in digits (no exponent) keeps every digit however long.");
      }
      // Sent as typed (not re-serialized), so integers beyond 2^53 keep every digit.
      return `{"offsets":[{"partition":${jsonText(row.partition)},"offset":${area.value.trim()}}]}`;
    },
  };
  const path = `/connectors/${enc(connector)}/offsets`;
  openChange({
    title: "Alter offset",
    intro: ["Change one partition of ", nameOf(connector), ". The daemon checks the new offset as the API does; nothing is written before you apply."],
    editor,
    connector,
    destructive: false,
    preview: (body) => call("PATCH", path, { body, query: { dry_run: true, ...query(kind) } }),
    renderPlan: (result, body) => h("div", {},
      h("div", { class: "diff" },
        h("div", {}, h("h4", {}, "Now"), offsetCell(row.offset)),
        h("div", {}, h("h4", {}, "After"), offsetCell(parseJson(body).offsets[0].offset))),
      plannedRecords(result.records)),
    apply: (body) => call("PATCH", path, { body, query: query(kind) }),
    done,
  });
}

export function resetConnector(connector, kind, done) {
  const path = `/connectors/${enc(connector)}/offsets`;
  openChange({
    title: "Reset offsets",
    intro: ["Delete every offset of ", nameOf(connector), ": its tasks start from scratch next time."],
    connector,
    destructive: true,
    preview: () => call("DELETE", path, { query: { dry_run: true, ...query(kind) } }),
    renderPlan: (result) => plannedRecords(result.records),
    apply: () => call("DELETE", path, { query: query(kind) }),
    done,
  });
}

export function rollbackConnector(connector, change, done) {
  const path = `/connectors/${enc(connector)}/offsets/rollback`;
  openChange({
    title: "Roll back",
    intro: ["Put every offset of ", nameOf(connector), ` back as it was at ${change.time}, right after the change you picked.`],
    connector,
    destructive: true,
    preview: () => call("POST", path, { query: { to: change.time_ms, dry_run: true } }),
    renderPlan: (result) => rollbackPlan(result),
    apply: () => call("POST", path, { query: { to: change.time_ms } }),
    done,
  });
}
