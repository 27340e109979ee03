"""Domain errors → HTTP in one table, and back to typed errors in the clients.

The daemon keeps Connect's error body exactly (``{"error_code", "message"}``: Connect clients parse
it) and names what went wrong in the ``X-Connect-Offsets-Error`` header; the Python clients type
their errors from that header, never from the message text.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

import emulator.server.errors as server_errors
from emulator.client.errors import (
    ApiError,
    AuthenticationError,
    FencedError,
    ForbiddenError,
    NotFoundError,
    NotReadyError,
    NotStoppedError,
    UnknownRouteError,
    api_error,
    challenge_schemes,
    error_from_response,
)
from emulator.client.http import ERROR_HEADER
from emulator.history.query import HistoryUnavailable
from emulator.model.claims import Fenced
from emulator.model.errors import (
    ClaimHeld,
    ConnectorNotFound,
    InvalidOffsetFormat,
    InvalidRequest,
    LogStorageRefused,
    LogTimeout,
    LogWriteError,
    NotReady,
    NotReadyYet,
    NotStopped,
    OffsetsError,
    WritePartlyApplied,
)
from emulator.server.errors import error_response, status_of


def all_error_classes() -> list[type[OffsetsError]]:
    # Importing the modules that define subclasses outside model.errors registers them.
    assert Fenced and HistoryUnavailable
    found: list[type[OffsetsError]] = [OffsetsError]
    for cls in found:
        found.extend(cls.__subclasses__())
    return found


def documented_kinds() -> dict[str, int]:
    """The kind → status table in ``emulator.server.errors``'s docstring."""
    doc = server_errors.__doc__ or ""
    return {m[1]: int(m[2]) for m in re.finditer(r"^([a-z_]+)\s+(\d{3})\s", doc, re.MULTILINE)}


SAME_KIND_AS_PARENT: dict[type[OffsetsError], type[OffsetsError]] = {NotReadyYet: NotReady}
"""Subclasses that keep their parent's kind on purpose: one state to a client matching on kinds, told
apart by ``Retry-After`` (a not-ready that passes by itself says when to ask again)."""


def test_every_domain_error_has_its_own_kind_and_the_documented_status() -> None:
    classes = all_error_classes()
    for cls, parent in SAME_KIND_AS_PARENT.items():
        assert cls in classes and cls.__base__ is parent and cls.kind == parent.kind
    kinds = [cls.kind for cls in classes if cls not in SAME_KIND_AS_PARENT]
    assert len(kinds) == len(set(kinds)), f"a subclass must name its own kind: {sorted(kinds)}"
    documented = documented_kinds()
    assert {cls.kind: status_of(cls("x")) for cls in classes} == documented


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (InvalidRequest("bad body"), 400, "invalid_request"),
        (NotStopped("Connectors must be in the STOPPED state"), 400, "not_stopped"),
        (ClaimHeld("held"), 400, "claim_held"),
        (ConnectorNotFound("Connector c not found"), 404, "connector_not_found"),
        (Fenced("fenced"), 409, "fenced"),
        (InvalidOffsetFormat("Offsets may only use String keys"), 500, "invalid_offset_format"),
        (NotReady("not yet"), 503, "not_ready"),
        (NotReadyYet("still reading"), 503, "not_ready"),
    ],
)
def test_the_body_is_connects_and_the_kind_travels_in_a_header(error: OffsetsError, status: int, kind: str) -> None:
    response = error_response(error)
    assert response.status_code == status
    assert json.loads(response.body) == {"error_code": status, "message": error.message}
    assert response.headers[ERROR_HEADER] == kind


def test_only_a_not_ready_that_passes_by_itself_says_when_to_ask_again() -> None:
    assert error_response(NotReadyYet("The offsets log has not been read to the end yet")).headers["Retry-After"] == "1"
    assert "Retry-After" not in error_response(NotReady("The offsets log cannot be read: corrupt")).headers


@pytest.mark.parametrize(
    ("cause", "status", "retry_after"),
    [
        (LogTimeout("the write timed out"), 503, "1"),
        (LogStorageRefused("the disk is full"), 503, "5"),
        (Fenced("fenced"), 409, None),
        (ClaimHeld("held"), 400, None),
        (LogWriteError("not acknowledged"), 500, None),
        (None, 503, "1"),
    ],
)
def test_a_partly_applied_write_keeps_its_kind_with_the_status_of_what_refused_it(
    cause: OffsetsError | None, status: int, retry_after: str | None
) -> None:
    """Its own kind, since the refusal's (``log_timeout``, ``fenced``…) would say nothing was written;
    the refusal's status and ``Retry-After``, since they say what a caller can do."""
    response = error_response(WritePartlyApplied("…; the first 10,000 … are in effect", cause))
    assert response.status_code == status
    assert response.headers[ERROR_HEADER] == "write_partly_applied"
    assert response.headers.get("Retry-After") == retry_after


