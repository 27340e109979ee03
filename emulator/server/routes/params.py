"""Checks on what a request carries besides its JSON: the body's size, the connector name in the path,
times, and the numbers that end up in 64-bit fields.

Each turns hostile or mistaken input into a 400 (413 for a body too large) in Connect's error body,
before any service sees it, instead of a 500 from deep inside (``RecursionError``, ``OverflowError``)
or a silent misreading (``%FE`` and ``%FF`` both decoding to U+FFFD, so two names reach one
connector). docs/api.md ("Limits") lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeVar
from urllib.parse import quote, unquote_to_bytes

from fastapi import Request
from starlette.requests import ClientDisconnect

from emulator.codec.jackson_writer import JAVA_LONG_MAX, JAVA_LONG_MIN
from emulator.model.connectors import control_characters
from emulator.model.errors import InvalidRequest, RequestTooLarge
from emulator.service.bulk import in_thread, note_request_bytes

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "check_connector_path",
    "claim_epoch_param",
    "decimal_param",
    "int64_param",
    "parse_body",
    "read_body",
    "refuse_store_on_write",
    "single_param",
    "source_param",
]

T = TypeVar("T")

DEFAULT_MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""``--max-body-bytes``'s default (see ``emulator.server.settings``): room for the longest string value
Connect's reader accepts (20,000,000 characters) in a PATCH body, or base64-encoded (26.7 MB) in a
``POST /offsets/records`` body, while one request's memory stays bounded."""


def max_body_bytes(request: Request) -> int:
    limit: int = getattr(request.app.state, "max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    return limit


def _too_large(limit: int, size: str) -> RequestTooLarge:
    return RequestTooLarge(
        f"Request body of {size} exceeds this daemon's limit of {limit} bytes (--max-body-bytes); send a large "
        "import in several requests (by connector, a large connector's records in parts: `connect-offsets import` "
        "does so itself), import directly into the log (kafka://, embedded:), or start the daemon with a larger "
        "--max-body-bytes"
    )


async def read_body(request: Request) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed the limit: from its declared
    ``Content-Length`` before reading anything, or while streaming (chunked bodies), so a huge body
    is never held in memory. Read once per request: the records policy (``auth/policy.py``) reads
    it before the route does."""
    already: bytes | None = getattr(request.state, "body", None)
    if already is not None:
        note_request_bytes(len(already))  # this request's context (the policy's may be another)
        return already
    limit = max_body_bytes(request)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, f"{int(declared)} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit, f"more than {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise client_gone() from None
    body = request.state.body = b"".join(chunks)
    note_request_bytes(len(body))  # a big body's passes leave the event loop (``service/bulk.py``)
    return body


def client_gone() -> InvalidRequest:
    """The client closed the connection (or ``--header-timeout`` cut off a body that stopped
    arriving) before the whole body came: nobody reads this answer, but the access log and the audit
    line say what happened, as a client's mistake instead of an unexpected error's traceback."""
    return InvalidRequest("The connection closed before the whole request body arrived; nothing was written")


_INLINE_PARSE_BYTES: Final = 64 * 1024


async def parse_body(parse: Callable[[bytes], T], raw: bytes, stop_at: float | None = None) -> T:
    """``parse(raw)``, in a worker thread when the body is large: parsing and checking 32 MiB of
    JSON takes long enough to stall every other request on the event loop. ``stop_at``: the loops of
    ``parse`` that go through ``bulk.abandonable`` stop there (``bulk.PassAbandoned``)."""
    if len(raw) <= _INLINE_PARSE_BYTES:
        return parse(raw)
    return await in_thread(lambda: parse(raw), stop_at)


def int64_param(name: str, value: int | None) -> int | None:
    """A query parameter stored as a Java ``long`` (claim epochs, commit sequences): 400 beyond it."""
    if value is not None and not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        raise InvalidRequest(
            f"query parameter '{name}' is out of range: {value} is not a 64-bit integer "
            f"({JAVA_LONG_MIN}..{JAVA_LONG_MAX})"
        )
    return value


_DECIMAL = re.compile(r"-?[0-9]+")
_DIGITS = re.compile(r"[0-9]+")


def single_param(request: Request, name: str, *, allow_empty: bool = True) -> str | None:
    """The one value of one of our own write parameters (``claim_epoch``, ``sequence_source``,
    ``sequence``), ``None`` when absent; 400 when it is repeated (``sequence=5&sequence=1``: which one
    the writer meant is not ours to guess, and FastAPI would silently take the last) or, unless
    ``allow_empty``, empty. Connect's own parameters keep FastAPI's reading."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        shown = ", ".join(repr(v[:60]) for v in values[:5])
        raise InvalidRequest(f"Query parameter '{name}' is given {len(values)} times ({shown}); give it once")
    if not values:
        return None
    if not allow_empty and values[0] == "":
        raise InvalidRequest(f"Query parameter '{name}' must not be empty")
    return values[0]


def source_param(request: Request, name: str) -> str | None:
    """A name parameter of ours (``sequence_source``), given once, not empty, valid UTF-8 once
    percent-decoded and free of control characters: decoded leniently, ``%FE`` and ``%FF`` both read
    as U+FFFD, and two writers' sources were one (API fuzz QA)."""
    value = single_param(request, name, allow_empty=False)
    if value is None:
        return None
    raw_query = request.scope.get("query_string", b"")
    for key, raw in (pair.partition(b"=")[::2] for pair in raw_query.split(b"&")):
        if unquote_to_bytes(key.replace(b"+", b" ")) != name.encode():
            continue
        try:
            unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"Query parameter '{name}' is not valid UTF-8 once percent-decoded") from None
    if control_characters(value):
        raise InvalidRequest(f"Query parameter '{name}' may not contain control characters")
    return value


