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

export function jsonText(value, indent) {
  const marks = [];
  const text = JSON.stringify(value, (key, v) => {
    if (typeof v === "bigint") {
      marks.push(v.toString());
      return `\u0000big${marks.length - 1}\u0000`;
    }
    return v;
  }, indent);
  return text === undefined ? "undefined" : text.replace(/"\u0000big(\d+)\u0000"/g, (m, i) => marks[Number(i)]);
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

export const enc = encodeURIComponent;
