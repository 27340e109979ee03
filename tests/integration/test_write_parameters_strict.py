"""Our write parameters (``claim_epoch``, ``sequence_source``, ``sequence``) are read strictly.

They decide whether a write is fenced or dropped as stale, so a value the writer did not mean must be
refused, not guessed: integers are plain decimal digits (``+5`` or `` 5`` is not 5), ``sequence`` may
be negative but a claim's epoch is at least 1 (claims are numbered from 1: 0 or -1 was never issued and
is no fenced writer), an empty ``sequence_source`` names no source, and a repeated parameter is not
read as its last value. Each is a 400 ``invalid_request`` naming the parameter, nothing written
(docs/api.md, "Errors"; docs/claims-and-sequences.md).
"""

from __future__ import annotations

import httpx
import pytest

from emulator.model.errors import ERROR_HEADER
from tests.fixtures.daemon import DaemonProcess
from tests.integration.connect_helpers import unique

BODY = {"offsets": [{"partition": {"f": "p1"}, "offset": {"pos": 79}}]}
JSON = {"Content-Type": "application/json"}  # every POST needs it, even without a body


def patch(daemon: DaemonProcess, connector: str, query: str) -> httpx.Response:
    """A PATCH that may create the connector's offsets (``create=true``: no Connect cluster here)."""
    return httpx.patch(f"{daemon.url}/connectors/{connector}/offsets?create=true&{query}", json=BODY, timeout=10)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "sequence_source=run&sequence=%2B5",
            "Query parameter 'sequence' must be an integer in plain decimal digits with an optional leading '-', "
            "got '+5'",
        ),
        (
            "sequence_source=run&sequence=%205",
            "Query parameter 'sequence' must be an integer in plain decimal digits with an optional leading '-', "
            "got ' 5'",
        ),
        (
            "sequence_source=run&sequence=5_0",
            "Query parameter 'sequence' must be an integer in plain decimal digits with an optional leading '-', "
            "got '5_0'",
        ),
        ("sequence_source=&sequence=5", "Query parameter 'sequence_source' must not be empty"),
        ("sequence_source=%FE&sequence=5", "Query parameter 'sequence_source' is not valid UTF-8 once percent-decoded"),
        ("sequence_source=a%00b&sequence=5", "Query parameter 'sequence_source' may not contain control characters"),
        (
            "sequence_source=run&sequence=5&sequence=1",
            "Query parameter 'sequence' is given 2 times ('5', '1'); give it once",
        ),
        (
            "sequence_source=a&sequence_source=b&sequence=5",
            "Query parameter 'sequence_source' is given 2 times ('a', 'b'); give it once",
        ),
        ("claim_epoch=1&claim_epoch=2", "Query parameter 'claim_epoch' is given 2 times ('1', '2'); give it once"),
        (
            "claim_epoch=0",
            "Query parameter 'claim_epoch' must be at least 1 (a claim's epoch: claims are numbered from 1), got '0'",
        ),
        (
            "claim_epoch=-1",
            "Query parameter 'claim_epoch' must be an integer in plain decimal digits (a claim's epoch: claims are "
            "numbered from 1), got '-1'",
        ),
        (
            "claim_epoch=%2B1",
            "Query parameter 'claim_epoch' must be an integer in plain decimal digits (a claim's epoch: claims are "
            "numbered from 1), got '+1'",
        ),
    ],
)
def test_a_malformed_repeated_or_empty_write_parameter_is_refused_naming_it(
    embedded_daemon: DaemonProcess, query: str, message: str
) -> None:
    connector = unique("strict-params")

    answer = patch(embedded_daemon, connector, query)

    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error_code": 400, "message": message}
    assert answer.headers[ERROR_HEADER] == "invalid_request"
    assert httpx.get(f"{embedded_daemon.url}/connectors/{connector}/offsets", timeout=10).status_code == 404


def test_a_reset_refuses_an_epoch_no_claim_has(embedded_daemon: DaemonProcess) -> None:
    connector = unique("strict-reset")
    assert patch(embedded_daemon, connector, "").status_code == 200

    answer = httpx.delete(f"{embedded_daemon.url}/connectors/{connector}/offsets?claim_epoch=0", timeout=10)

    assert answer.status_code == 400, answer.text
    assert answer.headers[ERROR_HEADER] == "invalid_request"
    assert "'claim_epoch' must be at least 1" in answer.json()["message"]


