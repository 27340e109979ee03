// Talking to the daemon: credentials, the console header, errors, and JSON that keeps big integers.
//
// Credentials are typed into the console's sign-in form and kept in this tab's sessionStorage; every
// call sends them explicitly (never cookies, never the browser's remembered Basic login), together
// with the X-Connect-Offsets-Console header the daemon requires on writes from a browser
// (docs/console.md, "CSRF").

const CREDENTIALS = "connect-offsets.authorization";
export const CONSOLE_HEADER = "X-Connect-Offsets-Console";

export function signIn(kind, first, second) {
  const value = kind === "token" ? `Bearer ${first}` : `Basic ${utf8Base64(`${first}:${second}`)}`;
  sessionStorage.setItem(CREDENTIALS, value);
}

export function signOut() {
  sessionStorage.removeItem(CREDENTIALS);
}

export function signedIn() {
  return sessionStorage.getItem(CREDENTIALS) !== null;
}

function utf8Base64(text) {
  return btoa(String.fromCharCode(...new TextEncoder().encode(text)));
}

export class ApiError extends Error {
  constructor(status, message, kind, body) {
    super(message);
    this.status = status;
    this.kind = kind; // the daemon's X-Connect-Offsets-Error header: not_stopped, claim_held, …
    this.body = body;
  }
}

// A JSON number written as a floating-point one (2.0, -0.0, 1e+20, 1e16) whose value is an integer:
// JSON.parse would make it the integer 2, shown and written back as 2, and the daemon (and Java)
// would then read a long where a double was. It is kept with its text, which jsonText writes back
// verbatim; valueOf gives its number to arithmetic and to the chart.
export class JsonDouble {
  constructor(text) {
    this.text = text;
    this.value = Number(text);
  }

  valueOf() {
    return this.value;
  }

  toString() {
    return this.text;
  }
}

// A number of the parsed JSON as a plain number (a JsonDouble's value; anything else as it is).
export function plain(value) {
  return value instanceof JsonDouble ? value.value : value;
}

// Integers beyond 2^53 (LSNs, 64-bit positions) stay exact: parsed as BigInt, written back as digits.
// Doubles with an integer value stay doubles: JsonDouble (above).
export function parseJson(text) {
  // A reviver costs a call per value (on 10,000 partitions, every cell): only when the text may hold
  // a long integer (16 digits in a row) or a double with an integer value (a ".0…" fraction, an
  // exponent; a string holding such text only costs the reviver, it changes nothing).
  if (!/\d{16}|\d\.0+(?![0-9])|\d[eE]/.test(text)) return JSON.parse(text);
  return JSON.parse(text, (key, value, context) => {
    if (typeof value !== "number" || !context) return value;
    const integerLiteral = /^-?\d+$/.test(context.source);
    if (!Number.isSafeInteger(value) && integerLiteral) return BigInt(context.source);
    if (Number.isInteger(value) && !integerLiteral) return new JsonDouble(context.source);
    return value;
  });
}

// JSON text of a value whose numbers may be BigInts or JsonDoubles (parseJson's), each written as
// its digits / its text. JSON.rawJSON where the browser has it (the same proposal as the reviver's
// context.source); else a marker the replacer leaves (NUL, "raw", its number, NUL), which
// JSON.stringify writes as the escaped text "\u0000raw0\u0000": that text is what is replaced.
const RAW_JSON = typeof JSON.rawJSON === "function";

export function jsonText(value, indent) {
  const marks = [];
  const text = JSON.stringify(value, (key, v) => {
    const raw = typeof v === "bigint" ? v.toString() : v instanceof JsonDouble ? v.text : null;
    if (raw === null) return v;
    if (RAW_JSON) return JSON.rawJSON(raw);
    marks.push(raw);
    return `\u0000raw${marks.length - 1}\u0000`;
  }, indent);
  if (text === undefined) return "undefined";
  return marks.length ? text.replace(/"\\u0000raw(\d+)\\u0000"/g, (m, i) => marks[Number(i)]) : text;
}

export function base(path) {
  // The page is <root>/ui; the API lives under the same root (a reverse proxy's prefix included).
  const root = location.pathname.replace(/\/ui\/?$/, "/");
  return location.origin + root + path.replace(/^\//, "");
}

// No answer at all: the daemon could not be reached, or the connection broke before its answer came
// (fetch's bare "Failed to fetch"). For a write that is not "nothing happened": the request may have
// reached the daemon and been applied, so `write` says whether a change was asked for.
export class NoAnswer extends Error {
  constructor(write, cause) {
    super(write
      ? `The daemon's answer was lost, or the daemon could not be reached (${cause}): the change may or may not have been applied.`
      : `The daemon could not be reached (${cause}).`);
    this.kind = write ? "answer_lost" : "unreachable";
    this.write = write;
  }
}

export async function call(method, path, { body, query } = {}) {
  const url = new URL(base(path));
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
  }
  const headers = { [CONSOLE_HEADER]: "1", Accept: "application/json" };
  const authorization = sessionStorage.getItem(CREDENTIALS);
  if (authorization) headers.Authorization = authorization;
  if (method !== "GET") headers["Content-Type"] = "application/json";
  let response, text;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === "string" ? body : jsonText(body),
      credentials: "omit",
      cache: "no-store",
    });
    text = await response.text();
  } catch (problem) {
    // A dry run changes nothing, whatever became of it.
    throw new NoAnswer(method !== "GET" && !(query && query.dry_run), problem.message);
  }
  let parsed = null;
  try {
    parsed = text ? parseJson(text) : null;
  } catch {
    parsed = { message: text };
  }
  if (!response.ok) {
    const message = (parsed && parsed.message) || `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message, response.headers.get("X-Connect-Offsets-Error"), parsed);
  }
  return parsed;
}

// A connector name as one path segment of a request URL. "." and ".." are valid names, but a URL
// reads them as "this" and "the parent" directory, and a browser's URL parser also collapses their
// percent-encoded spellings (%2E, %2E%2E) before the request leaves: the console spells them
// %00%2E and %00%2E%2E (a NUL is in no connector's name), which the daemon turns back into %2E and
// %2E%2E for requests carrying the console header (emulator/server/ui/csrf.py, ConsoleGuard).
// A name holding half a surrogate pair (Connect's data may) is no UTF-8, so no URL carries it and
// encodeURIComponent throws: the list stopped rendering at it, and with it the whole page. Such a
// name is spelt with U+FFFD instead; the daemon cannot address it by path either (400).
export function enc(name) {
  if (name === "." || name === "..") return `%00${name.replaceAll(".", "%2E")}`;
  return encodeURIComponent(name.isWellFormed() ? name : name.toWellFormed());
}
