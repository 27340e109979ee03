"""Clients for the daemon's routes, synchronous and asyncio, with typed errors.

Both clients build requests from the same route table (``_Routes``) so they cannot drift; the
CLI is built on the synchronous one so that anything an operator can do from the shell, a
script can do with the same semantics and error texts. Errors are typed from the daemon's kind
header, never from the message text (``emulator.client.errors``).

Retries (``retry_for_s``: 30 s unless ``emulator.client.retry_window`` says otherwise; 0 turns them
off): a 503 the daemon answered because the log did not answer in time, or is not read yet, is sent
again after its ``Retry-After``, but only where sending it again cannot apply anything twice:
- ``log_timeout`` (nothing was written, or a fresh read did not get to the end),
  ``log_storage_refused`` (the embedded log's disk refused the write: nothing was written) and
  ``too_many_connections`` (the daemon closed the connection before reading the request), ``busy``
  (a large body that waited in vain for its turn: nothing was read),
  ``history_behind`` (a rollback refused until the archive holds this daemon's writes), and
  ``not_ready`` when it carries ``Retry-After`` (the daemon is reading its log to its end, or opening
  it; a ``not_ready`` without one, a log that cannot be read, is not retried): any request;
- ``write_partly_applied`` with 503 (a write of several chunks that the log timed out on or refused
  after some were written: those are in effect, the rest was not and will not be written): any
  request too, since sending it again is how the rest gets written (it writes what it meant to write,
  not more: absolute values, an import only what differs); these were ``log_timeout`` and
  ``log_storage_refused`` before, and retried as such;
- ``write_outcome_unknown`` (the write may still land): only reads and a PATCH carrying a commit
  sequence, which the daemon applies at most once; its answer then lists the partition under
  ``dropped`` ("N was already applied") if the first attempt landed. A DELETE, an import or an
  unsequenced PATCH is not retried: the caller gets ``NotReadyError`` with that ``kind`` and decides.

A connection that drops or times out after a request went out is ``DaemonUnavailable`` for a read or a
dry run (nothing changed) and ``AnswerLost`` for anything else: it may have been applied, and is never
sent again by the client.

A call that starts waiting logs one warning (logger ``emulator.client.http``) saying why and for how
long. ``ready()`` asks ``/readyz``, which reports and never asks the client to wait.

Ctrl-C: in the main thread, the synchronous client sends each request from a thread of its own and
waits for it in steps (``_Interruptible``), so that a Ctrl-C is acted on within ``CTRL_C_CHECK_S``
whatever the request is doing; a request its caller was interrupted in sends nothing more.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import logging
import math
import os
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from emulator.client.credentials import Credentials, default_credentials, redact
from emulator.client.defaults import DEFAULT_URL as DEFAULT_URL  # re-exported: its home until it moved
from emulator.client.errors import (
    OUTCOME_UNKNOWN,
    AnswerLost,
    ClientConfigError,
    DaemonUnavailable,
    NotFoundError,
    NotReadyError,
    UnaddressableConnector,
    error_from_response,
)
from emulator.client.retry_window import chosen_retry_for_s, default_retry_for_s, default_timeout_s, describe_window
from emulator.codec.surrogates import json_utf8
from emulator.model.errors import ERROR_HEADER

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    params: Mapping[str, str | list[str]] = field(default_factory=dict)
    json: Any = None
    unwrap: str | None = None
    replayable: bool = False
    """Sending it again cannot apply anything twice (a read, or a PATCH with a commit sequence)."""
    reports: bool = False
    """``/readyz`` and ``/status``: a ``not_ready`` is their answer, never a reason to wait (a daemon of
    an earlier version sent ``Retry-After`` with them while its storage opened)."""
    with_headers: bool = False
    """The result is ``(body, headers)``: for answers that say something beside Connect's body (the
    history's warning on ``GET …/offsets?as_of=``)."""

    @property
    def may_change(self) -> bool:
        """Whether the daemon may change something for it: any method but a read's, unless a dry run."""
        return self.method not in _READ_METHODS and self.params.get("dry_run") != "true"


_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


REFUSED_WAIT_S = 0.25
"""The pause before connecting again to a port nobody listens on (a restart takes about a second)."""
MIN_RETRY_WAIT_S = 0.1
"""The shortest pause between two tries, whatever ``Retry-After`` says (0 from a proxy would otherwise
send the request again and again, as fast as the daemon answers, for ``retry_for_s``)."""
_NOTHING_DONE = frozenset({"log_timeout", "log_storage_refused", "too_many_connections", "busy", "history_behind"})
_PARTLY_APPLIED = "write_partly_applied"
"""Only with 503 (``_retriable`` asks that first): the log's timeout or disk stopped it, which passes; a
claim's refusal (409, 400) does not."""
_NOT_READY = "not_ready"


