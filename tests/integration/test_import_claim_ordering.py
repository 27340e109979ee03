"""A claim is ordered wholly before or wholly after an import (``POST /offsets/records``) through the same daemon.

An import takes the write sections of the connectors it names, checks that no connector it touches is claimed, and
then writes its records unfenced (``ImportSection.append``): the check in the section is its fence. A
claim used to take no section, so a claim made between the import's check and its write was answered,
and the import's records then landed after it without its epoch: the claim's holder (a Spark query
that resumes from what it reads) was not protected. Now a claim takes the connector's write section
(``ClaimsService.claim``): it waits for the import, and answers once the import's records are in the
log, before the claim.

The app runs in-process over the embedded log, so the import can be held between its check and its
write: the wrapper below stands in for the writer's ``append_now`` (the blocking log call, on a write
thread) of the import's records and waits for the test to open it.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from emulator.model.claims import held_message
from tests.fixtures.in_process import InProcessDaemon, embedded_in_process, in_thread
from tests.integration.connect_helpers import unique

HOLD_S = 3.0
"""How long the import is held after the claim was sent: unfixed, an embedded claim answered in milliseconds."""


Daemon = InProcessDaemon


@contextmanager
def daemon_in(directory: Path, write_timeout_s: float = 10.0) -> Iterator[Daemon]:
    with embedded_in_process(directory, write_timeout_s) as daemon:
        yield daemon


class ImportGate:
    """Stands in for the daemon writer's ``append_now``: a write of the worker's log without a connector
    (an import's records) waits for ``open`` first; every other write goes straight through."""

    def __init__(self, daemon: Daemon) -> None:
        writer = daemon.runtime.offsets._writer
        self.daemon = daemon
        self.real: Callable[..., None] = writer.append_now
        self.entered = threading.Event()
        self.open = threading.Event()
        writer.append_now = self  # type: ignore[method-assign]

    def __call__(self, connector: str | None, *args: Any) -> None:
        if connector is None:
            self.entered.set()
            assert self.open.wait(30), "the test never opened the gate"
            self.real(connector, *args)
            self.daemon.note("import written")
            return
        self.real(connector, *args)


def record(connector: str, file: str, pos: int) -> dict[str, str]:
    key = json.dumps([connector, {"file": file}], separators=(",", ":")).encode()
    value = json.dumps({"pos": pos}, separators=(",", ":")).encode()
    return {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}


def import_records(daemon: Daemon, connector: str, **positions: int) -> httpx.Response:
    body = {"records": [record(connector, f, p) for f, p in positions.items()]}
    return httpx.post(f"{daemon.url}/offsets/records", json=body, timeout=60)


def claim(daemon: Daemon, connector: str, owner: str = "spark-run") -> httpx.Response:
    return httpx.post(f"{daemon.url}/connectors/{connector}/claim", json={"owner": owner}, timeout=60)


def state(daemon: Daemon, connector: str) -> dict[str, int]:
    rows = httpx.get(daemon.offsets_url(connector), timeout=10).json()["offsets"]
    return {row["partition"]["file"]: row["offset"]["pos"] for row in rows}


def patch(daemon: Daemon, connector: str, **positions: int) -> httpx.Response:
    body = {"offsets": [{"partition": {"file": f}, "offset": {"pos": p}} for f, p in positions.items()]}
    return httpx.patch(daemon.offsets_url(connector), json=body, timeout=30)


def test_a_claim_sent_while_an_import_is_between_its_check_and_its_write_is_ordered_after_it(
    tmp_path: Path,
) -> None:
    name = unique("import-claim")
    with daemon_in(tmp_path) as daemon:
        seeded = import_records(daemon, name, a=1)
        assert seeded.status_code == 200, seeded.text
        assert state(daemon, name) == {"a": 1}

        gate = ImportGate(daemon)
        importing, imported = in_thread(lambda: import_records(daemon, name, a=5, b=5), daemon, "import answered")
        assert gate.entered.wait(10), "the import never reached its write"
        claiming, claimed = in_thread(lambda: claim(daemon, name), daemon, "claim answered")
        claiming.join(HOLD_S)
        daemon.note("gate opened")
        gate.open.set()
        importing.join(30)
        claiming.join(30)

        assert claimed and claimed[0].status_code == 200, claimed and claimed[0].text
        assert imported, "the import was never answered"
        epoch = claimed[0].json()["epoch"]
        if imported[0].status_code == 200:
            # The import went first: its records are in the log before the claim, which answered only after them.
            assert daemon.events.index("gate opened") < daemon.events.index("claim answered"), (
                f"the claim was answered while the import was between its check and its write: {daemon.events}"
            )
            assert daemon.events.index("import written") < daemon.events.index("claim answered"), daemon.events
            assert state(daemon, name) == {"a": 5, "b": 5}
        else:
            # The import was refused for the claim: nothing of it was written.
            assert imported[0].status_code == 400, imported[0].text
            assert imported[0].headers["X-Connect-Offsets-Error"] == "claim_held", imported[0].text
            assert state(daemon, name) == {"a": 1}

        # From here on the claim protects the connector: neither an import nor a PATCH without its epoch lands.
        holder = daemon.runtime.log.current_claim(name)
        assert holder is not None and holder.epoch == epoch
        before = state(daemon, name)
        refused = import_records(daemon, name, a=7)
        assert (refused.status_code, refused.json()["message"]) == (400, held_message(name, holder)), refused.text
        refused = patch(daemon, name, a=8)
        assert refused.status_code == 400, refused.text
        assert state(daemon, name) == before


def test_a_claim_that_does_not_get_the_connector_from_an_import_in_time_claims_nothing(tmp_path: Path) -> None:
    """The claim waits for the import's section within its own deadline (``--write-timeout``), then answers
    503 ``log_timeout`` saying nothing was claimed; nothing is claimed later either."""
    name = unique("import-claim")
    write_timeout_s = 1.5
    with daemon_in(tmp_path, write_timeout_s=write_timeout_s) as daemon:
        gate = ImportGate(daemon)
        importing, imported = in_thread(lambda: import_records(daemon, name, a=5), daemon, "import answered")
        try:
            assert gate.entered.wait(10), "the import never reached its write"
            sent = time.monotonic()
            refused = claim(daemon, name)
            took = time.monotonic() - sent
        finally:
            gate.open.set()
        importing.join(30)

        assert refused.status_code == 503, refused.text
        assert refused.headers["X-Connect-Offsets-Error"] == "log_timeout", refused.text
        assert refused.json()["message"] == (
            f"an import held connector {name} (with the others it names) for {write_timeout_s:g} s (--write-timeout): "
            "it is still being checked or written (or its log has not answered its write yet); nothing was claimed"
        )
        assert write_timeout_s - 0.1 <= took < write_timeout_s + 1.0, f"the claim answered after {took:.2f} s"
        assert imported and imported[0].status_code == 200, imported and imported[0].text
        assert state(daemon, name) == {"a": 5}
        assert httpx.get(f"{daemon.url}/connectors/{name}/claim", timeout=10).status_code == 404

        again = claim(daemon, name)
        assert again.status_code == 200, again.text
        assert again.json()["epoch"] == 1, again.json()


def test_an_import_holds_the_connectors_it_names_and_no_other(tmp_path: Path) -> None:
    """An import used to hold every connector's section while it was checked and written (a 150,000-record
    import: 21 s in the lane QA's run), so a PATCH of any other connector, Connect's own commits through
    the daemon included, waited and was refused at its deadline. It now holds only the connectors its
    records name."""
    name, other = unique("import-own"), unique("import-other")
    write_timeout_s = 1.5
    with daemon_in(tmp_path, write_timeout_s=write_timeout_s) as daemon:
        for connector in (name, other):
            seeded = import_records(daemon, connector, a=1)
            assert seeded.status_code == 200, seeded.text
        gate = ImportGate(daemon)
        importing, imported = in_thread(lambda: import_records(daemon, name, a=5), daemon, "import answered")
        try:
            assert gate.entered.wait(10), "the import never reached its write"
            sent = time.monotonic()
            written = patch(daemon, other, a=2)
            took = time.monotonic() - sent
            refused = patch(daemon, name, a=3)
        finally:
            gate.open.set()
        importing.join(30)

        assert written.status_code == 200, written.text
        assert took < write_timeout_s, f"the other connector's PATCH waited {took:.2f} s for the import"
        assert state(daemon, other) == {"a": 2}
        assert refused.status_code == 503, refused.text
        assert refused.headers["X-Connect-Offsets-Error"] == "log_timeout", refused.text
        assert refused.json()["message"] == (
            f"an import held connector {name} (with the others it names) for {write_timeout_s:g} s (--write-timeout): "
            "it is still being checked or written (or its log has not answered its write yet); nothing was written"
        )
        assert imported and imported[0].status_code == 200, imported and imported[0].text
        assert state(daemon, name) == {"a": 5}
