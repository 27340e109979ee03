"""Fuzzing a real daemon from its own /openapi.json: no unexpected 5xx, Connect's error body always.

Schemathesis generates requests from the document the daemon serves, both ones that fit it and
ones that break it (wrong types, missing fields, odd strings), for every operation; each answer is
checked as it comes, without stopping at the first finding, so the test reports everything it
met:

- no server error (5xx) except Connect's own documented 500s: ``validateFormat``'s refusal of an
  offset that is not a map of primitives (``invalid_offset_format``) and a sink's consumer-group
  call (``sink_offsets_failed``);
- every error answer is Connect's body, exactly ``{"error_code", "message"}``, in words (no Python
  repr of a validation error), and its status is one the document declares for the operation;
- every 200 body validates against the document.

Path parameters are half the time a connector that exists (with offsets, or under a claim), so
requests get past "not found" into the checks that follow. The run is seeded (``derandomize``) and
bounded in examples; docs/api.md gives its figures and the command.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from emulator.model.errors import ERROR_HEADER
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory, DaemonProcess

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION_AND_MODE = 25
"""Bounded so that the whole run stays well under a minute on the 2-core reference machine."""

CONNECTS_OWN_500S = {"invalid_offset_format", "sink_offsets_failed"}
"""Connect answers these with 500 too (``OffsetUtils.validateFormat``; ``Worker``'s sink-offset calls)."""

_REPR = re.compile(r"\{'type':|\[\{'|Traceback|Error\(|<[a-z_.]+ object at 0x")
"""What a message in words never contains: a Python repr, a traceback."""


@dataclass
class FuzzReport:
    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    bad_error_bodies: list[str] = field(default_factory=list)
    undeclared_statuses: list[str] = field(default_factory=list)
    bad_ok_bodies: list[str] = field(default_factory=list)
    not_generated: list[str] = field(default_factory=list)

    def findings(self) -> list[str]:
        return self.server_errors + self.bad_error_bodies + self.undeclared_statuses + self.bad_ok_bodies


def _seed(daemon: DaemonProcess) -> list[str]:
    """Connectors that exist when fuzzing starts: one with offsets, one claimed by someone."""
    run = uuid.uuid4().hex[:6]
    with_offsets, claimed = f"fuzz-offsets-{run}", f"fuzz-claimed-{run}"
    body = {"offsets": [{"partition": {"file": "in.txt"}, "offset": {"position": 7}}]}
    with httpx.Client(base_url=daemon.url, timeout=30) as http:
        for name in (with_offsets, claimed):
            assert http.patch(f"/connectors/{name}/offsets", json=body, params={"create": "true"}).status_code == 200
        assert http.post(f"/connectors/{claimed}/claim", json={"owner": "fuzz"}).status_code == 200
    return [with_offsets, claimed]


def fuzz(daemon: DaemonProcess, examples: int = EXAMPLES_PER_OPERATION_AND_MODE) -> FuzzReport:
    """Every operation of the daemon's document: schemathesis's coverage cases (each documented
    boundary, and one step past it; wrong types; missing parameters), then ``examples`` generated
    requests per generation mode. Collects every finding, never stops at one."""
    schema = schemathesis.openapi.from_url(f"{daemon.url}/openapi.json")
    document = schema.raw_schema
    known = _seed(daemon)
    report = FuzzReport()
    session = requests.Session()
    for result in schema.get_all_operations():
        operation = result.ok()
        declared = document["paths"][operation.path][operation.method.lower()]["responses"]

        def send(case: Any, known_connector: str | None) -> None:
            if known_connector is not None and "connector" in (case.path_parameters or {}):
                case.path_parameters["connector"] = known_connector
            response = case.call(session=session, timeout=30)
            _check(report, operation.label, declared, case, response, operation)  # noqa: B023 - called at once

        coverage = schema.iter_coverage_cases(
            operation,
            generation_modes=list(GenerationMode),
            generation_config=schema.config.generation_for(operation=operation),
        )
        for index, case in enumerate(coverage):
            send(case, known[index % len(known)] if index % 2 else None)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)

            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(data=st.data())
            def run(data: st.DataObject) -> None:
                case = data.draw(strategy)  # noqa: B023 - the test runs before the loop moves on
                send(case, data.draw(st.sampled_from(known)) if data.draw(st.booleans()) else None)

            try:
                run()
            except Unsatisfiable:  # nothing to break: an operation without parameters or body
                report.not_generated.append(f"{operation.label} ({mode.value})")
    session.close()
    return report


