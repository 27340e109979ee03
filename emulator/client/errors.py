"""The client's typed errors: what a caller can tell apart without reading message texts.

A daemon's error answer is typed by its ``X-Connect-Offsets-Error`` header (the kinds are listed in
``emulator.server.errors``), else by its status alone (daemons that predate the header, the web
framework's own 405); the message is Connect's, for people. A 404 without a kind is no daemon's
"unknown connector" or "no claim" (every 404 of the daemon's routes names its kind): the URL is not a
route of a connect-offsets daemon (``UnknownRouteError``). An error answer without Connect's error body
either is no daemon's at all (``ApiError.not_a_daemon``: another web server at that port, a proxy
without its daemon), told apart by that body and header, never by the status alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from emulator.client.credentials import redact
from emulator.model.errors import ERROR_HEADER

if TYPE_CHECKING:  # only annotated here: the errors are imported where httpx is not (the CLI's ``serve``)
    import httpx


class ClientError(Exception):
    """Base of the client's errors (but ``CredentialsError`` and ``RetryWindowError``, which are
    ``ValueError``s only: see docs/api.md#python-clients)."""


class ClientConfigError(ClientError, ValueError):
    """A client or an ``Auth`` built with values it cannot use (a ``timeout_s`` that is not a finite
    number above 0, a ``retry_for_s`` that is negative or NaN, a URL without ``http://`` or
    ``https://``, a commit sequence without its source): raised by the constructor, before any request,
    so that it is never mistaken for ``DaemonUnavailable``, which says that asking again is safe. Also a
    ``ValueError``, as the standard library raises for a bad argument."""


class UnaddressableConnector(ClientError, ValueError):
    """A connector name that no URL path can carry: it holds half a surrogate pair (Connect's data may:
    ``emulator.codec.surrogates``), which UTF-8, and so percent-encoding, cannot encode; the daemon
    refuses such a path too (400, not valid UTF-8). Raised before any request. Such a connector's
    records are reached with ``records()`` and ``import_records()`` (``/offsets/records``), whose keys
    carry the name as bytes."""

    def __init__(self, message: str, connector: str) -> None:
        super().__init__(message)
        self.connector = connector


class DaemonUnavailable(ClientError):
    """Nothing answered at the URL (daemon down, wrong URL, network), or a read got no answer: nothing
    was changed, so sending the request again is safe."""


class AnswerLost(ClientError):
    """A request that may change something reached the daemon, and its answer did not come back (the
    connection dropped or timed out after the request was sent: a daemon that crashed, a proxy that
    failed). It may have been applied: read the state before sending it again. Deliberately not a
    ``DaemonUnavailable``, which callers may take as "nothing happened, try again"."""

    def __init__(self, message: str, method: str, path: str) -> None:
        super().__init__(message)
        self.method = method
        self.path = path


class ApiError(ClientError):
    """The daemon answered with Connect's error body ``{"error_code":…,"message":…}``.

    ``kind`` is the daemon's name for what went wrong (the ``X-Connect-Offsets-Error`` header), or
    None when the daemon did not send one.
    """

    not_a_daemon: bool = False
    """True when what answered is no connect-offsets daemon at all: the answer carried neither the
    daemon's kind header nor Connect's error body (every error of a daemon, of any version, has that
    body; its web framework's own 404 and 405 too), e.g. the HTML page of another web server at that
    port, or a proxy's own "bad gateway". ``message`` then says so and quotes what answered. Never set
    for the answers a proxy in front of a daemon gives about the request itself (``ABOUT_THE_REQUEST``).
    The CLI exits 3 for it, as for a daemon it cannot reach: the daemon is not where the URL points."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.kind = kind


class AuthenticationError(ApiError):
    """401: the daemon requires credentials, or refused the ones given (see ``Credentials``).

    ``schemes``: the ways in its ``WWW-Authenticate`` challenges name, lower case (``basic``,
    ``bearer``), so that a caller offers only those: a daemon with only ``--tokens-file`` takes no
    Basic user, one with only ``--credentials-file`` no token. Empty when the answer carried no
    challenge (a daemon from before the header, a proxy that dropped it): any way may then be the one."""

    schemes: tuple[str, ...] = ()


class ForbiddenError(ApiError):
    """403: authenticated, but the principal's scopes do not cover this operation."""


class NotFoundError(ApiError):
    """404: the connector (or its claim, or the history) is unknown."""


class UnknownRouteError(ApiError):
    """404 without the daemon's kind: something answered at the URL, but not one of a connect-offsets
    daemon's routes (a wrong base path in the URL, another service, a route this daemon's version
    lacks; ``not_a_daemon`` tells another service apart). Not a ``NotFoundError``: it says nothing about
    the connector or its claim."""


class NotStoppedError(ApiError):
    """400 because the connector is not STOPPED (Connect's rule for modifying offsets), or because
    someone else holds its claim."""


OUTCOME_UNKNOWN = "write_outcome_unknown"
"""The kind of a 503 after which a write may still land (``NotReadyError``): read before sending it again
(unless it carries a commit sequence, which makes a resend safe)."""