def _retriable(request: _Request, response: httpx.Response) -> bool:
    """Whether sending ``request`` again cannot apply anything twice and may get another answer."""
    if response.status_code != 503:
        return False
    kind = response.headers.get(ERROR_HEADER)
    if kind == _NOT_READY:  # only while it passes by itself: the daemon then says when to ask again
        return not request.reports and "Retry-After" in response.headers
    return kind in _NOTHING_DONE or kind == _PARTLY_APPLIED or (kind == OUTCOME_UNKNOWN and request.replayable)


class _Retries:
    """One call's retries: its deadline, and one warning when it starts waiting (a CLI command that
    waits in silence looks hung; a library's caller sees why its call is slow in its log)."""

    def __init__(self, url: str, retry_for_s: float, refused_for_s: float) -> None:
        self._url = url
        self._retry_for_s = retry_for_s
        self._started = time.monotonic()
        self._give_up_at = self._started + retry_for_s
        self._refused_for_s = refused_for_s
        self._warned = False

    def refused_wait_s(self, request: _Request, exc: httpx.TransportError) -> float | None:
        """Seconds to wait before connecting again after ``exc``, or None. Only a refused connection
        is asked again (the request never reached anyone, so any request may be sent again), only
        within a window the caller chose (``emulator.client.retry_window``), and never for
        ``/readyz`` or ``/status``."""
        if request.reports or not _refused(exc):
            return None  # a probe's answer is that nothing listens
        if time.monotonic() + REFUSED_WAIT_S >= self._started + self._refused_for_s:
            return None
        if not self._warned:
            self._warned = True
            log.warning(
                "nothing listens at %s yet (%s %s: connection refused; a daemon restarting?); asking again "
                "every %g s %s",
                self._url,
                request.method,
                request.path,
                REFUSED_WAIT_S,
                describe_window(self._refused_for_s),
            )
        return REFUSED_WAIT_S

    def wait_s(self, request: _Request, response: httpx.Response) -> float | None:
        """Seconds to wait before sending ``request`` again, or None: not retriable, or out of time."""
        if not _retriable(request, response):
            return None
        wait = _retry_after_s(response)
        if time.monotonic() + wait >= self._give_up_at:
            return None
        if not self._warned:
            self._warned = True
            error = error_from_response(response)
            log.warning(
                "the connect-offsets daemon at %s cannot answer %s %s now (%s: %s); asking again every %g s %s",
                self._url,
                request.method,
                request.path,
                error.kind,
                error.message,
                wait,
                describe_window(self._retry_for_s),
            )
        return wait


DEFAULT_RETRY_WAIT_S = 1.0
"""The pause when ``Retry-After`` is missing or says no number of seconds the client can wait."""


def _retry_after_s(response: httpx.Response) -> float:
    """``Retry-After`` in seconds, at least ``MIN_RETRY_WAIT_S``; ``DEFAULT_RETRY_WAIT_S`` for one that is
    missing, an HTTP date (a proxy's) or nonsense, ``nan`` and ``inf`` included: ``float`` reads those,
    and a NaN wait is never past the window's end and never sleeps (the client asked again without pause
    and without end, ``retry_for_s`` notwithstanding)."""
    try:
        wait = float(response.headers.get("Retry-After", DEFAULT_RETRY_WAIT_S))
    except ValueError:
        return DEFAULT_RETRY_WAIT_S
    return max(wait, MIN_RETRY_WAIT_S) if math.isfinite(wait) else DEFAULT_RETRY_WAIT_S


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or while handling, groups included (asyncio's transport
    raises "All connection attempts failed" from the refusal of each address it tried)."""
    found: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        stack += [current.__cause__, current.__context__]
        if isinstance(current, BaseExceptionGroup):
            stack += current.exceptions
    return found


def _refused(exc: httpx.TransportError) -> bool:
    """Whether nothing listens where ``exc`` tried to connect: a ``ConnectionRefusedError`` behind a
    connect error, whatever the transport's own text says ("[Errno 111] Connection refused" from the
    synchronous one, "All connection attempts failed" from asyncio's)."""
    return isinstance(exc, httpx.ConnectError) and any(
        isinstance(cause, ConnectionRefusedError) for cause in _causes(exc)
    )


