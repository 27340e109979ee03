"""Keeps a user's browser from being used against the daemon (CSRF), for every route, console or not.

A browser attaches credentials it remembers (a Basic login it was prompted for) to requests that
*other* web pages make it send. Four layers stop such a request from changing anything:

1. **The Host check** (``auth.guards.HostGuard``, ``--allowed-hosts``): no DNS rebinding.
2. **JSON writes** (``auth.guards.Guard``): POST, PUT and PATCH need ``Content-Type:
   application/json``, which an HTML form cannot send and which makes a cross-origin ``fetch``
   ask first (a CORS preflight the daemon answers only for ``--cors-origins``).
3. **Same origin** (here): a write a browser marks as coming from a page (``Origin``, ``Sec-Fetch-*``
   headers, which pages cannot forge) must come from the daemon's own origin or a ``--cors-origins``
   origin, and never be a form submission or navigation.
4. **A header no form can send** (here): a browser write must carry ``X-Connect-Offsets-Console``,
   which the console sends on every call; a cross-origin page can only add it after a preflight the
   daemon refuses. Programs (the CLI, the clients, curl) send no ``Origin`` and are not affected.

And the console never creates remembered credentials: answers to its requests (they carry the
header) lose their ``WWW-Authenticate`` challenges, so the browser never pops up its own login
dialog nor caches what is typed there; the console's sign-in form keeps credentials in the tab's
``sessionStorage`` and sends them explicitly on each call.

One more thing for the console's requests only: the connectors named ``.`` and ``..``. A program
sends them as ``%2E`` and ``%2E%2E``, but a browser's URL parser collapses those spellings too (the
URL standard treats ``%2e`` as a dot segment) before the request leaves, so the console spells the
name's segment ``%00%2E`` / ``%00%2E%2E`` (no connector name holds a NUL: Connect refuses control
characters), and this guard turns it back into ``%2E`` / ``%2E%2E`` before anything else reads the
path. The path keeps its shape (same segments, same route), so no rule judged on it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emulator.model.errors import CrossOriginWrite
from emulator.server.auth.guards import refuse_before_routing

CONSOLE_HEADER = "X-Connect-Offsets-Console"
_CONSOLE_KEY = CONSOLE_HEADER.lower().encode()
_DOT_SEGMENTS = {b"%00%2E": b"%2E", b"%00%2E%2E": b"%2E%2E"}
"""The console's spellings of the ``{connector}`` segment of ``.`` and ``..`` (``static/api.js``, ``enc``)."""
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PAGE_DESTINATIONS = frozenset({"document", "iframe", "frame", "embed", "object"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _headers(scope: Scope) -> dict[bytes, str]:
    return {bytes(k).lower(): bytes(v).decode("latin-1") for k, v in scope.get("headers", ())}


def _netloc(scheme: str, host: str) -> str:
    """``host:port`` in lower case with the scheme's default port spelled out, so that
    ``https://h`` and ``Host: h:443`` compare equal."""
    parts = urlsplit(f"{scheme}://{host}")
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        return host.lower()
    return f"{(parts.hostname or '').lower()}:{port}"


def undotted(scope: Scope) -> Scope:
    """The scope with the console's spelling of a ``.`` or ``..`` connector segment (the one after
    ``connectors``) turned into the percent-encoded one; the same scope when there is none."""
    raw_path = scope.get("raw_path")
    if not isinstance(raw_path, bytes) or b"%00%2" not in raw_path.upper():
        return scope
    parts = raw_path.split(b"/")
    try:
        at = parts.index(b"connectors") + 1
    except ValueError:
        return scope
    if at >= len(parts) or parts[at].upper() not in _DOT_SEGMENTS:
        return scope
    path = scope["path"].split("/")
    dotted = unquote(_DOT_SEGMENTS[parts[at].upper()].decode("ascii"))
    try:
        at_path = path.index("connectors") + 1
    except ValueError:
        return scope
    if at_path >= len(path) or path[at_path] != "\x00" + dotted:
        return scope
    parts[at] = _DOT_SEGMENTS[parts[at].upper()]
    path[at_path] = dotted
    return {**scope, "raw_path": b"/".join(parts), "path": "/".join(path)}


def refusal(method: str, headers: Mapping[bytes, str], allowed_origins: Sequence[str]) -> str | None:
    """Why this request may not write, or None. Only browsers send the headers judged here."""
    if method not in WRITES:
        return None
    origin = headers.get(b"origin")
    site = headers.get(b"sec-fetch-site")
    mode = headers.get(b"sec-fetch-mode")
    if origin is None and site is None and mode is None:
        return None  # not a browser: programs do not send these, and pages cannot remove them
    if mode == "navigate" or headers.get(b"sec-fetch-dest") in _PAGE_DESTINATIONS:
        return "a form submission or a navigation never writes"
    if origin is not None and origin in allowed_origins:
        return None  # a UI of its own, allowed with --cors-origins (its requests passed a preflight)
    if origin is not None:
        scheme = urlsplit(origin).scheme
        own = _netloc(scheme, headers.get(b"host", ""))
        if origin == "null" or scheme not in _DEFAULT_PORTS or _netloc(scheme, urlsplit(origin).netloc) != own:
            return f"a page of another origin ({origin[:100]}) may not write here (see --cors-origins)"
    elif site not in (None, "same-origin", "none"):
        return f"a {site} page may not write here"
    if _CONSOLE_KEY not in headers:
        return f"a write from a browser must carry the {CONSOLE_HEADER} header (the console sends it)"
    return None


class ConsoleGuard:
    """The same-origin and header rules (3 and 4 above), and no login challenges for the console."""

    def __init__(self, app: ASGIApp, allowed_origins: Sequence[str] = ()) -> None:
        self.app = app
        self.allowed = tuple(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)  # once: this runs before every request
        why = refusal(scope["method"], headers, self.allowed)
        if why is not None:
            # the route named first: the access log, the metrics and the audit line say what was refused
            await refuse_before_routing(CrossOriginWrite(f"Refused: {why}"), scope, receive, send)
            return
        if _CONSOLE_KEY not in headers:
            await self.app(scope, receive, send)
            return
        scope = undotted(scope)

        async def without_challenges(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"www-authenticate"]
            await send(message)

        await self.app(scope, receive, without_challenges)
