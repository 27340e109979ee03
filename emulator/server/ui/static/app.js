// The console's shell: who is signed in, which page is shown (#/ or #/connector/NAME), the replay's
// progress bar, and the poll that keeps pages current without a reload.

import { ApiError, NoAnswer, call, signIn, signOut, signedIn } from "./api.js";
import { h } from "./dom.js";
import { loadConnectors, renderConnectors, updateConnectors } from "./connectors.js";
import { currentConnector, leaveConnector, loadConnector, refresh, renderConnector } from "./connector.js";

const POLL_MS = 2000;
let session = null;
let pollTimer = null;
let lastSeen = new Map(); // connector → what its row looked like at the last poll
let lastRead = Date.now(); // when the page's data was last read successfully

const main = () => document.getElementById("main");

function route() {
  const m = location.hash.match(/^#\/connector\/(.+)$/);
  if (!m) return { page: "connectors" };
  try {
    return { page: "connector", name: decodeURIComponent(m[1]) };
  } catch {
    return { page: "bad", address: m[1] }; // a malformed percent-encoding (#/connector/100%)
  }
}

async function start() {
  // The page's data is asked for together with the session (one round trip less before the first paint).
  const data = load(route());
  data.catch(() => null);
  try {
    session = await call("GET", "/ui/api/session");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showSignIn(signedIn() ? error.message : null);
    return showFailure(error);
  }
  showWho();
  await show(data);
  schedulePoll();
}

function load(r) {
  if (r.page === "bad") return Promise.resolve(null);
  return r.page === "connector" ? loadConnector(r.name) : loadConnectors();
}

function showWho() {
  const who = document.getElementById("who");
  const parts = [h("span", {}, `Signed in as ${session.principal}`,
    session.may_write ? "" : h("span", { class: "badge", id: "read-only-badge" }, "read only"))];
  if (session.authentication) {
    parts.push(h("button", { type: "button", class: "secondary", onclick: () => { signOut(); location.reload(); } }, "Sign out"));
  }
  who.replaceChildren(...parts);
}

function showSignIn(problem) {
  document.getElementById("who").replaceChildren();
  const user = h("input", { id: "user", autocomplete: "username" });
  const password = h("input", { id: "password", type: "password", autocomplete: "current-password" });
  const token = h("input", { id: "token", type: "password", autocomplete: "off" });
  const form = h("form", { class: "signin", id: "signin" },
    h("h2", {}, "Sign in"),
    h("div", { id: "signin-problem" }, problem ? h("p", { class: "error", role: "alert" }, problem) : null),
    h("p", {}, "Use the daemon's credentials: a user of its credentials file, or a token."),
    h("fieldset", {}, h("legend", {}, "User and password"),
      h("label", { for: "user" }, "User"), user, h("label", { for: "password" }, "Password"), password),
    h("fieldset", {}, h("legend", {}, "…or a token"), h("label", { for: "token" }, "Token"), token),
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    // A token alone, or a user (and its password): the two fieldsets are alternatives.
    if (token.value.trim()) signIn("token", token.value.trim());
    else if (user.value) signIn("basic", user.value, password.value);
    else {
      form.querySelector("#signin-problem").replaceChildren(h("p", { class: "error", role: "alert", id: "signin-missing" },
        "Type a user and its password, or a token."));
      return user.focus();
    }
    start();
  });
  main().replaceChildren(form);
  user.focus();
}

function showFailure(error) {
  // A NoAnswer's message says the daemon could not be reached; only an answer is "answered".
  const text = error instanceof NoAnswer ? error.message : `The daemon answered: ${error.message}`;
  main().replaceChildren(h("div", { class: "error", role: "alert" }, h("p", {}, text)));
}

// Replay in progress: records read against the end offsets, instead of the API's 503.
function showProgress(data) {
  const area = document.getElementById("progress");
  const bars = [];
  const p = data && !data.ready && data.progress;
  if (p && p.unreachable) {
    // An outage after the replay (a broker not answering, a disk refusing or stalling writes): the
    // offsets stay on the page, as GET answers them, under the reason.
    bars.push(h("p", { class: "error", role: "status", id: "unreachable" }, "The log cannot take writes now. " +
      (data.serving ? "The offsets below are as last read; changes will fail until it recovers. " : "") +
      `Why: ${p.unreachable}`));
  } else if (p) {
    const total = Math.max(p.records_total || 0, p.records_read || 0, 1);
    bars.push(h("div", { class: "bar" },
      h("label", { for: "replay" },
        `Reading the offsets log: ${p.records_read.toLocaleString()} of ${total.toLocaleString()} records, ` +
        `${p.partitions_at_end} of ${p.partitions} partitions at their end`),
      h("progress", { id: "replay", max: total, value: p.records_read })));
  }
  const history = data && data.history;
  if (history && history.enabled && history.building) {
    bars.push(h("div", { class: "bar" },
      h("label", { for: "indexing" }, `Indexing the history archive: ${history.records.toLocaleString()} records so far`),
      h("progress", { id: "indexing" })));
  }
  if (history && history.error) bars.push(h("p", { class: "error" }, `History: ${history.error}`));
  if (history && history.behind) {
    bars.push(h("p", { class: "warning", role: "status", id: "history-behind" },
      `History may lack the latest changes: ${history.behind}.`));
  }
  area.replaceChildren(...bars);
}

