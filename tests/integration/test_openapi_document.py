"""The daemon's /openapi.json tells the truth: the statuses it answers, the bodies it sends, no 422.

A client generated from the document, or a fuzzer reading it, must meet the daemon it describes.
So the document is walked (every operation declares a typed 200, Connect's error body for each
error status, and never FastAPI's 422, which this daemon does not answer), and then a real daemon
is asked, through every route, for successes and for each kind of refusal: every answer's status
must be declared for its operation and its body must validate against the declared schema
(schemathesis's own response validation, so ``$ref``, ``anyOf`` and nullable fields are read as a
client would).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis.specs.openapi.schemas import OpenApiSchema

from emulator.model.errors import ERROR_HEADER
from tests.fixtures.daemon import DaemonProcess
from tests.integration.connect_helpers import unique

METHODS = ("get", "put", "post", "delete", "patch")
ERROR_BODY = "#/components/schemas/ErrorBody"


@pytest.fixture(scope="module")
def document(embedded_daemon: DaemonProcess) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{embedded_daemon.url}/openapi.json", timeout=10).json()
    return answer


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def test_no_operation_declares_fastapis_422(document: dict[str, Any]) -> None:
    declaring = [f"{m.upper()} {p}" for p, m, op in operations(document) if "422" in op["responses"]]
    assert declaring == []
    assert not {"HTTPValidationError", "ValidationError"} & set(document["components"]["schemas"])


def test_every_operation_declares_a_typed_200_and_connects_error_body(document: dict[str, Any]) -> None:
    for path, method, operation in operations(document):
        where = f"{method.upper()} {path}"
        responses = operation["responses"]
        if path == "/metrics":  # Prometheus' text format, not JSON: a string body of that media type
            (media_type,) = responses["200"]["content"]
            assert media_type.startswith("text/plain") and responses["200"]["content"][media_type]["schema"] == {
                "type": "string"
            }, f"{where}: {responses['200']}"
            continue
        ok = responses["200"]["content"]["application/json"]["schema"]
        items = ok.get("items", {}) if ok.get("type") == "array" else {}
        typed = "$ref" in ok or "anyOf" in ok or items.get("type") == "string" or "$ref" in items
        assert typed, f"{where}: untyped 200 body {ok}"
        for status, response in responses.items():
            if status == "200":
                continue
            assert 400 <= int(status) <= 599, f"{where}: {status}"
            schema = response["content"]["application/json"]["schema"]
            headers = response.get("headers", {})
            assert ERROR_HEADER in headers, f"{where} {status}: the kind header is not declared"
            if (path, status) == ("/readyz", "503"):
                assert schema == {"$ref": "#/components/schemas/NotReadyBody"}
                assert "Retry-After" not in headers, "/readyz reports; it never asks to come back"
            else:
                assert schema == {"$ref": ERROR_BODY}, f"{where} {status}: {schema}"
                assert ("Retry-After" in headers) == (status == "503"), f"{where} {status}: {sorted(headers)}"
    error_body = document["components"]["schemas"]["ErrorBody"]
    assert error_body["required"] == ["error_code", "message"] and error_body["additionalProperties"] is False


class Checker:
    """Sends requests and checks each answer against the document: declared status, valid body."""

    def __init__(self, daemon: DaemonProcess, schema: OpenApiSchema, document: dict[str, Any]) -> None:
        # Writes carry the JSON content type, bodies or not (the daemon answers 415 otherwise).
        self.http = httpx.Client(base_url=daemon.url, timeout=30, headers={"content-type": "application/json"})
        self.schema = schema
        self.document = document
        self.seen: set[tuple[str, str, str]] = set()

    def __call__(self, method: str, route: str, status: int, path: str | None = None, **kwargs: Any) -> Any:
        response = self.http.request(method, path or route, **kwargs)
        assert response.status_code == status, f"{method} {path or route}: {response.status_code} {response.text}"
        declared = self.document["paths"][route][method.lower()]["responses"]
        assert str(status) in declared, f"{method} {route} answered {status}, which its operation does not declare"
        self.schema[route][method.upper()].validate_response(response)
        if status >= 400 and route != "/readyz":
            body = response.json()
            assert set(body) == {"error_code", "message"} and body["error_code"] == status
            assert response.headers.get(ERROR_HEADER) or status == 405
        self.seen.add((method.lower(), route, str(status)))
        return response.json() if response.headers["content-type"].startswith("application/json") else response.text


@pytest.fixture(scope="module")
def check(embedded_daemon: DaemonProcess, document: dict[str, Any]) -> Iterator[Checker]:
    schema = schemathesis.openapi.from_dict(document)
    checker = Checker(embedded_daemon, schema, document)
    yield checker
    checker.http.close()


OFFSETS = "/connectors/{connector}/offsets"
CLAIM = "/connectors/{connector}/claim"
HISTORY = "/connectors/{connector}/offsets/history"
ROLLBACK = "/connectors/{connector}/offsets/rollback"


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"file": "a"}, "offset": {"position": position}}]}


def test_real_answers_have_declared_statuses_and_bodies_that_match_the_document(
    check: Checker, document: dict[str, Any]
) -> None:
    name = unique("doc")
    offsets, claim = f"/connectors/{name}/offsets", f"/connectors/{name}/claim"

    check("GET", "/healthz", 200)
    check("GET", "/readyz", 200)
    check("GET", "/status", 200)
    check("PATCH", OFFSETS, 404, offsets, json=body(1))
    check("PATCH", OFFSETS, 200, offsets, json=body(1), params={"create": "true"})
    before = int(time.time() * 1000)
    check("PATCH", OFFSETS, 200, offsets, json=body(2), params={"dry_run": "true"})
    check("PATCH", OFFSETS, 200, offsets, json=body(3), params={"sequence_source": "s", "sequence": "5"})
    dropped = check("PATCH", OFFSETS, 200, offsets, json=body(2), params={"sequence_source": "s", "sequence": "4"})
    assert dropped["dropped"], "a stale sequence is listed, so the 'dropped' shape is checked too"
    check("PATCH", OFFSETS, 400, offsets, json={"offsets": []})
    check("PATCH", OFFSETS, 500, offsets, json={"offsets": [{"partition": {"f": "a"}, "offset": {"p": [1]}}]})
    check("GET", "/connectors", 200)
    check("GET", OFFSETS, 200, offsets)
    check("GET", OFFSETS, 404, f"/connectors/{unique('nobody')}/offsets")
    check("GET", OFFSETS, 400, offsets, params={"kind": "both"})
    check("GET", OFFSETS, 200, offsets, params={"as_of": str(int(time.time() * 1000) + 1000)})
    check("GET", OFFSETS, 400, offsets, params={"as_of": "yesterday-ish"})

    epoch = check("POST", CLAIM, 200, claim, json={"owner": "doc-test"})["epoch"]
    check("POST", CLAIM, 400, claim, json={"owner": " "})
    check("GET", CLAIM, 200, claim)
    listed = check("GET", "/claims", 200)
    assert [c for c in listed if c["connector"] == name] == [check("GET", CLAIM, 200, claim)]
    check("PATCH", OFFSETS, 400, offsets, json=body(9))
    check("PATCH", OFFSETS, 409, offsets, json=body(9), params={"claim_epoch": str(epoch + 7)})
    check("PATCH", OFFSETS, 200, offsets, json=body(9), params={"claim_epoch": str(epoch)})
    check("DELETE", CLAIM, 400, claim, params={"epoch": "latest"})
    check("DELETE", CLAIM, 404, claim, params={"epoch": str(epoch + 7)})
    check("DELETE", CLAIM, 200, claim, params={"epoch": str(epoch)})
    check("GET", CLAIM, 404, claim)

    check("GET", HISTORY, 200, f"{offsets}/history", params={"limit": "5"})
    check("GET", HISTORY, 404, f"/connectors/{unique('nobody')}/offsets/history")
    check("GET", HISTORY, 400, f"{offsets}/history", params={"limit": "0"})
    check("POST", ROLLBACK, 200, f"{offsets}/rollback", params={"to": str(before), "dry_run": "true"})
    check("POST", ROLLBACK, 200, f"{offsets}/rollback", params={"to": str(before)})
    check("POST", ROLLBACK, 400, f"{offsets}/rollback", params={"to": "soon"})
    check("POST", ROLLBACK, 404, f"/connectors/{unique('nobody')}/offsets/rollback", params={"to": str(before)})
    check("GET", "/history/status", 200)

    records = check("GET", "/offsets/records", 200, params={"connector": name})["records"]
    again = {"records": [{"key": r["key"], "value": r["value"]} for r in records]}
    check("POST", "/offsets/records", 200, json=again, params={"dry_run": "true"})
    check("POST", "/offsets/records", 200, json=again, params={"write_all": "true"})
    check("POST", "/offsets/records", 400, json={"records": "none"})

    check("DELETE", OFFSETS, 200, offsets, params={"dry_run": "true"})
    check("DELETE", OFFSETS, 200, offsets)
    check("DELETE", OFFSETS, 400, offsets, params={"dry_run": "maybe"})

    metrics = check("GET", "/metrics", 200)
    assert "connect_offsets_" in metrics, metrics[:300]

    answered = {(method, path) for method, path, status in check.seen if status == "200"}
    assert answered == {(m, p) for p, m, _ in operations(document)}, "every operation was seen answering 200"


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        (
            "/connectors/x/offsets",
            {"claim_epoch": "abc"},
            "Query parameter 'claim_epoch' must be an integer, got 'abc'",
        ),
        ("/connectors/x/offsets", {"dry_run": "maybe"}, "Query parameter 'dry_run' must be true or false, got 'maybe'"),
        ("/connectors/x/claim", {}, "Query parameter 'epoch' is required"),
        ("/offsets/records", {"diff_limit": "0"}, "Query parameter 'diff_limit' must be at least 1, got '0'"),
    ],
)
def test_a_parameter_of_the_wrong_type_is_one_plain_sentence_naming_it(
    embedded_daemon: DaemonProcess, path: str, params: dict[str, str], message: str
) -> None:
    method = {"/connectors/x/offsets": "PATCH", "/connectors/x/claim": "DELETE", "/offsets/records": "POST"}[path]
    answer = httpx.request(method, f"{embedded_daemon.url}{path}", params=params, json={"records": []}, timeout=10)
    assert answer.status_code == 400
    assert answer.json() == {"error_code": 400, "message": message}
    assert answer.headers[ERROR_HEADER] == "invalid_request"


def request_schema(document: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    schema: dict[str, Any] = document["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    return schema


def parameter_schema(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    (schema,) = [p["schema"] for p in document["paths"][path][method]["parameters"] if p["name"] == name]
    return dict(schema)


def test_the_document_refuses_what_the_daemon_refuses(embedded_daemon: DaemonProcess, document: dict[str, Any]) -> None:
    """A request the document allows must not be refused for its shape (API fuzz QA: schemathesis
    counted ~700 "schema-valid request rejected"). Each constraint here is checked against the daemon."""
    from jsonschema_rs import validator_for

    name = unique("doc-rules")
    url = f"{embedded_daemon.url}/connectors/{name}"
    created = httpx.patch(
        f"{url}/offsets?create=true", json={"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}, timeout=10
    )
    assert created.status_code == 200, created.text
    claim = request_schema(document, "/connectors/{connector}/claim", "post")
    for body in ({"owner": ""}, {"owner": "  "}, {"owner": "o", "extra": 1}):
        assert not validator_for(claim).is_valid(body), body
        assert httpx.post(f"{url}/claim", json=body, timeout=10).status_code == 400, body
    alter = request_schema(document, "/connectors/{connector}/offsets", "patch")
    for body in (
        {"offsets": [{"partition": {"f": 1}, "offset": None}], "extra": 1},
        {"offsets": [{"partition": {"f": 1}, "offset": None, "extra": 1}]},
    ):
        assert not validator_for(alter).is_valid(body), body
        assert httpx.patch(f"{url}/offsets?create=true", json=body, timeout=10).status_code == 400, body
    store = parameter_schema(document, "/connectors/{connector}/offsets", "get", "store")
    assert not validator_for(store).is_valid("sideways")
    assert httpx.get(f"{url}/offsets", params={"store": "sideways"}, timeout=10).status_code == 400
    release = parameter_schema(document, "/connectors/{connector}/claim", "delete", "epoch")
    assert not validator_for(release).is_valid(0)
    assert httpx.delete(f"{url}/claim", params={"epoch": "0"}, timeout=10).status_code == 400
    connector = parameter_schema(document, "/connectors/{connector}/offsets", "get", "connector")
    assert not validator_for(connector).is_valid("a\x01b")
    assert httpx.get(f"{embedded_daemon.url}/connectors/a%01b/offsets", timeout=10).status_code == 400
    assert validator_for(connector).is_valid("caf\u00e9 name")