def decimal_param(request: Request, name: str, *, minimum: int | None = None, why: str = "") -> int | None:
    """One of our own integer write parameters, strictly: plain ASCII decimal digits, with a leading
    '-' only when ``minimum`` allows negative values; no '+', spaces, '_', exponent or hex (lax int
    parsing read ``%2B5`` and ``%205`` as 5); at least ``minimum``; a Java ``long``. Given once."""
    raw = single_param(request, name)
    if raw is None:
        return None
    negative = minimum is None or minimum < 0
    if not (_DECIMAL if negative else _DIGITS).fullmatch(raw):
        form = "an integer in plain decimal digits" + (" with an optional leading '-'" if negative else "")
        shown = repr(raw) if len(raw) <= 60 else f"{raw[:60]!r}… ({len(raw)} characters)"
        raise InvalidRequest(f"Query parameter '{name}' must be {form}{why}, got {shown}")
    value = int64_param(name, int(raw))
    assert value is not None
    if minimum is not None and value < minimum:
        raise InvalidRequest(f"Query parameter '{name}' must be at least {minimum}{why}, got '{raw}'")
    return value


def refuse_store_on_write(request: Request, write: str) -> None:
    """400 for ``store`` on a write. It picks which store a *read* shows (GET, history, ``GET
    /offsets/records``); a write goes where Connect writes it, to both stores of a connector with its own
    offsets topic. Ignored like any unknown parameter, ``DELETE ?store=connector`` looked like a reset
    of one store and reset both (cluster QA)."""
    if "store" in request.query_params:
        raise InvalidRequest(
            f"Query parameter 'store' picks what a read shows; {write} writes where Connect writes it (a connector "
            "with its own offsets topic: both stores, in KAFKA-15018's order), so no store can be picked. Leave it out"
        )


def claim_epoch_param(request: Request, name: str = "claim_epoch") -> int | None:
    """A claim's epoch (a write's ``claim_epoch``, a release's ``epoch``), strictly (``decimal_param``):
    claims are numbered from 1, so 0 or a negative epoch was never issued and is a malformed request,
    not a fenced writer."""
    return decimal_param(request, name, minimum=1, why=" (a claim's epoch: claims are numbered from 1)")