def _check(report: FuzzReport, label: str, declared: dict[str, Any], case: Any, response: Any, operation: Any) -> None:
    report.requests += 1
    status = response.status_code
    report.statuses[status] = report.statuses.get(status, 0) + 1
    where = f"{label}: {status} for {case.as_curl_command()}"
    if case.method.upper() != operation.method.upper():  # a method the path does not serve
        if status != 405:
            report.undeclared_statuses.append(f"{where} (expected 405: the path does not serve {case.method})")
        declared = {"405": "Method Not Allowed"}
    # schemathesis keeps header names as the server sent them (lower case over HTTP/1.1 from uvicorn)
    headers = {name.lower(): values for name, values in response.headers.items()}
    kind = (headers.get(ERROR_HEADER.lower()) or [None])[0]
    try:
        body = response.json()
    except ValueError:
        body = None
    if status >= 500 and kind not in CONNECTS_OWN_500S:
        report.server_errors.append(f"{where}\n    -> {response.text[:300]}")
    if str(status) not in declared:
        report.undeclared_statuses.append(where)
    if status >= 400 and label != "GET /readyz":
        if not (isinstance(body, dict) and set(body) == {"error_code", "message"} and body["error_code"] == status):
            report.bad_error_bodies.append(f"{where}\n    -> not Connect's error body: {response.text[:300]}")
        elif _REPR.search(str(body["message"])):
            report.bad_error_bodies.append(f"{where}\n    -> not in words: {body['message'][:300]}")
    if status == 200:
        try:
            operation.validate_response(response)
        except Exception as exc:  # schemathesis reports a group of failures; its text names them
            report.bad_ok_bodies.append(f"{where}\n    -> {str(exc)[:500]}")


def _assert_clean(report: FuzzReport, examples: int = EXAMPLES_PER_OPERATION_AND_MODE) -> None:
    findings = report.findings()
    summary = (
        f"{report.requests} requests, statuses {dict(sorted(report.statuses.items()))}; "
        f"{len(report.server_errors)} server error(s), {len(report.bad_error_bodies)} error body(ies) not "
        f"Connect's or not in words, {len(report.undeclared_statuses)} undeclared status(es), "
        f"{len(report.bad_ok_bodies)} 200 body(ies) not as documented"
    )
    assert report.requests >= 15 * examples * 2, f"fewer requests than operations x modes x examples: {summary}"
    assert not findings, f"{summary}:\n" + "\n".join(findings[:40])


@pytest.fixture
def fuzzed_embedded(daemon_factory: DaemonFactory) -> Iterator[DaemonProcess]:
    yield daemon_factory()


def test_the_embedded_daemon_survives_its_own_document(fuzzed_embedded: DaemonProcess) -> None:
    started = time.monotonic()
    report = fuzz(fuzzed_embedded)
    print(f"embedded: {report.requests} requests in {time.monotonic() - started:.1f} s, {report.statuses}")
    _assert_clean(report)


@pytest.mark.kafka
def test_a_kafka_daemon_survives_its_own_document(daemon_factory: DaemonFactory, kafka_broker: TansuBroker) -> None:
    daemon = daemon_factory(
        "--bootstrap-servers",
        kafka_broker.bootstrap,
        "--offsets-topic",
        f"fuzz-offsets-{uuid.uuid4().hex[:8]}",
        "--offsets-partitions",
        "3",
    )
    started = time.monotonic()
    examples = EXAMPLES_PER_OPERATION_AND_MODE // 2
    report = fuzz(daemon, examples)
    print(f"kafka: {report.requests} requests in {time.monotonic() - started:.1f} s, {report.statuses}")
    _assert_clean(report, examples)