def _result(request: _Request, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise error_from_response(response)
    try:
        body = response.json()
    except ValueError:
        body = None
    value = body[request.unwrap] if request.unwrap else body
    return (value, response.headers) if request.with_headers else value


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _headers(request: _Request) -> dict[str, str] | None:
    """Writes always say ``application/json``, even without a body: the daemon refuses any other
    (or none), so that a web page cannot write through a user's browser."""
    if request.method in _BODY_METHODS or request.json is not None:
        return {"Content-Type": "application/json"}
    return None


def _body(request: _Request) -> bytes | None:
    """The JSON body as httpx would encode it, except that half a surrogate pair (Connect's data may
    hold one: ``emulator.codec.surrogates``) is sent as its escape instead of failing to encode."""
    if request.json is None:
        return None
    return json_utf8(json.dumps(request.json, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


def _checked_settings(url: str, timeout_s: float, retry_for_s: float | None) -> str:
    """``url`` without its trailing slash, once the constructor's values are known to be usable; else
    ``ClientConfigError``, at once: found at the first request instead, they were reported as
    ``DaemonUnavailable`` (which says asking again is safe), or retried without pause or end (NaN)."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in ("http", "https"):
        raise ClientConfigError(
            f"the daemon's URL must start with http:// or https://, got {redact(url)!r} (e.g. {DEFAULT_URL})"
        )
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s < math.inf:
        raise ClientConfigError(f"timeout_s must be a finite number of seconds above 0, got {timeout_s!r}")
    if retry_for_s is not None and (
        isinstance(retry_for_s, bool)
        or not isinstance(retry_for_s, int | float)
        or math.isnan(retry_for_s)
        or retry_for_s < 0
    ):
        raise ClientConfigError(
            f"retry_for_s must be a number of seconds of 0 or more (0: ask once; math.inf: no limit), "
            f"got {retry_for_s!r}"
        )
    return url.rstrip("/")


def _http_options(url: str, timeout_s: float, credentials: Credentials) -> dict[str, Any]:
    return {"base_url": url, "timeout": timeout_s, "headers": credentials.headers(), "verify": credentials.verify()}


_SENT = (httpx.ReadError, httpx.WriteError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.RemoteProtocolError)
"""Raised once the connection was made and the request (or part of it) went out: the daemon may have
it. A connect error or timeout, a pool timeout, a request httpx could not form: nothing was sent."""
_NO_BYTES_BACK = "without sending a response"
"""httpx's words for a connection closed after the request with not one byte of an answer."""


def _transport_error(
    url: str, request: _Request, exc: httpx.TransportError, client_cert: bool, timeout_s: float
) -> DaemonUnavailable | AnswerLost:
    """What a transport error means for the caller. ``DaemonUnavailable`` when nothing can have been
    changed (nothing was sent, a read, a dry run, or a TLS layer that refused before the daemon saw the
    request), with the usual cause where the error tells it: TLS failures read as a bare "Server
    disconnected" otherwise, as if the daemon were down. ``AnswerLost`` when a request that may change
    something went out and no answer came back: it may have been applied."""
    text = str(exc) or type(exc).__name__
    if _refused(exc) and "refused" not in text.lower():  # asyncio's transport says only that it failed
        text = f"{text.rstrip('.')}: [Errno {errno.ECONNREFUSED}] {os.strerror(errno.ECONNREFUSED)}"
    tls_refused = any(isinstance(cause, ssl.SSLError) for cause in _causes(exc))
    hint = _hint(url, text, client_cert)
    if isinstance(exc, _SENT) and request.may_change and not tls_refused:
        if isinstance(exc, httpx.TimeoutException):
            what, hint = f"no answer within {timeout_s:g} s", ""
        else:
            what = text.rstrip(".")
        if hint and _NO_BYTES_BACK not in text and "reset" not in text.lower():
            hint = ""  # bytes of an answer came back: no TLS handshake failed
        also = f". Or nothing was applied, if this is the cause: {hint.removeprefix('; ')}" if hint else ""
        return AnswerLost(
            f"the connect-offsets daemon at {url} got {request.method} {request.path}, but its answer was lost "
            f"({what}): the request may have been applied; read the current state (e.g. `connect-offsets get`, "
            f"`claims`) before sending it again{also}",
            request.method,
            request.path,
        )
    if isinstance(exc, httpx.ReadTimeout):
        return DaemonUnavailable(
            f"the connect-offsets daemon at {url} accepted the connection but did not answer {request.method} "
            f"{request.path} within {timeout_s:g} s"
        )
    return DaemonUnavailable(
        f"cannot reach the connect-offsets daemon at {url}: {text.rstrip('.') if hint else text}{hint}"
    )


def _hint(url: str, text: str, client_cert: bool) -> str:
    """The likely cause of a TLS failure, from the error's text ("" when none is likely)."""
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            "; the daemon's certificate is not signed by a CA this client trusts: give the CA that signed it "
            "(--ca, CONNECT_OFFSETS_CA)"
        )
    if any(sign in text.lower() for sign in ("disconnected", "certificate_required", "certificate required", "reset")):
        if url.startswith("https:") and not client_cert:
            return (
                "; a daemon that requires client certificates (--tls-client-ca) ends the connection of a client "
                "without one: give --client-cert (CONNECT_OFFSETS_CLIENT_CERT)"
            )
        if url.startswith("http:") and _NO_BYTES_BACK in text:
            return "; a daemon that serves TLS (--tls-cert) ends plain HTTP connections: use its https:// URL"
    if url.startswith("https:") and "WRONG_VERSION_NUMBER" in text:
        # The reverse of the case above: TLS spoken to a plain-HTTP listener, whose answer is no TLS record.
        return "; the daemon there answers plain HTTP (it was started without --tls-cert): use its http:// URL"
    return ""


def _addressable(connector: str) -> str:
    """``connector``, unless it holds half a surrogate pair (Connect's data may, and ``connectors()``
    lists such names): UTF-8 cannot encode it, so neither can a URL, and the daemon refuses the path
    that would carry it (400, not valid UTF-8). ``UnaddressableConnector`` then, instead of the
    ``UnicodeEncodeError`` that escaped from the URL's encoding."""
    try:
        connector.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UnaddressableConnector(
            f"the connector name {connector!r} holds half a surrogate pair, which no URL can carry (UTF-8 cannot "
            "encode it; the daemon refuses such a path too): read its offsets with records() and write them with "
            "import_records() (GET and POST /offsets/records, unfiltered), whose keys carry the name as Connect "
            "wrote it",
            connector,
        ) from exc
    return connector


def _segment(connector: str) -> str:
    """The name as one path segment. ``.`` and ``..`` are valid connector names that a URL would
    read as "this" and "the parent" directory (httpx drops them): percent-encoded, they stay names."""
    _addressable(connector)
    if connector in (".", ".."):
        return connector.replace(".", "%2E")
    return quote(connector, safe="")


CTRL_C_CHECK_S = 0.2
"""The longest a Ctrl-C waits for the synchronous client to act on it (``_Interruptible``, ``_pause``),
as it does at the CLI's confirmation question (``emulator.cli.common._answer_line``)."""
_ENDING_STEPS = frozenset({"response_closed", "close"})
"""The steps that only tidy up (they also run after a failure): an abandoned request still takes them."""


class _Abandoned(Exception):
    """Raised in a request's thread as its next step starts once its caller was interrupted: it sends,
    and waits for, nothing more."""


class _Interruptible:
    """The requests of one synchronous client, each sent from a thread of its own while the caller
    waits for it in steps of ``CTRL_C_CHECK_S``.

    Ctrl-C during a blocking socket call is lost when its SIGINT lands between Python's last look for
    signals and the call (``poll``, ``recv``, ``connect``, a TLS read), or reaches another thread: the
    handler only flags it, the call is not interrupted, and the command waited up to its ``--timeout``
    (90 s by default; seen under load in tests/integration/test_cli_findings.py). A wait in steps looks
    for signals after each step, whatever the request is doing (resolving the name, connecting,
    sending, waiting for the answer, reading its body), and the caller's ``KeyboardInterrupt`` comes
    from the same call as before, so that what it is taken to mean (the CLI's "may have been applied",
    or "sent no change" at a dry run) is unchanged.

    A request whose caller was interrupted is left to its thread (a daemon thread: it never delays
    the exit), which starts no further step of it (``_Abandoned``, through httpcore's ``trace`` request
    extension, called as each step starts): no connection, no request or body sent, no answer read;
    a step under way (a large body half sent) goes on, within the timeout, until the process ends, as
    a Ctrl-C that landed just before a ``send`` let that ``send`` finish. Its outcome goes nowhere, and
    nothing it raises is printed. The client is closed by the last such thread when closed meanwhile:
    closing a socket that another thread is inside lets its descriptor number be reused under it.
    """

    def __init__(self, http: httpx.Client) -> None:
        self._http = http
        self._lock = threading.Lock()
        self._running = 0
        self._closed = False

    def send(self, method: str, path: str, **options: Any) -> httpx.Response:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            return self._http.request(method, path, **options)
        abandoned = threading.Event()
        done = threading.Event()
        outcome: list[httpx.Response | BaseException] = []

        def trace(event: str, _: dict[str, Any]) -> None:
            step, when = event.split(".")[-2:]  # "http11.send_request_body.started"
            if when == "started" and abandoned.is_set() and step not in _ENDING_STEPS:
                raise _Abandoned(event)

        def run() -> None:
            try:
                with self._lock:  # counted here, not by the caller, which may be interrupted before it starts
                    if self._closed:
                        raise RuntimeError("Cannot send a request, as the client has been closed.")
                    self._running += 1
                try:
                    outcome.append(self._http.request(method, path, extensions={"trace": trace}, **options))
                finally:
                    with contextlib.suppress(Exception):  # closing it (abandoned): nobody is left to tell
                        self._finished()
            except BaseException as exc:  # the caller's to raise; threading's hook would print it
                outcome.append(exc)
            done.set()  # after ``_finished``: a caller that closes the client next closes it itself

        try:
            threading.Thread(target=run, name=f"connect-offsets {method} {path}", daemon=True).start()
            while not done.wait(CTRL_C_CHECK_S):
                pass
        except BaseException:
            abandoned.set()
            raise
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _finished(self) -> None:
        with self._lock:
            self._running -= 1
            close = self._closed and not self._running
        if close:
            self._http.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._running:  # an abandoned request's thread: it closes the client when it ends
                return
        self._http.close()


def _pause(seconds: float) -> None:
    """``time.sleep`` in steps of ``CTRL_C_CHECK_S``: a Ctrl-C that lands just before one long sleep
    would wait for its end (a ``Retry-After`` within a ``--retry-for`` of forever)."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(left, CTRL_C_CHECK_S))


def _connector_path(connector: str) -> str:
    return f"/connectors/{_segment(connector)}/offsets"


def _claim_path(connector: str) -> str:
    return f"/connectors/{_segment(connector)}/claim"


@dataclass(frozen=True, slots=True)
class Auth:
    """What a writer presents (ours): its claim's epoch, and a commit sequence for reordering
    detection (a source descriptor such as a Spark query run id, and a number such as a batch id)."""

    claim_epoch: int | None = None
    sequence_source: str | None = None
    sequence: int | None = None

    def __post_init__(self) -> None:
        """A commit sequence is its source and its number together (docs/claims-and-sequences.md): one
        without the other was dropped from the request, and the write went out unsequenced (the daemon
        answers 400 to either alone)."""
        if (self.sequence_source is None) != (self.sequence is None):
            given, missing = ("sequence", "sequence_source")
            if self.sequence is None:
                given, missing = missing, given
            raise ClientConfigError(
                f"Auth: {given} without {missing}: a commit sequence needs both (e.g. "
                "Auth(sequence_source=query_run_id, sequence=batch_id)), or neither"
            )

    def params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.claim_epoch is not None:
            params["claim_epoch"] = str(self.claim_epoch)
        if self.sequence_source is not None and self.sequence is not None:
            params["sequence_source"] = self.sequence_source
            params["sequence"] = str(self.sequence)
        return params


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def decode_records(body: dict[str, Any]) -> dict[bytes, bytes]:
    """``GET /offsets/records`` as ``{key bytes: value bytes}`` (live entries only)."""
    return {base64.b64decode(r["key"]): base64.b64decode(r["value"]) for r in body["records"] if r["key"] is not None}


def _kind(kind: str | None) -> dict[str, str]:
    """``kind="sink"`` (ours, without a Connect config topic): the consumer group connect-<name>."""
    return {} if kind is None else {"kind": kind}


def _flags(**flags: bool) -> dict[str, str]:
    return {name: "true" for name, on in flags.items() if on}


class _Routes:
    """The route table: one place that knows paths, parameters and response shapes."""

    @staticmethod
    def connectors(fresh: bool = False) -> _Request:
        return _Request("GET", "/connectors", _flags(fresh=fresh), replayable=True)

    @staticmethod
    def offsets(connector: str, kind: str | None, fresh: bool = False) -> _Request:
        params = _kind(kind) | _flags(fresh=fresh)
        return _Request("GET", _connector_path(connector), params, unwrap="offsets", replayable=True)

    @staticmethod
    def alter(
        connector: str, body: dict[str, Any], dry_run: bool, create: bool, auth: Auth | None, kind: str | None
    ) -> _Request:
        params = _flags(dry_run=dry_run, create=create) | (auth.params() if auth else {}) | _kind(kind)
        sequenced = auth is not None and auth.sequence_source is not None and auth.sequence is not None
        return _Request("PATCH", _connector_path(connector), params, body, replayable=sequenced)

    @staticmethod
    def reset(connector: str, dry_run: bool, auth: Auth | None, kind: str | None) -> _Request:
        params = _flags(dry_run=dry_run) | (auth.params() if auth else {}) | _kind(kind)
        return _Request("DELETE", _connector_path(connector), params)

    @staticmethod
    def claim(connector: str, owner: str, force: bool) -> _Request:
        return _Request("POST", _claim_path(connector), json={"owner": owner, "force": force})

    @staticmethod
    def current_claim(connector: str) -> _Request:
        return _Request("GET", _claim_path(connector))

    @staticmethod
    def claims() -> _Request:
        return _Request("GET", "/claims", replayable=True)

    @staticmethod
    def release(connector: str, epoch: int) -> _Request:
        return _Request("DELETE", _claim_path(connector), {"epoch": str(epoch)})

    @staticmethod
    def records(connectors: list[str] | None) -> _Request:
        names = [_addressable(connector) for connector in connectors or []]
        return _Request("GET", "/offsets/records", {"connector": names} if names else {})

    @staticmethod
    def import_records(records: list[tuple[bytes, bytes | None]], dry_run: bool, write_all: bool) -> _Request:
        body = {"records": [{"key": _b64(k), "value": None if v is None else _b64(v)} for k, v in records]}
        return _Request("POST", "/offsets/records", _flags(dry_run=dry_run, write_all=write_all), body)

    @staticmethod
    def status() -> _Request:
        return _Request("GET", "/status", reports=True)

    @staticmethod
    def ready() -> _Request:
        return _Request("GET", "/readyz", reports=True)


class OffsetsClient:
    """Synchronous client. ``alter`` takes Connect's PATCH body ``{"offsets":[…]}``.

    ``credentials`` (token, Basic user, CA, client certificate): left out, the process default
    (``emulator.client.credentials``: the CLI's flags, else ``CONNECT_OFFSETS_*`` variables).
    ``retry_for_s``: how long to keep retrying a request the daemon answered 503 because its log was
    slow or is still being read, where that is safe (see the module's docstring); 0 never retries;
    left out, the process default (``emulator.client.retry_window``: the CLI's ``--retry-for``, else
    ``CONNECT_OFFSETS_RETRY_FOR``, else 30 s). ``timeout_s``: how long to wait for each answer; left
    out, the CLI's ``--timeout``, else ``CONNECT_OFFSETS_TIMEOUT``, else 90 s.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        timeout_s: float | None = None,
        credentials: Credentials | None = None,
        retry_for_s: float | None = None,
    ) -> None:
        chosen = credentials if credentials is not None else default_credentials()
        timeout_s = default_timeout_s() if timeout_s is None else timeout_s
        url = _checked_settings(url, timeout_s, retry_for_s)
        self._http = _Interruptible(httpx.Client(**_http_options(url, timeout_s, chosen)))
        self._client_cert = bool(chosen.client_cert)
        self._timeout_s = timeout_s
        self.url = redact(url)
        self._retry_for_s = default_retry_for_s() if retry_for_s is None else retry_for_s
        self._refused_for_s = (chosen_retry_for_s() or 0.0) if retry_for_s is None else retry_for_s

    def __enter__(self) -> OffsetsClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections. A call made after it raises ``RuntimeError`` (not a ``ClientError``):
        a programming error, not a daemon's."""
        self._http.close()

    def _call(self, request: _Request) -> Any:
        retries = _Retries(self.url, self._retry_for_s, self._refused_for_s)
        while True:
            try:
                response = self._http.send(
                    request.method,
                    request.path,
                    params=request.params,
                    content=_body(request),
                    headers=_headers(request),
                )
            except httpx.TransportError as exc:
                refused = retries.refused_wait_s(request, exc)
                if refused is None:
                    raise _transport_error(self.url, request, exc, self._client_cert, self._timeout_s) from exc
                _pause(refused)
                continue
            wait = retries.wait_s(request, response)
            if wait is None:
                return _result(request, response)
            _pause(wait)

    def request(
        self, method: str, path: str, *, params: Mapping[str, str | list[str]] | None = None, json: Any = None
    ) -> Any:
        """Any route, with this client's error handling (for routes without a method of their own)."""
        return self._call(_Request(method, path, params or {}, json))

    def connectors(self, fresh: bool = False) -> list[str]:
        """``fresh``: as of every write any daemon on the same log acknowledged before the call."""
        result: list[str] = self._call(_Routes.connectors(fresh))
        return result

    def offsets(self, connector: str, kind: str | None = None, fresh: bool = False) -> list[dict[str, Any]]:
        """``fresh``: the daemon reads its log to the end first, so the answer reflects every write
        acknowledged by any daemon on the same log before the call (Connect's read-to-end)."""
        result: list[dict[str, Any]] = self._call(_Routes.offsets(connector, kind, fresh))
        return result

    def alter(
        self,
        connector: str,
        body: dict[str, Any],
        dry_run: bool = False,
        create: bool = False,
        auth: Auth | None = None,
        kind: str | None = None,
    ) -> dict[str, Any]:
        """``PATCH /connectors/{c}/offsets`` with Connect's body ``{"offsets":[{"partition":…,"offset":…}]}``
        (an ``offset`` of None resets that partition); answers Connect's ``{"message":…}``.
        ``dry_run``: nothing is written, the answer lists the records it would write. ``create``
        (ours): write to a connector the log does not know yet (else 404). ``auth``: the claim's epoch
        (``Auth(claim_epoch=…)``; a write without it is refused while someone holds the claim) and a
        commit sequence (``sequence_source`` and ``sequence`` together), which the daemon applies at most
        once, so that a 503 ``write_outcome_unknown`` is retried safely. ``kind="sink"``: a sink
        connector's consumer group ``connect-<name>`` (Kafka logs), not its source offsets."""
        result: dict[str, Any] = self._call(_Routes.alter(connector, body, dry_run, create, auth, kind))
        return result

    def reset(
        self, connector: str, dry_run: bool = False, auth: Auth | None = None, kind: str | None = None
    ) -> dict[str, Any]:
        """``DELETE /connectors/{c}/offsets``: drop all of the connector's offsets (Connect's reset);
        ``dry_run``, ``auth`` and ``kind`` as for ``alter``. Never retried after a 503
        ``write_outcome_unknown`` (a DELETE carries no commit sequence): read before sending it again."""
        result: dict[str, Any] = self._call(_Routes.reset(connector, dry_run, auth, kind))
        return result

    def claim(self, connector: str, owner: str, force: bool = False) -> dict[str, Any]:
        """Become the connector's only writer; pass the returned ``epoch`` as ``Auth.claim_epoch``."""
        result: dict[str, Any] = self._call(_Routes.claim(connector, owner, force))
        return result

    def current_claim(self, connector: str) -> dict[str, Any] | None:
        """The connector's claim (``{"connector","owner","epoch","claimed_at_ms"}``), or None when it has
        none (404 ``claim_not_found``; an unknown connector too)."""
        try:
            result: dict[str, Any] = self._call(_Routes.current_claim(connector))
        except NotFoundError:
            return None
        return result

    def claims(self) -> list[dict[str, Any]]:
        """Every current claim the credentials may read (ours), sorted by connector."""
        result: list[dict[str, Any]] = self._call(_Routes.claims())
        return result

    def release(self, connector: str, epoch: int) -> None:
        """``DELETE /connectors/{c}/claim?epoch=E``: give the claim up; ``epoch`` is the one ``claim``
        returned; an epoch that is not the current claim's is ``NotFoundError``, whose message names
        the current one."""
        self._call(_Routes.release(connector, epoch))

    def records(self, connectors: list[str] | None = None) -> dict[bytes, bytes]:
        """Live raw records (exact key and value bytes), optionally for some connectors only."""
        return decode_records(self._call(_Routes.records(connectors)))

    def import_records(
        self, records: list[tuple[bytes, bytes | None]], dry_run: bool = False, write_all: bool = False
    ) -> dict[str, Any]:
        """Write raw records as-is (``None`` = tombstone); answers the diff. Same rules as PATCH."""
        result: dict[str, Any] = self._call(_Routes.import_records(records, dry_run, write_all))
        return result

    def status(self) -> dict[str, Any]:
        """``GET /status``: the daemon's report (its log, readiness, history, warnings), at once: a
        daemon not ready answers ``NotReadyError`` without the client waiting."""
        result: dict[str, Any] = self._call(_Routes.status())
        return result

    def ready(self) -> bool:
        """``GET /readyz``: True when the daemon serves reads and writes, False when it answers that it
        is not ready (starting, reading its log), at once, never waiting. A daemon that cannot be reached
        is not "not ready": ``DaemonUnavailable`` is raised (and ``AuthenticationError`` where it
        requires credentials), so that a health check tells the two apart."""
        try:
            self._call(_Routes.ready())
        except NotReadyError:
            return False
        return True


class AsyncOffsetsClient:
    """The asyncio twin of ``OffsetsClient``: same methods, same errors, same credentials, awaitable."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        timeout_s: float | None = None,
        credentials: Credentials | None = None,
        retry_for_s: float | None = None,
    ) -> None:
        chosen = credentials if credentials is not None else default_credentials()
        timeout_s = default_timeout_s() if timeout_s is None else timeout_s
        url = _checked_settings(url, timeout_s, retry_for_s)
        self._http = httpx.AsyncClient(**_http_options(url, timeout_s, chosen))
        self._client_cert = bool(chosen.client_cert)
        self._timeout_s = timeout_s
        self.url = redact(url)
        self._retry_for_s = default_retry_for_s() if retry_for_s is None else retry_for_s
        self._refused_for_s = (chosen_retry_for_s() or 0.0) if retry_for_s is None else retry_for_s

    async def __aenter__(self) -> AsyncOffsetsClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections (see ``OffsetsClient.close``)."""
        await self._http.aclose()

    async def _call(self, request: _Request) -> Any:
        retries = _Retries(self.url, self._retry_for_s, self._refused_for_s)
        while True:
            try:
                response = await self._http.request(
                    request.method,
                    request.path,
                    params=request.params,
                    content=_body(request),
                    headers=_headers(request),
                )
            except httpx.TransportError as exc:
                refused = retries.refused_wait_s(request, exc)
                if refused is None:
                    raise _transport_error(self.url, request, exc, self._client_cert, self._timeout_s) from exc
                await asyncio.sleep(refused)
                continue
            wait = retries.wait_s(request, response)
            if wait is None:
                return _result(request, response)
            await asyncio.sleep(wait)

    async def request(
        self, method: str, path: str, *, params: Mapping[str, str | list[str]] | None = None, json: Any = None
    ) -> Any:
        """Any route, with this client's error handling (for routes without a method of their own)."""
        return await self._call(_Request(method, path, params or {}, json))

    async def connectors(self, fresh: bool = False) -> list[str]:
        """``fresh``: as of every write any daemon on the same log acknowledged before the call."""
        result: list[str] = await self._call(_Routes.connectors(fresh))
        return result

    async def offsets(self, connector: str, kind: str | None = None, fresh: bool = False) -> list[dict[str, Any]]:
        """``fresh``: the daemon reads its log to the end first (see ``OffsetsClient.offsets``)."""
        result: list[dict[str, Any]] = await self._call(_Routes.offsets(connector, kind, fresh))
        return result

    async def alter(
        self,
        connector: str,
        body: dict[str, Any],
        dry_run: bool = False,
        create: bool = False,
        auth: Auth | None = None,
        kind: str | None = None,
    ) -> dict[str, Any]:
        """``PATCH /connectors/{c}/offsets`` with Connect's body ``{"offsets":[{"partition":…,"offset":…}]}``
        (an ``offset`` of None resets that partition); answers Connect's ``{"message":…}``.
        ``dry_run``: nothing is written, the answer lists the records it would write. ``create``
        (ours): write to a connector the log does not know yet (else 404). ``auth``: the claim's epoch
        (``Auth(claim_epoch=…)``; a write without it is refused while someone holds the claim) and a
        commit sequence (``sequence_source`` and ``sequence`` together), which the daemon applies at most
        once, so that a 503 ``write_outcome_unknown`` is retried safely. ``kind="sink"``: a sink
        connector's consumer group ``connect-<name>`` (Kafka logs), not its source offsets."""
        result: dict[str, Any] = await self._call(_Routes.alter(connector, body, dry_run, create, auth, kind))
        return result

    async def reset(
        self, connector: str, dry_run: bool = False, auth: Auth | None = None, kind: str | None = None
    ) -> dict[str, Any]:
        """``DELETE /connectors/{c}/offsets``: drop all of the connector's offsets (Connect's reset);
        ``dry_run``, ``auth`` and ``kind`` as for ``alter``. Never retried after a 503
        ``write_outcome_unknown`` (a DELETE carries no commit sequence): read before sending it again."""
        result: dict[str, Any] = await self._call(_Routes.reset(connector, dry_run, auth, kind))
        return result

    async def claim(self, connector: str, owner: str, force: bool = False) -> dict[str, Any]:
        """Become the connector's only writer; pass the returned ``epoch`` as ``Auth.claim_epoch``."""
        result: dict[str, Any] = await self._call(_Routes.claim(connector, owner, force))
        return result

    async def current_claim(self, connector: str) -> dict[str, Any] | None:
        """The connector's claim (``{"connector","owner","epoch","claimed_at_ms"}``), or None when it has
        none (404 ``claim_not_found``; an unknown connector too)."""
        try:
            result: dict[str, Any] = await self._call(_Routes.current_claim(connector))
        except NotFoundError:
            return None
        return result

    async def claims(self) -> list[dict[str, Any]]:
        """Every current claim the credentials may read (ours), sorted by connector."""
        result: list[dict[str, Any]] = await self._call(_Routes.claims())
        return result

    async def release(self, connector: str, epoch: int) -> None:
        """``DELETE /connectors/{c}/claim?epoch=E``: give the claim up; ``epoch`` is the one ``claim``
        returned; an epoch that is not the current claim's is ``NotFoundError``, whose message names
        the current one."""
        await self._call(_Routes.release(connector, epoch))

    async def records(self, connectors: list[str] | None = None) -> dict[bytes, bytes]:
        """Live raw records (exact key and value bytes), optionally for some connectors only."""
        return decode_records(await self._call(_Routes.records(connectors)))

    async def import_records(
        self, records: list[tuple[bytes, bytes | None]], dry_run: bool = False, write_all: bool = False
    ) -> dict[str, Any]:
        """Write raw records as-is (``None`` = tombstone); answers the diff. Same rules as PATCH."""
        result: dict[str, Any] = await self._call(_Routes.import_records(records, dry_run, write_all))
        return result

    async def status(self) -> dict[str, Any]:
        """``GET /status``: the daemon's report (its log, readiness, history, warnings), at once: a
        daemon not ready answers ``NotReadyError`` without the client waiting."""
        result: dict[str, Any] = await self._call(_Routes.status())
        return result

    async def ready(self) -> bool:
        """``GET /readyz``: True when the daemon serves reads and writes, False when it answers that it
        is not ready (starting, reading its log), at once, never waiting. A daemon that cannot be reached
        is not "not ready": ``DaemonUnavailable`` is raised (and ``AuthenticationError`` where it
        requires credentials), so that a health check tells the two apart."""
        try:
            await self._call(_Routes.ready())
        except NotReadyError:
            return False
        return True