def connector_name_problem(raw_segment: bytes) -> str | None:
    """Why a percent-encoded ``{connector}`` path segment names no connector, or ``None``.

    - an encoded ``/`` (``%2F``): the router has already split the path there, so the request would
      reach another route or connector (``/connectors/a%2Foffsets/history`` is the history of
      ``a``). Connect allows ``/`` in names (its name validator forbids only control characters) but
      its REST server, Jetty 12, refuses ``%2F`` in a path as an ambiguous separator, so such a
      connector cannot be addressed through Connect's API either; we refuse it the same way.
    - bytes that are not UTF-8 once percent-decoded: decoding them with replacement would make ``%FE``
      and ``%FF`` the same name (U+FFFD).
    - ISO control characters: Connect's ``ConnectorConfig`` refuses such names
      (``ConfigDef.NonEmptyStringWithoutControlChars``), so no Connect connector has one.
    """
    if b"%2f" in raw_segment.lower():
        return (
            "A connector name in a URL path cannot contain an encoded '/' (%2F): the path would be ambiguous, "
            "and Connect's REST server refuses such paths too"
        )
    try:
        name = unquote_to_bytes(raw_segment).decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"The connector name in the URL is not valid UTF-8 once percent-decoded "
            f"({raw_segment[:200].decode('ascii', 'backslashreplace')}: {exc.reason} at byte {exc.start}); "
            "percent-encode the name's UTF-8 bytes"
        )
    controls = [str(code) for code in control_characters(name)]
    if controls:
        shown = name.encode("unicode_escape").decode("ascii")
        # Connect's ConfigException text for its name validator.
        return (
            f"Invalid value {shown} for configuration name: String may not contain control sequences but had "
            f"the following ASCII chars: {', '.join(controls)}"
        )
    return None


def _connector_segment(raw_path: bytes) -> bytes | None:
    """The raw segment after ``connectors``, however that word is spelled (``%63onnectors`` decodes to
    it too: matched literally, such a path skipped every check of the name)."""
    parts = raw_path.split(b"/")
    for at, part in enumerate(parts[:-1]):
        if part == b"connectors" or (b"%" in part and unquote_to_bytes(part) == b"connectors"):
            return parts[at + 1]
    return None


def _slash_outside_a_name(raw_path: bytes, segment: bytes | None) -> bool:
    """An encoded ``/`` in a segment other than the connector's: once decoded the path has segments
    the client did not send (``/connectors%2Fc%2Foffsets`` is routed as ``/connectors/c/offsets``)."""
    if b"%2f" not in raw_path.lower():
        return False
    return segment is None or raw_path.lower().count(b"%2f") > segment.lower().count(b"%2f")


EMPTY_NAME_PROBLEM = (
    'The connector name in the URL is empty (/connectors//…): a path cannot name a connector called "", '
    "in Connect's REST API either (and Connect refuses to create one: 'String may not be empty'). Records "
    "with such a key are listed by GET /connectors; GET /offsets/records shows them, and POST /offsets/records "
    "writes them"
)


def unrouted_connector_problem(request: Request) -> str | None:
    """For a request no route matched: why, if its ``{connector}`` segment holds an encoded ``/`` or is
    empty (a connector named ``""``, which GET /connectors lists when the log holds such keys).

    Such a path has one segment more once decoded, or an empty one no route matches; the answer
    should say why rather than "Not Found"."""
    raw_path = request.scope.get("raw_path")
    segment = _connector_segment(raw_path) if isinstance(raw_path, bytes) else None
    if segment == b"" and isinstance(raw_path, bytes) and not raw_path.rstrip(b"/").endswith(b"/connectors"):
        return EMPTY_NAME_PROBLEM
    if segment is None or b"%2f" not in segment.lower():
        return None
    return connector_name_problem(segment)


async def check_connector_path(request: Request) -> None:
    """Router dependency: a route with a ``{connector}`` segment gets a name Connect could have.

    Judged on the raw path (``scope["raw_path"]``): the decoded one has already lost what matters.
    """
    if "connector" not in request.path_params:
        return
    raw_path = request.scope.get("raw_path")
    segment = _connector_segment(raw_path) if isinstance(raw_path, bytes) else None
    if isinstance(raw_path, bytes) and _slash_outside_a_name(raw_path, segment):
        raise InvalidRequest(
            "The request path holds an encoded '/' (%2F) outside a connector name; send the path's own '/' as they are"
        )
    if segment is None:  # no raw path (an ASGI server that does not send one): judge the decoded name
        segment = quote(str(request.path_params["connector"]), safe="", errors="surrogateescape").encode("ascii")
    problem = connector_name_problem(segment)
    if problem is not None:
        raise InvalidRequest(problem)