def test_well_formed_parameters_are_still_accepted_a_negative_sequence_included(
    embedded_daemon: DaemonProcess,
) -> None:
    connector = unique("strict-ok")

    assert patch(embedded_daemon, connector, "sequence_source=run-c&sequence=-5").status_code == 200
    stale = patch(embedded_daemon, connector, "sequence_source=run-c&sequence=-6")

    assert stale.status_code == 200, stale.text
    assert [d["reason"] for d in stale.json()["dropped"]] == [
        "stale sequence -6 from source 'run-c': -5 was already applied"
    ]
    claim = httpx.post(f"{embedded_daemon.url}/connectors/{connector}/claim", json={"owner": "o"}, timeout=10).json()
    assert patch(embedded_daemon, connector, f"claim_epoch={claim['epoch']}").status_code == 200
    assert httpx.delete(
        f"{embedded_daemon.url}/connectors/{connector}/claim", params={"epoch": claim["epoch"]}, timeout=10
    ).is_success


def test_the_openapi_document_says_the_same(embedded_daemon: DaemonProcess) -> None:
    document = httpx.get(f"{embedded_daemon.url}/openapi.json", timeout=10).json()
    operations = document["paths"]["/connectors/{connector}/offsets"]
    patch_params = {p["name"]: p["schema"] for p in operations["patch"]["parameters"] if p["in"] == "query"}
    delete_params = {p["name"]: p["schema"] for p in operations["delete"]["parameters"] if p["in"] == "query"}

    assert patch_params["claim_epoch"]["minimum"] == delete_params["claim_epoch"]["minimum"] == 1
    assert patch_params["sequence_source"] == {"type": "string", "minLength": 1}
    assert patch_params["sequence"]["minimum"] == -(2**63)


@pytest.mark.parametrize(
    ("method", "path", "write"),
    [
        ("PATCH", "offsets", "a PATCH"),
        ("DELETE", "offsets", "a DELETE"),
        ("POST", "offsets/rollback?to=now", "a rollback"),
    ],
)
def test_store_is_refused_on_writes_which_go_where_connect_writes(
    embedded_daemon: DaemonProcess, method: str, path: str, write: str
) -> None:
    """``store`` picks what a read shows. Ignored on a write like an unknown parameter, ``DELETE
    ?store=connector`` looked like a reset of one store and reset both (cluster QA)."""
    connector = unique("store-on-write")
    assert patch(embedded_daemon, connector, "").status_code == 200
    separator = "&" if "?" in path else "?"
    url = f"{embedded_daemon.url}/connectors/{connector}/{path}{separator}store=connector"

    answer = httpx.request(method, url, json=BODY if method == "PATCH" else None, timeout=10, headers=JSON)

    assert answer.status_code == 400, answer.text
    assert answer.headers[ERROR_HEADER] == "invalid_request"
    assert answer.json()["message"].startswith(f"Query parameter 'store' picks what a read shows; {write} writes")
    listed = httpx.get(f"{embedded_daemon.url}/connectors/{connector}/offsets", timeout=10).json()
    assert listed["offsets"] == [{"partition": {"f": "p1"}, "offset": {"pos": 79}}], "nothing was written"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "epoch=0",
            "Query parameter 'epoch' must be at least 1 (a claim's epoch: claims are numbered from 1), got '0'",
        ),
        (
            "epoch=%2B1",
            "Query parameter 'epoch' must be an integer in plain decimal digits (a claim's epoch: claims are "
            "numbered from 1), got '+1'",
        ),
        ("epoch=1&epoch=2", "Query parameter 'epoch' is given 2 times ('1', '2'); give it once"),
    ],
)
def test_a_claims_release_reads_its_epoch_as_strictly(embedded_daemon: DaemonProcess, query: str, message: str) -> None:
    connector = unique("strict-release")
    assert patch(embedded_daemon, connector, "").status_code == 200
    claim = httpx.post(f"{embedded_daemon.url}/connectors/{connector}/claim", json={"owner": "o"}, timeout=10).json()
    assert claim["epoch"] == 1

    answer = httpx.delete(f"{embedded_daemon.url}/connectors/{connector}/claim?{query}", timeout=10)

    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error_code": 400, "message": message}
    still = httpx.get(f"{embedded_daemon.url}/connectors/{connector}/claim", timeout=10)
    assert still.status_code == 200 and still.json()["epoch"] == 1, "the claim was not released"
