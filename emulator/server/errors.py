"""The one place where domain errors become HTTP: status, Connect's error body, and a kind header.

Connect answers every failure as ``{"error_code": <status>, "message": "..."}``
(``ConnectExceptionMapper``) and Connect clients parse exactly that, so the body stays that. What
happened, for programs, travels in a response header instead of in the message text::

    X-Connect-Offsets-Error: <kind>

======================== ====== ===========================================================
kind                     status when
======================== ====== ===========================================================
invalid_request          400    the body or a parameter is wrong (Connect's BadRequestException)
request_too_large        413    the body exceeds ``--max-body-bytes`` (refused before it is read whole)
invalid_record           400    log entries are not (bytes key, bytes-or-None value) pairs
wrong_connector_type     400    ``kind=`` contradicts the Connect cluster's config
history_unavailable      400    the time lies before what the archive's retention kept
host_not_allowed         400    the Host header names no host of ``--allowed-hosts`` (DNS rebinding)
request_timeout          408    the request's headers did not arrive within ``--header-timeout`` (closed)
request_head_too_large   431    the request's line and headers exceed 64 KiB (closed)
not_stopped              400    the connector is not STOPPED with 0 tasks (Connect's rule)
claim_held               400    someone holds a claim and the write did not present it
sinks_unsupported        400    sink offsets need Kafka (the embedded log has no groups)
unauthenticated          401    no credentials, or credentials not accepted (with ``WWW-Authenticate``)
forbidden                403    the principal's scopes do not cover the operation on this connector
cross_origin_write       403    a browser sent a write from another origin, or as a form or navigation
connector_not_found      404    the connector is unknown (cluster, offsets log or history)
claim_not_found          404    the connector has no current claim (with that epoch)
history_disabled         404    the daemon runs with ``--no-history``
conflict                 409    another writer won a race (e.g. a concurrent claim)
fenced                   409    a newer claim fenced this writer; nothing was written
connector_running        409    a claim was refused: the connector runs (use force)
claims_unsupported       409    the log backend cannot store claims
history_damaged          409    a rollback would write a state rebuilt from a damaged archive (``allow_damaged``)
unsupported_media_type   415    a write whose ``Content-Type`` is not ``application/json``
invalid_offset_format    500    Connect's ``validateFormat`` refused a map (500, as in Connect)
sink_offsets_failed      500    the consumer-group call behind a sink's offsets failed
log_unavailable          500    a log could not be read to its end in time
log_config_error         500    the log's storage cannot be used as configured
topic_misconfigured      500    a topic exists but is configured so Connect would refuse it (not compacted)
store_unavailable        500    a connector's own offsets topic cannot be served (another Kafka cluster)
log_write_error          500    the log did not acknowledge a write
internal_error           500    anything else (a bug: the message names the exception)
not_ready                503    the log is not read to its end yet, or not open yet (start-up): retry shortly;
                                without ``Retry-After``: it cannot be read (waiting will not mend it)
log_timeout              503    the log did not answer within --write-timeout; nothing was written
write_outcome_unknown    503    the write was not acknowledged within --write-timeout and may still land
too_many_connections     503    ``--max-connections`` are open; this one is closed (retry shortly)
busy                     503    large bodies take turns (--max-body-bytes at once); this one waited in vain
log_storage_refused      503    the embedded log's disk refused the write (full, I/O error, read-only)
history_behind           503    a rollback from an archive that may lack this daemon's writes is refused
write_partly_applied     503    a write of several chunks refused after some were written (those are in
                         (the   effect; the message says how many); the status and ``Retry-After`` of
                         cause) what refused it (503 for the log's timeout or disk, 409/400 for a claim)
======================== ====== ===========================================================

``log_timeout``, ``write_outcome_unknown``, ``log_storage_refused``, ``busy``, ``history_behind``, a ``not_ready``
that passes by itself and a ``write_partly_applied`` refused by one of them carry ``Retry-After`` (seconds);
``/readyz`` and ``/status`` never do (they report, and a probe asks again on its own schedule). After
``write_outcome_unknown`` the daemon holds the connector's next write until the log answered, so a
retry with the same commit sequence (``sequence_source`` + ``sequence``) is applied at most once: its
answer lists the partition under ``dropped`` ("N was already applied") if the first attempt landed,
and applies it if it did not (docs/operations.md, "Faults").

Answers of the web framework itself (no such route: 404, method not allowed: 405) carry no kind;
clients fall back on the status, as they must for daemons that predate the header.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from emulator.log_throttle import Throttle, held_message
from emulator.model import errors
from emulator.model.claims import Fenced
from emulator.model.errors import ERROR_HEADER, OffsetsError
from emulator.model.principal import current_principal
from emulator.server.auth.status import message_for_principal
from emulator.server.openapi import parameter_errors_message
from emulator.server.routes.params import unrouted_connector_problem

log = logging.getLogger(__name__)

HISTORY_WARNING_HEADER = "X-Offsets-History-Warning"
"""Why a history answer may be incomplete (damaged files, an archive behind); also on its 404."""

STATUS: Mapping[type, int] = {
    errors.OffsetsError: 500,
    errors.InvalidRequest: 400,
    errors.RequestTooLarge: 413,
    errors.InvalidOffsetFormat: 500,
    errors.ConnectorNotFound: 404,
    errors.NotStopped: 400,
    errors.ClaimNotFound: 404,
    errors.Conflict: 409,
    Fenced: 409,
    errors.NotReady: 503,
    errors.HistoryDisabled: 404,
    errors.HistoryBehind: 503,
    errors.HistoryDamaged: 409,
    errors.SinksUnsupported: 400,
    errors.SinkOffsetsFailed: 500,
    errors.LogUnavailable: 500,
    errors.LogConfigError: 500,
    errors.LogWriteError: 500,
    errors.Unauthenticated: 401,
    errors.Forbidden: 403,
    errors.UnsupportedMediaType: 415,
    errors.LogTimeout: 503,
    errors.LogStorageRefused: 503,
    errors.WriteOutcomeUnknown: 503,
    errors.RequestHeadTimeout: 408,
    errors.RequestHeadTooLarge: 431,
    errors.TooManyConnections: 503,
    errors.BusyWithLargeRequests: 503,
    errors.WritePartlyApplied: 503,
}
"""Status per class; a class not listed takes its nearest listed ancestor's. A ``WritePartlyApplied``
with a ``cause`` takes the cause's (``answered_as``)."""