class NotReadyError(ApiError):
    """503: the daemon cannot answer now: it has not read its log to the end yet, or cannot read it
    (``not_ready``), or the log did not answer within its write timeout (``log_timeout``: nothing was
    written; ``write_outcome_unknown``: the write may still land; ``write_partly_applied``: part of a
    write of several chunks is in effect, the rest was not written, and sending it again writes the
    rest). Raised once the client's retries (``retry_for_s``) are spent, or at once where a retry is not
    safe or would not help."""


class FencedError(ApiError):
    """409: a newer claim fenced this writer (or another conflict); nothing was written."""


_BY_KIND: dict[str, type[ApiError]] = {
    "connector_not_found": NotFoundError,
    "claim_not_found": NotFoundError,
    "history_disabled": NotFoundError,
    "not_stopped": NotStoppedError,
    "claim_held": NotStoppedError,
    "not_ready": NotReadyError,
    "fenced": FencedError,
    "conflict": FencedError,
    "connector_running": FencedError,
    "claims_unsupported": FencedError,
    "unauthenticated": AuthenticationError,
    "forbidden": ForbiddenError,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    401: AuthenticationError,
    403: ForbiddenError,
    404: NotFoundError,  # a kind this client does not know: a newer daemon's "not found"
    409: FencedError,
    503: NotReadyError,
}


def api_error(status: int, message: str, kind: str | None = None, url: str | None = None) -> ApiError:
    """The typed error for a daemon's answer: by ``kind`` when the daemon named one this client
    knows, else by status alone (older daemons, the web framework's own 405); a 404 without any kind
    is ``UnknownRouteError``, its message saying so (naming ``url``, the one asked, when given)."""
    if status == 404 and not kind:
        where = f"{url} answered" if url else "the URL answered"
        return UnknownRouteError(
            status,
            f"{where} 404 without being a connect-offsets daemon route: a wrong base path in the URL, or "
            f"another service there, or a daemon older than this client? (its answer: {message})",
        )
    cls = _BY_KIND.get(kind or "") or _BY_STATUS.get(status, ApiError)
    return cls(status, message, kind)


def challenge_schemes(challenges: list[str]) -> tuple[str, ...]:
    """The auth-schemes of ``WWW-Authenticate`` values, lower case, in order, each once. A value may
    hold several challenges (``Basic realm="x", Bearer realm="x"``, RFC 9110 §11.6.1): each comma-separated
    part whose first word is no ``name=value`` parameter starts one."""
    found: list[str] = []
    for value in challenges:
        for part in value.split(","):
            word = part.strip().split(" ", 1)[0]
            if word and "=" not in word and word.lower() not in found:
                found.append(word.lower())
    return tuple(found)


ABOUT_THE_REQUEST = frozenset({401, 403, 407, 413, 429})
"""Statuses a proxy in front of a daemon answers about the request itself (its own credentials, body
limit, rate limit), with a page of its own: the daemon may well be behind it, so such an answer is
never ``not_a_daemon``."""
_QUOTED_CHARS = 120
"""How much of another service's answer a ``not_a_daemon`` message quotes."""


def _is_connect_error(body: object) -> bool:
    """Connect's error body, as every error answer of a connect-offsets daemon carries it."""
    return isinstance(body, dict) and isinstance(body.get("error_code"), int) and isinstance(body.get("message"), str)


def _what_answered(response: httpx.Response) -> str:
    """Another service's answer in brief: its content type and the start of its text, tags left out
    (an HTML error page says what it is in its words, not in its markup)."""
    text = " ".join(re.sub(r"<[^>]*>", " ", response.text).split())
    if len(text) > _QUOTED_CHARS:
        text = text[:_QUOTED_CHARS].rstrip() + "…"
    kind = response.headers.get("content-type", "no content type").split(";")[0].strip()
    return f'{kind}: "{text}"' if text else f"{kind}, empty"


def _not_a_daemon(response: httpx.Response, url: str | None) -> ApiError:
    """The error for an answer that no connect-offsets daemon gives (``ApiError.not_a_daemon``), typed
    by its status as before (a 404 stays ``UnknownRouteError``), its message saying what answered."""
    status = response.status_code
    where = f"{url} answered" if url else "the URL answered"
    message = (
        f"{where} HTTP {status} ({_what_answered(response)}), which is not a connect-offsets daemon's answer "
        "(the daemon answers every error with Connect's JSON body): another service listens there, or a proxy "
        "there has no daemon behind it; check the daemon's URL (host, port, base path)"
    )
    cls = UnknownRouteError if status == 404 else _BY_STATUS.get(status, ApiError)
    error = cls(status, message)
    error.not_a_daemon = True
    return error


def error_from_response(response: httpx.Response) -> ApiError:
    """An error answer (status >= 400) as a typed error carrying Connect's message (a 401's with the
    schemes its challenges name)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    try:
        url: str | None = redact(str(response.request.url.copy_with(query=None)))
    except RuntimeError:  # a response built without its request
        url = None
    kind = response.headers.get(ERROR_HEADER)
    if kind is None and not _is_connect_error(body) and response.status_code not in ABOUT_THE_REQUEST:
        return _not_a_daemon(response, url)
    error = api_error(
        response.status_code,
        str(message or response.text or response.reason_phrase),
        kind,
        url,
    )
    if isinstance(error, AuthenticationError):
        error.schemes = challenge_schemes(response.headers.get_list("WWW-Authenticate"))
    return error