function showBadAddress(r) {
  leaveConnector();
  main().replaceChildren(h("h2", {}, "Not a connector address"),
    h("p", { class: "error", role: "alert", id: "bad-address" },
      `#/connector/${r.address} is not a valid connector address: its name is not validly percent-encoded ` +
      "(a % must be followed by two hexadecimal digits, as in %25 for % itself)."),
    h("p", {}, h("a", { href: "#/" }, "← All connectors")));
}

async function show(prefetched) {
  const r = route();
  if (r.page === "bad") return showBadAddress(r);
  try {
    const data = await (prefetched || load(r));
    lastRead = Date.now();
    showProgress(data);
    if (r.page === "connectors") remember(data);
    if (!data.serving) return main().replaceChildren(h("p", { class: "muted" }, "Waiting for the replay to finish…"));
    if (r.page === "connector") {
      renderConnector(main(), data, session);
    } else {
      leaveConnector();
      renderConnectors(main(), data);
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showSignIn(error.message);
    showFailure(error);
  }
}

function signature(row) {
  return JSON.stringify([row.partitions, row.history_records, row.state, row.claim, row.lag,
    row.last_change && row.last_change.time_ms]);
}

function remember(data) {
  const changed = new Set();
  for (const row of data.connectors || []) {
    const sig = signature(row);
    if (lastSeen.has(row.name) && lastSeen.get(row.name) !== sig) changed.add(row.name);
    lastSeen.set(row.name, sig);
  }
  return changed;
}

function schedulePoll() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(poll, POLL_MS);
}

// A poll the daemon refused (a revoked token, a scope taken away, a 5xx): said where the replay's
// progress and network failures are, until a poll succeeds again (showProgress replaces it).
function showPollFailure(error) {
  // The time of the last read that succeeded: the page is that old, however many retries failed since.
  const shown = new Date(lastRead).toLocaleTimeString();
  const why = error instanceof ApiError
    ? `The daemon refused the refresh (${error.status}: ${error.message}); the page shows what it read at ${shown}.`
    : error instanceof NoAnswer
      ? `${error.message.replace(/\.$/, "")}; the page shows what it read at ${shown}.`
      : `The refresh failed (${error.message}); the page shows what it read at ${shown}.`;
  const signInAgain = error instanceof ApiError && error.status === 401
    ? h("button", { type: "button", class: "secondary", onclick: () => { signOut(); location.reload(); } }, "Sign in again")
    : null;
  document.getElementById("progress").replaceChildren(
    h("p", { class: "error", role: "status", id: "poll-failure" }, why, " Retrying every 2 s. ", signInAgain));
}

async function poll() {
  if (document.visibilityState === "hidden" || document.getElementById("dialog").open) return schedulePoll();
  try {
    const r = route();
    if (r.page === "bad") return schedulePoll();
    const data = await (r.page === "connector" ? loadConnectors(r.name) : loadConnectors());
    lastRead = Date.now();
    showProgress(data);
    // A connector page opened by its address has no row to compare with yet: what changed between
    // its load and this first poll would go unseen, so the first poll reloads it.
    const unseen = r.page === "connector" && !lastSeen.has(r.name);
    const changed = remember(data);
    if (unseen) changed.add(r.name);
    if (!data.serving) {
      // still replaying: the bar moves
    } else if (!main().querySelector("h2")) {
      await show();
    } else if (r.page === "connectors") {
      updateConnectors(data);
    } else if (currentConnector() && changed.has(currentConnector())) {
      await refresh();
    }
  } catch (error) {
    showPollFailure(error);
  }
  schedulePoll();
}

window.addEventListener("hashchange", () => { if (session) show().then(() => main().focus()); });
// The skip link moves the focus to the content; following its href (#main) would change the route.
document.querySelector("a.skip").addEventListener("click", (event) => {
  event.preventDefault();
  main().focus();
});
start();