NOT_FAULTS: tuple[type[OffsetsError], ...] = (
    errors.InvalidOffsetFormat,
    errors.NotReadyYet,
    errors.BusyWithLargeRequests,
)
"""Errors answered with a 5xx that are no fault of the daemon's: a map Connect's rules refuse with 500
(the request caused it: like every 4xx, the client's to fix), and a log still being read (the state
``/readyz`` reports while the daemon starts; clients ask again every second, which would fill the log
with ERROR lines). Like every answer they appear in the access log (INFO, with their kind); never at
ERROR."""


def _report_unavailable(kind: Hashable, held: int, ends_at: float) -> None:
    log.error("request failed: %s", held_message(held, f"{kind} refusals", _UNAVAILABLE.window_s, ends_at))


_UNAVAILABLE = Throttle(_report_unavailable)
"""503s: a stalled broker or disk answers every request so; the fault has a line of its own, and
each kind of refusal is logged once per window, the count of the rest in a line of its own when the
window ends (each one is still in the access log and the metrics). A 500 is logged every time."""


def _log_failure(exc: OffsetsError, status: int) -> None:
    if status != 503 or _UNAVAILABLE.admit(exc.kind):
        log.error("request failed: %s", exc.message)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (HTTP's ``Allow`` of a 405): asked method by method,
    since routes included from routers answer a path match with another method as no match at all."""
    router = request.scope.get("router") or request.app.router
    return [
        method
        for method in _METHODS
        if any(
            isinstance(route, BaseRoute) and route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in router.routes
        )
    ]


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def answered_as(error: OffsetsError) -> OffsetsError:
    """The error whose status and ``Retry-After`` ``error`` is answered with: a partly applied write's
    are those of what refused it (``WritePartlyApplied.cause``); its kind stays its own."""
    if isinstance(error, errors.WritePartlyApplied) and error.cause is not None:
        return answered_as(error.cause)
    return error


def status_of(error: OffsetsError) -> int:
    error = answered_as(error)
    for cls in type(error).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return 500  # unreachable: OffsetsError is listed


RETRY_AFTER_S: Mapping[type, int] = {
    errors.LogTimeout: 1,
    errors.WriteOutcomeUnknown: 1,
    errors.TooManyConnections: 1,
    errors.BusyWithLargeRequests: 5,
    errors.LogStorageRefused: 5,
    errors.NotReadyYet: 1,
    errors.HistoryBehind: 1,
    errors.WritePartlyApplied: 1,
}
"""``Retry-After`` per class (exact class): the log was slow or its disk refused, not the request wrong
(a disk is freed in minutes, not within a second, hence its longer pause), or the log is still being
read (``NotReadyYet``; a ``NotReady`` that may never pass has none)."""


def error_response(
    error: OffsetsError, extra: Mapping[str, object] | None = None, message: str | None = None
) -> JSONResponse:
    """Connect's error body (plus ``extra`` fields, e.g. readiness progress) and the kind header;
    a 401 also names the schemes the daemon accepts, one ``WWW-Authenticate`` header each.
    ``message``: the error's message as the caller may read it (``shown_message``), if not whole."""
    status = status_of(error)
    body = {"error_code": status, "message": error.message if message is None else message, **(extra or {})}
    headers = {ERROR_HEADER: error.kind}
    if isinstance(error, errors.ConnectorNotFound) and error.history_warning is not None:
        headers[HISTORY_WARNING_HEADER] = error.history_warning  # ASCII: it names no connector
    retry_after = RETRY_AFTER_S.get(type(answered_as(error)))
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    response = JSONResponse(body, status_code=status, headers=headers)
    if isinstance(error, errors.Unauthenticated):
        for challenge in error.challenges:
            response.headers.append("WWW-Authenticate", challenge)
    return response


def shown_message(request: Request, error: OffsetsError) -> str:
    """``error``'s message as the request's principal may read it: where the log lives (its file,
    directory or brokers; a 503 names the log) only for ``admin`` (``auth.status``), as in
    ``/status``. Every principal is admin without authentication. The daemon's own log line keeps
    the whole message (``_log_failure``): it is the operator's."""
    runtime = getattr(request.app.state, "runtime", None)
    log_description = runtime.log.description if runtime is not None else None
    return message_for_principal(error.message, current_principal.get(), log_description)


def raw_error_response(error: OffsetsError) -> bytes:
    """``error_response`` as the bytes of a whole HTTP/1.1 answer that closes the connection, for
    answers given before a request reaches the app (``emulator.server.connections``)."""
    response = error_response(error)
    reason = HTTPStatus(response.status_code).phrase
    head = [f"HTTP/1.1 {response.status_code} {reason}".encode("ascii")]
    head += [name + b": " + value for name, value in response.raw_headers]
    head.append(b"connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + bytes(response.body)


def install_error_handlers(app: FastAPI) -> None:
    """Every failure leaves the app in Connect's shape, whatever raised it."""

    @app.exception_handler(OffsetsError)
    async def _domain_error(request: Request, exc: OffsetsError) -> JSONResponse:
        response = error_response(exc, message=shown_message(request, exc))
        if response.status_code >= 500 and not isinstance(exc, NOT_FAULTS):
            _log_failure(exc, response.status_code)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404 and (problem := unrouted_connector_problem(request)) is not None:
            return error_response(errors.InvalidRequest(problem))  # a name with %2F: say so, not "Not Found"
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # the router names the first route's methods only: GET, PATCH, DELETE are three
            headers["Allow"] = ", ".join(allowed_methods(request))
        return JSONResponse(
            {"error_code": exc.status_code, "message": message}, status_code=exc.status_code, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(errors.InvalidRequest(parameter_errors_message(exc.errors())))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(OffsetsError(f"{type(exc).__name__}: {exc}"))
