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

// Integers beyond 2^53 (LSNs, 64-bit positions) stay exact: parsed as BigInt, written back as digits.
export function parseJson(text) {
  // A reviver costs a call per value (on 10,000 partitions, every cell): only when a long integer is there.
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  return JSON.parse(text, (key, value, context) => {
    if (typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)) {
      return BigInt(context.source);
    }
    return value;
  });
}

// JSON text of a value whose integers may be BigInts (parseJson's), every digit kept. JSON.rawJSON
// where the browser has it (the same proposal as the reviver's context.source); else a marker the
// replacer leaves (NUL, "big", its number, NUL), which JSON.stringify writes as the escaped text
// "\u0000big0\u0000": that text is what is replaced by the digits.
const RAW_JSON = typeof JSON.rawJSON === "function";

export function jsonText(value, indent) {
  const marks = [];
  const text = JSON.stringify(value, (key, v) => {
    if (typeof v !== "bigint") return v;
    if (RAW_JSON) return JSON.rawJSON(v.toString());
    marks.push(v.toString());
    return `\u0000big${marks.length - 1}\u0000`;
  }, indent);
  if (text === undefined) return "undefined";
  return marks.length ? text.replace(/"\\u0000big(\d+)\\u0000"/g, (m, i) => marks[Number(i)]) : text;
}

export function base(path) {
  // The page is <root>/ui; the API lives under the same root (a reverse proxy's prefix included).
  const root = location.pathname.replace(/\/ui\/?$/, "/");
  return location.origin + root + path.replace(/^\//, "");
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
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : jsonText(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
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
export function enc(name) {
  if (name === "." || name === "..") return `%00${name.replaceAll(".", "%2E")}`;
  return encodeURIComponent(name);
}