def test_extra_fields_follow_connects_two() -> None:
    response = error_response(NotReady("Reading the offsets log to its end"), extra={"ready": False})
    assert json.loads(response.body) == {
        "error_code": 503,
        "message": "Reading the offsets log to its end",
        "ready": False,
    }


def answer(status: int, message: str, kind: str | None = None) -> httpx.Response:
    headers = {} if kind is None else {ERROR_HEADER: kind}
    return httpx.Response(status, headers=headers, json={"error_code": status, "message": message})


def test_not_stopped_is_recognised_by_its_kind_whatever_the_message_says() -> None:
    error = error_from_response(answer(400, "someone else is writing this connector", "not_stopped"))
    assert type(error) is NotStoppedError
    assert error.message == "someone else is writing this connector" and error.kind == "not_stopped"
    assert type(error_from_response(answer(400, "claimed by 'spark-run-1'", "claim_held"))) is NotStoppedError


def test_a_message_mentioning_stopped_is_not_a_kind() -> None:
    error = error_from_response(answer(400, "offsets[0].partition must mention STOPPED", "invalid_request"))
    assert type(error) is ApiError and error.kind == "invalid_request"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, ApiError), (404, UnknownRouteError), (409, FencedError), (500, ApiError), (503, NotReadyError)],
)
def test_without_the_header_the_status_alone_decides(status: int, expected: type[ApiError]) -> None:
    error = error_from_response(answer(status, "Connectors must be in the STOPPED state"))
    assert type(error) is expected and error.kind is None


def test_a_404_without_a_kind_names_an_older_daemon_among_its_causes() -> None:
    """``connect-offsets claims`` against a daemon from before the claims routes: its 404 is the web
    framework's, without a kind, and the message listed only a wrong URL or another service."""
    error = api_error(404, "Not Found", url="http://127.0.0.1:48901/connectors/c/claim")
    assert type(error) is UnknownRouteError
    assert error.message == (
        "http://127.0.0.1:48901/connectors/c/claim answered 404 without being a connect-offsets daemon route: a wrong "
        "base path in the URL, or another service there, or a daemon older than this client? (its answer: Not Found)"
    )


def test_an_unknown_kind_from_a_newer_daemon_falls_back_on_the_status() -> None:
    assert type(error_from_response(answer(409, "a new kind of conflict", "some_future_kind"))) is FencedError


def test_the_clients_type_agrees_with_the_status_for_every_kind_the_daemon_sends() -> None:
    for kind, status in documented_kinds().items():
        error = api_error(status, "m", kind)
        by_status = {
            401: AuthenticationError,
            403: ForbiddenError,
            404: NotFoundError,
            409: FencedError,
            503: NotReadyError,
        }.get(status)
        if kind in (NotStopped.kind, ClaimHeld.kind):
            assert type(error) is NotStoppedError, kind
        else:
            assert type(error) is (by_status or ApiError), kind


def test_a_401_carries_the_schemes_its_challenges_name() -> None:
    """QA 23 #1: the CLI's hint offers only these; none named (an older daemon) leaves it all ways."""
    challenged = httpx.Response(
        401,
        headers=[
            ("WWW-Authenticate", 'Basic realm="connect-offsets", charset="UTF-8"'),
            ("WWW-Authenticate", "Bearer"),
        ],
        json={"error_code": 401, "message": "User cannot access the resource. (no credentials)"},
    )
    error = error_from_response(challenged)
    assert isinstance(error, AuthenticationError) and error.schemes == ("basic", "bearer")
    assert challenge_schemes(['Bearer realm="a", Basic realm="b"']) == ("bearer", "basic")
    plain = error_from_response(answer(401, "User cannot access the resource.", "unauthenticated"))
    assert isinstance(plain, AuthenticationError) and plain.schemes == ()


def test_an_answer_without_connects_error_body_is_not_a_daemons() -> None:
    """QA 23 #3: told apart by the body and the kind header, never by the status alone: a daemon's 404
    (with or without its kind) has Connect's body; another web server's page has not, and a proxy's own
    answer about the request (413 here) may well come from in front of a daemon."""
    page = httpx.Response(404, headers={"Content-Type": "text/html"}, text="<html><h1>404 Not Found</h1></html>")
    error = error_from_response(page)
    assert type(error) is UnknownRouteError and error.not_a_daemon and error.status == 404
    assert error.message.startswith('the URL answered HTTP 404 (text/html: "404 Not Found"), which is not a conn')
    gateway = error_from_response(httpx.Response(502, text="Bad Gateway"))
    assert type(gateway) is ApiError and gateway.not_a_daemon
    assert not error_from_response(answer(404, "Not Found")).not_a_daemon, "the daemon's web framework: its body"
    assert not error_from_response(answer(404, "No claim", "claim_not_found")).not_a_daemon
    assert not error_from_response(httpx.Response(413, text="<html>413 Request Entity Too Large</html>")).not_a_daemon
