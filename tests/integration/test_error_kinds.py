"""A real daemon's error answers: Connect's body, exactly, and what happened in a header.

Connect clients parse ``{"error_code", "message"}`` and nothing else, so the body carries exactly
those two fields; programs that need to tell errors apart read ``X-Connect-Offsets-Error`` (the
kinds are listed in ``emulator.server.errors``), and the Python clients type their errors from it.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from emulator.client.errors import ApiError, NotFoundError, NotStoppedError
from emulator.client.http import Auth, OffsetsClient
from emulator.model.errors import ERROR_HEADER

PARTITION = {"filename": "/data/in.txt"}


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": PARTITION, "offset": {"position": position}}]}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def assert_error(response: httpx.Response, status: int, kind: str | None, message: str | None = None) -> None:
    assert response.status_code == status, response.text
    answer = response.json()
    assert set(answer) == {"error_code", "message"}, "Connect's error body has exactly these two fields"
    assert answer["error_code"] == status
    if message is not None:
        assert answer["message"] == message
    assert response.headers.get(ERROR_HEADER) == kind


def test_connects_errors_carry_their_kind(embedded_daemon: Any) -> None:
    name = unique("kinds")
    path = f"/connectors/{name}/offsets"
    with httpx.Client(base_url=embedded_daemon.url, timeout=60) as http:
        assert_error(http.get(path), 404, "connector_not_found", f"Connector {name} not found")
        assert_error(
            http.patch(path, json={"offsets": []}),
            400,
            "invalid_request",
            "Partitions / offsets need to be provided for an alter offsets request",
        )
        nested = {"offsets": [{"partition": {"file": {"name": "x"}}, "offset": {"position": 1}}]}
        assert_error(http.patch(path, params={"create": "true"}, json=nested), 500, "invalid_offset_format")
        assert_error(http.patch(path, params={"claim_epoch": "not-a-number"}, json=body(1)), 400, "invalid_request")


def test_ownership_errors_carry_their_kind(embedded_daemon: Any) -> None:
    name = unique("owned")
    path = f"/connectors/{name}/offsets"
    with httpx.Client(base_url=embedded_daemon.url, timeout=60) as http:
        assert http.patch(path, params={"create": "true"}, json=body(1)).status_code == 200
        assert_error(http.get(f"/connectors/{name}/claim"), 404, "claim_not_found")
        first = http.post(f"/connectors/{name}/claim", json={"owner": "run-1"}).json()["epoch"]
        assert_error(http.patch(path, json=body(2)), 400, "claim_held")
        http.post(f"/connectors/{name}/claim", json={"owner": "run-2"})
        assert_error(http.patch(path, params={"claim_epoch": str(first)}, json=body(3)), 409, "fenced")


def test_sink_offsets_on_the_embedded_log_are_refused_by_kind(embedded_daemon: Any) -> None:
    response = httpx.get(f"{embedded_daemon.url}/connectors/{unique('sink')}/offsets", params={"kind": "sink"})
    assert_error(response, 400, "sinks_unsupported")


def test_the_web_frameworks_own_answers_carry_no_kind(embedded_daemon: Any) -> None:
    assert_error(httpx.get(f"{embedded_daemon.url}/no/such/route"), 404, None, "Not Found")
    wrong_method = httpx.put(f"{embedded_daemon.url}/connectors/any/offsets", json={})
    assert_error(wrong_method, 405, None, "Method Not Allowed")
    allowed = set(wrong_method.headers["Allow"].split(", "))
    assert allowed == {"GET", "PATCH", "DELETE"}, "HTTP: a 405 names every method the path serves"


def test_a_delete_is_refused_for_its_content_type_only_with_a_body(embedded_daemon: Any) -> None:
    url = f"{embedded_daemon.url}/connectors/{unique('delete-ct')}/offsets"
    with_body = httpx.request("DELETE", url, content=b"{}", headers={"Content-Type": "text/plain"})
    says = "DELETE with a body needs Content-Type: application/json (got text/plain)"
    assert_error(with_body, 415, "unsupported_media_type", says)
    assert httpx.delete(url).status_code != 415, "a DELETE without a body needs no Content-Type"


@pytest.mark.slow
def test_a_daemon_without_history_says_so_by_kind(daemon_factory: Any) -> None:
    daemon = daemon_factory("--no-history")
    response = httpx.get(f"{daemon.url}/connectors/{unique('hist')}/offsets/history", timeout=60)
    assert_error(response, 404, "history_disabled")


def test_the_client_types_a_real_daemons_errors_by_kind(embedded_daemon: Any) -> None:
    name = unique("typed")
    with OffsetsClient(embedded_daemon.url) as client:
        client.alter(name, body(1), create=True)
        with pytest.raises(NotFoundError) as no_claim:
            client.release(name, 7)
        assert no_claim.value.kind == "claim_not_found"
        assert no_claim.value.message == f"Connector {name} has no current claim, so none with epoch 7"
        claim = client.claim(name, "run-1")
        with pytest.raises(NotFoundError) as stale:
            client.release(name, claim["epoch"] + 6)
        assert stale.value.kind == "claim_not_found"
        assert stale.value.message == (
            f"Connector {name} has no current claim with epoch {claim['epoch'] + 6}: "
            f"its current claim is epoch {claim['epoch']}, held by 'run-1'"
        )
        with pytest.raises(NotStoppedError) as held:
            client.alter(name, body(2))
        assert held.value.kind == "claim_held" and held.value.status == 400
        client.release(name, claim["epoch"])
        with pytest.raises(ApiError) as invalid:
            client.alter(name, {"offsets": [{"partition": {"f": [1]}, "offset": None}]}, auth=Auth())
        assert type(invalid.value) is ApiError
        assert invalid.value.kind == "invalid_offset_format" and invalid.value.status == 500


@pytest.mark.parametrize(
    ("claim_body", "says"),
    [
        ({}, "A claim needs 'owner' (who writes: the Spark query id, or the operator's name)"),
        ({"owner": 7}, "'owner' must be a string, got a number"),
        (["me"], "A claim body is a JSON object"),
        (b"", 'A claim body is a JSON object, {"owner": "<who writes>", "force": false}; got no body'),
        (b"null", 'A claim body is a JSON object, {"owner": "<who writes>", "force": false}; got null'),
        ({"owner": "me", "force": "yes"}, "'force' must be true or false"),
        ({"owner": "me", "froce": True}, "Unrecognized field(s) ['froce'] in the request body; expected only 'owner'"),
    ],
)
def test_a_bad_claim_body_says_what_is_wrong_with_it(embedded_daemon: Any, claim_body: Any, says: str) -> None:
    name = unique("claim-body")
    with httpx.Client(base_url=embedded_daemon.url, timeout=60) as http:
        if isinstance(claim_body, bytes):  # sent as it is
            answer = http.post(
                f"/connectors/{name}/claim", content=claim_body, headers={"Content-Type": "application/json"}
            )
        else:
            answer = http.post(f"/connectors/{name}/claim", json=claim_body)
    assert_error(answer, 400, "invalid_request")
    assert answer.json()["message"].startswith(says)
