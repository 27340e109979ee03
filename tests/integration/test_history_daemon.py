"""The offsets history through a real daemon process on the embedded log: routes, CLI, restarts.

Times come from the log's own record timestamps (the embedded log stamps each commit), so tests
take their "as of" marks between writes with a few milliseconds of sleep on either side.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest

from emulator.client.errors import NotFoundError
from emulator.client.history import HistoryClient
from emulator.history.files import ReadReport, iter_file, scan_dir
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.times import parse_time_ms
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.disk_faults import block_archive_files
from tests.fixtures.waits import until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def mark() -> int:
    """A time strictly between the writes before and after it."""
    time.sleep(0.02)
    t = now_ms()
    time.sleep(0.02)
    return t


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--url", url)


def history(url: str, connector: str, **params: Any) -> dict[str, Any]:
    with HistoryClient(url) as client:
        return client.history(connector, limit=10_000, **params)


def patch(url: str, connector: str, offsets: list[dict[str, Any]]) -> None:
    with HistoryClient(url) as client:
        client.alter(connector, {"offsets": offsets}, create=True)


def log_records(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as conn:
        (count,) = conn.execute("SELECT count(*) FROM records").fetchone()
    return int(count)


@pytest.mark.slow
def test_history_survives_compaction_and_kill_9_restarts_without_duplicates(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    name = unique("compacted")
    daemon = daemon_factory("--data-dir", str(data))
    for n in range(5):
        patch(daemon.url, name, [{"partition": {"file": "a.txt"}, "offset": {"pos": n}}])
    with HistoryClient(daemon.url) as client:
        client.reset(name)
    assert len(history(daemon.url, name)["changes"]) == 6
    daemon.kill()

    compacted = EmbeddedOffsetLog(data)
    compacted.open()
    report = compacted.compact()
    compacted.close()
    assert report.records_after == 1, "the log keeps only the tombstone of the one key"

    for _restart in range(2):
        daemon = daemon_factory("--data-dir", str(data))
        changes = history(daemon.url, name)["changes"]
        assert [(c["origin"], c["operation"], c["offset"]) for c in changes] == [
            ("daemon", "DELETE", None),
            *[("daemon", "PATCH", {"pos": n}) for n in reversed(range(5))],
        ], "exactly the six changes: none lost to compaction, none duplicated by the replay"
        assert len({(c["kafka_partition"], c["kafka_offset"]) for c in changes}) == 6
        daemon.kill()


@pytest.mark.slow
def test_kill_9_while_writing_loses_nothing_and_duplicates_nothing(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    name = unique("kill9")
    daemon = daemon_factory("--data-dir", str(data))
    stop = threading.Event()

    def writer(worker: int) -> None:
        with httpx.Client(base_url=daemon.url, timeout=10) as http:
            n = 0
            while not stop.is_set():
                n += 1
                body = {"offsets": [{"partition": {"worker": worker}, "offset": {"n": n}}]}
                try:
                    http.patch(f"/connectors/{name}/offsets", json=body, params={"create": "true"})
                except httpx.TransportError:
                    return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    daemon.kill()
    stop.set()
    for t in threads:
        t.join(10)

    in_log = log_records(data)
    assert in_log > 20
    restarted = daemon_factory("--data-dir", str(data))
    changes = history(restarted.url, name)["changes"]
    coords = [(c["kafka_partition"], c["kafka_offset"]) for c in changes]
    assert len(coords) == len(set(coords)) == in_log, "every record of the log archived exactly once"


@pytest.mark.slow
def test_as_of_rollback_dry_run_and_rollback_through_the_cli(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    daemon = daemon_factory("--data-dir", str(tmp_path / "data"))
    name = unique("rollback")
    a, b, c = {"file": "a.txt"}, {"file": "b.txt"}, {"file": "c.txt"}
    patch(daemon.url, name, [{"partition": a, "offset": {"pos": 1}}, {"partition": b, "offset": {"pos": 10}}])
    t1 = mark()
    patch(daemon.url, name, [{"partition": a, "offset": {"pos": 2}}, {"partition": b, "offset": None}])
    t2 = mark()
    patch(daemon.url, name, [{"partition": a, "offset": {"pos": 3}}, {"partition": c, "offset": {"pos": 30}}])

    with HistoryClient(daemon.url) as client:
        with pytest.raises(NotFoundError, match="not found in the offsets history at or before"):
            client.offsets_as_of(name, t1 - 5_000)
        assert sorted(map(json.dumps, client.offsets_as_of(name, t1))) == sorted(
            map(json.dumps, [{"partition": a, "offset": {"pos": 1}}, {"partition": b, "offset": {"pos": 10}}])
        )
        assert client.offsets_as_of(name, t2) == [{"partition": a, "offset": {"pos": 2}}]
        now_state = sorted(map(json.dumps, client.offsets(name)))
        assert sorted(map(json.dumps, client.offsets_as_of(name, now_ms()))) == now_state
        records_before = len(client.history(name)["changes"])

    dry = cli(daemon.url, "rollback", name, "--to", str(t1), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Dry run: nothing was written. 3 record(s)" in dry.stdout
    assert "change   partition" in dry.stdout and '{"pos":3}  ->  {"pos":1}' in dry.stdout
    assert "restore" in dry.stdout and '(absent)  ->  {"pos":10}' in dry.stdout
    assert "delete" in dry.stdout and '{"pos":30}  ->  (delete)' in dry.stdout
    with HistoryClient(daemon.url) as client:
        assert sorted(map(json.dumps, client.offsets(name))) == now_state, "a dry run writes nothing"
        assert len(client.history(name)["changes"]) == records_before

    done = cli(daemon.url, "rollback", name, "--to", str(t1), "--json", "--yes")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dry_run"] is False
    with HistoryClient(daemon.url) as client:
        assert sorted(map(json.dumps, client.offsets(name))) == sorted(map(json.dumps, client.offsets_as_of(name, t1)))
        newest = client.history(name)["changes"][:3]
        assert {(ch["origin"], ch["operation"]) for ch in newest} == {("daemon", "rollback")}
        again = client.rollback(name, t1)
        assert again["changes"] == [] and "Nothing to roll back" in again["message"]

    shown = cli(daemon.url, "history", name, "--partition", json.dumps(b))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 4 and "daemon rollback" in lines[1] and "(deleted)" in lines[2], shown.stdout
    as_of = cli(daemon.url, "history", name, "--as-of", str(t2), "--json")
    assert json.loads(as_of.stdout) == {"offsets": [{"partition": a, "offset": {"pos": 2}}]}
    # --partition narrows --as-of (it was ignored); a list's flags are refused (they were ignored unchecked)
    at_t1 = cli(daemon.url, "history", name, "--as-of", str(t1), "--partition", json.dumps(b), "--json")
    assert json.loads(at_t1.stdout) == {"offsets": [{"partition": b, "offset": {"pos": 10}}]}, at_t1.stderr
    for extra in (["--from", "yesterday"], ["--to", str(t1)], ["--limit", "5"]):
        refused = cli(daemon.url, "history", name, "--as-of", str(t1), *extra)
        assert refused.returncode == 2 and refused.stdout == "", refused.stderr
        assert refused.stderr == (
            f"error: {extra[0]}: not with --as-of, which prints the offsets at one time (--partition narrows them "
            "to one partition); leave out --as-of to list changes\n"
        )


@pytest.mark.slow
def test_time_filters_bad_input_and_unknown_connectors(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    daemon = daemon_factory("--data-dir", str(tmp_path / "data"))
    name = unique("filters")
    patch(daemon.url, name, [{"partition": {"p": 1}, "offset": {"n": 1}}])
    t1 = mark()
    patch(daemon.url, name, [{"partition": {"p": 1}, "offset": {"n": 2}}])
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t1 / 1000)) + f".{t1 % 1000:03d}Z"
    assert [c["offset"] for c in history(daemon.url, name, to_time=iso)["changes"]] == [{"n": 1}]
    assert [c["offset"] for c in history(daemon.url, name, from_time=t1)["changes"]] == [{"n": 2}]
    page = history(daemon.url, name, partition={"p": 1.0})
    assert page["changes"] == [], "1.0 is not 1: partitions match as Java's Map.equals does"
    with HistoryClient(daemon.url) as client:
        limited = client.history(name, limit=1)
        assert limited["truncated"] is True and [c["offset"] for c in limited["changes"]] == [{"n": 2}]
    base = f"{daemon.url}/connectors/{name}/offsets"
    for url, params, status, text in [
        (base + "/history", {"from": "last tuesday"}, 400, "ISO-8601"),
        (base + "/history", {"from": "now", "to": "now-1h"}, 400, "'from' is later than 'to'"),
        (base + "/history", {"partition": "[1]"}, 400, "JSON object"),
        (base, {"as_of": "soon"}, 400, "ISO-8601"),
        (base, {"as_of": "now", "kind": "sink"}, 400, "as_of reads the history archive of source offsets"),
        (f"{daemon.url}/connectors/nobody-{uuid.uuid4().hex}/offsets/history", {}, 404, "consumer group's"),
        (base + "/rollback", {}, 400, "to"),
    ]:
        method = "POST" if url.endswith("rollback") else "GET"
        headers = {"Content-Type": "application/json"} if method == "POST" else None
        response = httpx.request(method, url, params=params, headers=headers, timeout=10)
        assert response.status_code == status, (url, response.text)
        assert text in response.json()["message"]


@pytest.mark.slow
def test_rotation_and_retention_flags_bound_the_archive(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    history_dir = tmp_path / "archive"
    daemon = daemon_factory(
        "--data-dir",
        str(tmp_path / "data"),
        "--history-dir",
        str(history_dir),
        "--history-rotate-bytes",
        "1",
        "--history-retention",
        "2s",
    )
    name = unique("retained")
    with HistoryClient(daemon.url) as client:
        for n in range(4):
            patch(daemon.url, name, [{"partition": {"p": n % 2}, "offset": {"n": n}}])
            # Waits until the reader delivered the write and the archiver wrote it, so each write is
            # a batch of its own (the reader takes whatever it finds at its next look).
            client.history(name)
        (log_dir,) = [p for p in history_dir.iterdir() if p.is_dir()]
        assert len(scan_dir(log_dir)[1]) == 4, "one file per archived batch with --history-rotate-bytes 1"
        deadline = time.monotonic() + 20
        while client.history_status()["files_folded_by_retention"] < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        base, live, _ = scan_dir(log_dir)
        assert base is not None and live == [], "files older than 2 s were folded into the base and deleted"
        assert [c["offset"] for c in client.history(name)["changes"]] == [{"n": 3}, {"n": 2}]
        assert sorted(map(json.dumps, client.offsets_as_of(name, now_ms()))) == sorted(
            map(json.dumps, client.offsets(name))
        )


@pytest.mark.slow
def test_a_damaged_archive_file_is_reported_and_the_rest_still_served(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--history-rotate-bytes", "1")
    name = unique("damaged")
    for n in range(3):
        patch(daemon.url, name, [{"partition": {"p": n}, "offset": {"n": n}}])
        history(daemon.url, name)  # archived before the next write: a file per write
    daemon.stop()
    (log_dir,) = [p for p in (data / "history").iterdir() if p.is_dir()]
    first = scan_dir(log_dir)[1][0]
    first.path.write_bytes(first.path.read_bytes()[:-25])

    restarted = daemon_factory("--data-dir", str(data), "--history-rotate-bytes", "1")
    page = history(restarted.url, name)
    assert [c["offset"] for c in page["changes"]] == [{"n": 2}, {"n": 1}]
    (damage,) = page["damaged_files"]
    assert damage["file"] == str(first.path) and "damaged block" in damage["problem"]
    shown = cli(restarted.url, "history", name)
    assert shown.returncode == 0 and f"warning: damaged archive file {first.path}: damaged block" in shown.stdout


@pytest.mark.slow
def test_no_history_disables_the_routes(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    daemon = daemon_factory("--data-dir", str(tmp_path / "data"), "--no-history")
    name = unique("nohist")
    patch(daemon.url, name, [{"partition": {"p": 1}, "offset": {"n": 1}}])
    response = httpx.get(f"{daemon.url}/connectors/{name}/offsets/history", timeout=10)
    assert response.status_code == 404 and "--no-history" in response.json()["message"]
    assert not (tmp_path / "data" / "history").exists()


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_relative_times_through_the_api_and_the_cli(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    daemon = daemon_factory("--data-dir", str(tmp_path / "data"))
    name = unique("relative")
    patch(daemon.url, name, [{"partition": {"p": 1}, "offset": {"n": 1}}])
    first = now_ms()
    time.sleep(4.0)  # "now-3s" falls between the writes until 3 s after the second (a CLI starts within that)
    patch(daemon.url, name, [{"partition": {"p": 1}, "offset": {"n": 2}}])

    recent = history(daemon.url, name, from_time="now-3s")["changes"]
    assert [c["offset"] for c in recent] == [{"n": 2}], "resolved by the daemon's clock when asked"
    past = httpx.get(f"{daemon.url}/connectors/{name}/offsets", params={"as_of": "now-3s"})
    assert past.status_code == 200 and past.json()["offsets"] == [{"partition": {"p": 1}, "offset": {"n": 1}}]

    dry = cli(daemon.url, "rollback", name, "--to", "now-3s", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "1 record(s) would roll" in dry.stdout and '{"n":2}  ->  {"n":1}' in dry.stdout
    shown = dry.stderr.strip().removeprefix("--to now-3s: ")
    assert first <= parse_time_ms(shown) <= now_ms() - 3000, dry.stderr
    assert shown in dry.stdout, "the plan names the time the CLI printed"

    bad = cli(daemon.url, "history", name, "--from", "now-1y")
    assert bad.returncode == 2
    assert "--from: invalid time 'now-1y'" in bad.stderr and "now-<duration> (e.g. now-1h" in bad.stderr
    refused = httpx.get(f"{daemon.url}/connectors/{name}/offsets/history", params={"from": "now-1y"})
    assert refused.status_code == 400 and "now-<duration>" in refused.json()["message"]


def test_the_spark_history_rows_find_and_ask_the_daemon_as_every_source_does(
    embedded_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the ``history=true`` rows ignored ``CONNECT_OFFSETS_URL`` (they asked 127.0.0.1:8081
    while the current rows asked the variable's daemon), and a bad ``limit`` or ``partition`` was a
    bare ``ValueError`` from inside the read."""
    from emulator.history.spark import rows as history_rows
    from emulator.spark.options import OptionError

    name = unique("spark-history")
    patch(embedded_daemon.url, name, [{"partition": {"f": "a"}, "offset": {"pos": 1}}])
    monkeypatch.setenv("CONNECT_OFFSETS_URL", embedded_daemon.url)
    assert [(r[0], r[7]) for r in history_rows({"connector": name})] == [(name, '{"pos":1}')]
    with pytest.raises(OptionError, match=r"^option limit must be an integer, got 'ten'$"):
        list(history_rows({"connector": name, "limit": "ten"}))
    with pytest.raises(OptionError, match=r"^option partition must be a JSON object such as .*, got '\[1\]'$"):
        list(history_rows({"connector": name, "partition": "[1]"}))


@pytest.mark.slow
def test_the_spark_history_rows_are_every_change_unless_a_limit_is_given(
    embedded_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route answers the newest 1,000 changes unless told otherwise: the rows were silently cut
    there. Without ``limit`` they are all of them, read a page at a time (pages of 300 here)."""
    import emulator.history.spark as history_spark
    from emulator.spark.options import OptionError

    name = unique("spark-history-all")
    with HistoryClient(embedded_daemon.url) as client:
        for position in range(1, 1201):
            client.alter(name, {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": position}}]}, create=True)
    monkeypatch.setattr(history_spark, "PAGE", 300)
    options = {"connector": name, "url": embedded_daemon.url}

    def latest() -> list[tuple[Any, ...]]:
        return list(history_spark.rows({**options, "limit": "1"}))

    until(lambda: [row[7] for row in latest()] == ['{"pos":1200}'], "archived to the last change")

    every = [json.loads(row[7])["pos"] for row in history_spark.rows(options)]
    newest = [json.loads(row[7])["pos"] for row in history_spark.rows({**options, "limit": "5"})]

    assert every == list(range(1, 1201)), "oldest first, none missing, none twice"
    assert newest == [1196, 1197, 1198, 1199, 1200]
    with pytest.raises(OptionError, match=r"^option limit must be at most 300 \(leave it out"):
        history_spark.check({**options, "limit": "301"})
    with pytest.raises(OptionError, match=r"^option from: invalid time 'yesterday': expected "):
        history_spark.check({**options, "from": "yesterday"})


@pytest.mark.slow  # waits for the archive, then reads it in pages
def test_a_patch_larger_than_a_page_is_paged_through_by_next(
    embedded_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One PATCH of 50 partitions: 50 changes in one millisecond. Paging with ``to`` could not get past
    them (``to=T`` repeated the page, ``to=T-1`` skipped the other 40); ``next`` reaches every one, and
    so do the Spark history rows, a page at a time."""
    import emulator.history.spark as history_spark

    name = unique("paged")
    patch(embedded_daemon.url, name, [{"partition": {"p": n}, "offset": {"n": n}} for n in range(50)])
    with HistoryClient(embedded_daemon.url) as client:
        until(lambda: len(client.history(name, limit=100)["changes"]) == 50, "archived")
        pages, before = [], None
        while True:
            page = client.history(name, limit=10, before=before)
            pages.append(page)
            if not page["truncated"]:
                break
            before = page["next"]
    seen = [c["partition"]["p"] for page in pages for c in page["changes"]]
    assert len(pages) == 5 and sorted(seen) == list(range(50)), "every change once, in five pages"
    assert "next" not in pages[-1]
    monkeypatch.setattr(history_spark, "PAGE", 10)
    rows = list(history_spark.rows({"connector": name, "url": embedded_daemon.url}))
    assert sorted(json.loads(row[7])["n"] for row in rows) == list(range(50))
    bad = httpx.get(f"{embedded_daemon.url}/connectors/{name}/offsets/history", params={"before": "yesterday"})
    assert bad.status_code == 400 and "before must be the 'next' of a history page" in bad.json()["message"]


def _damage_block_holding(log_dir: Path, value: bytes) -> Path:
    """Flip 50 bytes in the middle of the (only) block of the first closed file whose records hold ``value``."""
    for file in scan_dir(log_dir)[1]:
        if file.kind == "closed" and any(row["value"] == value for row in iter_file(file, ReadReport())):
            with file.path.open("rb") as f:
                (block,) = list(fastavro.block_reader(f))
            raw = bytearray(file.path.read_bytes())
            middle = block.offset + block.size // 2
            for i in range(middle - 25, middle + 25):
                raw[i] ^= 0x5A
            file.path.write_bytes(bytes(raw))
            return file.path
    raise AssertionError(f"no closed archive file holds {value!r}")


@pytest.mark.slow
def test_a_rollback_from_a_damaged_archive_is_refused_and_its_dry_run_and_as_of_say_unreliable(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """Before, the rollback wrote a state that never existed (the values of an older write, because the
    block holding the newer one was skipped), answered 200, and only printed a warning line after it."""
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--history-rotate-bytes", "1")
    name = unique("damaged-rollback")
    partitions = [{"p": n} for n in range(12)]
    for value in (55, 111):
        patch(daemon.url, name, [{"partition": p, "offset": {"n": value}} for p in partitions])
        history(daemon.url, name)  # archived before the next write: a file per write
    target = mark()
    patch(daemon.url, name, [{"partition": p, "offset": {"n": 300}} for p in partitions])
    history(daemon.url, name)
    daemon.stop()
    (log_dir,) = [p for p in (data / "history").iterdir() if p.is_dir()]
    damaged = _damage_block_holding(log_dir, b'{"n":111}')

    restarted = daemon_factory("--data-dir", str(data), "--history-rotate-bytes", "1")
    url = f"{restarted.url}/connectors/{name}/offsets/rollback"
    json_type = {"Content-Type": "application/json"}
    refused = httpx.post(url, params={"to": str(target)}, headers=json_type, timeout=30)
    assert refused.status_code == 409 and refused.headers["X-Connect-Offsets-Error"] == "history_damaged"
    message = refused.json()["message"]
    assert refused.json()["error_code"] == 409 and str(damaged) in message and "Nothing was written" in message
    assert "backup" in message and "allow_damaged=true" in message and "PATCH" in message

    shown = cli(restarted.url, "rollback", name, "--to", str(target), "--yes")
    assert shown.returncode == 1 and str(damaged) in shown.stderr and "--allow-damaged" in shown.stderr
    with HistoryClient(restarted.url) as client:
        assert {json.dumps(o["offset"]) for o in client.offsets(name)} == {'{"n": 300}'}, "nothing was written"

    dry = httpx.post(url, params={"to": str(target), "dry_run": "true"}, headers=json_type, timeout=30)
    assert dry.status_code == 200 and "UNRELIABLE" in dry.json()["message"] and str(damaged) in dry.json()["warning"]
    as_of = httpx.get(f"{restarted.url}/connectors/{name}/offsets", params={"as_of": str(target)}, timeout=30)
    assert as_of.status_code == 200 and as_of.headers["X-Offsets-History-Damaged-Files"] == "1"
    assert as_of.headers["X-Offsets-History-Warning"].startswith("UNRELIABLE: 1 damaged history archive file(s)")
    with HistoryClient(restarted.url) as client:  # the library and the CLI pass the warning on (they dropped it)
        past = client.past_offsets(name, target)
    assert past.damaged_files == 1 and past.warning == as_of.headers["X-Offsets-History-Warning"]
    assert past.offsets == as_of.json()["offsets"] and past.as_of == as_of.headers["X-Offsets-As-Of"]
    for json_flag in ([], ["--json"]):
        shown_as_of = cli(restarted.url, "history", name, "--as-of", str(target), *json_flag)
        assert shown_as_of.returncode == 0, shown_as_of.stderr
        assert shown_as_of.stderr.startswith("warning: UNRELIABLE: 1 damaged history archive file(s)"), shown_as_of

    forced = cli(restarted.url, "rollback", name, "--to", str(target), "--yes", "--allow-damaged")
    assert forced.returncode == 0, forced.stderr
    assert "allow_damaged=true: written although" in forced.stdout and str(damaged) in forced.stdout
    with HistoryClient(restarted.url) as client:
        written = {json.dumps(o["offset"]) for o in client.offsets(name)}
    # The rebuilt state, as asked: the partitions of the skipped block went back to 55, the others to 111
    # (the archiver writes a PATCH's records in slices, one file each here): a state that never existed.
    assert written == {'{"n": 55}', '{"n": 111}'}


@pytest.mark.slow
def test_a_log_that_lost_acknowledged_writes_is_said_plainly_by_status_and_the_history_listing(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The embedded log restored to a copy without its last acknowledged write (as a -wal file cut
    after ``kill -9`` leaves it): the daemon serves the older value and stays ready, which it may, but
    it used to say nothing else: /status warnings [], ``status`` "ready", the history listing showed
    the lost value first with no epoch, and the one ERROR line read "ends at offset 4 … holds its
    records up to offset 4". Now /status and ``status`` warn, name the epoch holding the earlier
    values and how to see them, the listing shows each change's epoch, and the line is unambiguous."""
    data = tmp_path / "data"
    name = unique("lost")
    daemon = daemon_factory("--data-dir", str(data))
    for n in range(4):
        patch(daemon.url, name, [{"partition": {"file": "a.txt"}, "offset": {"pos": n}}])
    daemon.stop()
    copy = {p.name: p.read_bytes() for p in data.iterdir() if p.name.startswith("connect-offsets.sqlite3")}
    daemon = daemon_factory("--data-dir", str(data))
    patch(daemon.url, name, [{"partition": {"file": "a.txt"}, "offset": {"pos": 4}}])  # acknowledged, then lost
    daemon.stop()
    for path in data.iterdir():
        if path.name.startswith("connect-offsets.sqlite3"):
            path.unlink()
    for file_name, content in copy.items():
        (data / file_name).write_bytes(content)

    restarted = daemon_factory("--data-dir", str(data))
    client = restarted.client()
    until(lambda: client.status()["history"]["epochs_started"] == 1, "the new epoch", timeout_s=30)
    status = client.status()
    assert status["ready"], "it serves the log as it is: ready, and now says so"
    (warning,) = status["warnings"]
    assert warning == status["history"]["warnings"][0]
    assert "the offsets log lost 1 record(s) it had acknowledged" in warning and "history epoch 0" in warning
    assert "as_of=now&epoch=0" in warning and "--as-of now --epoch 0" in warning

    shown = cli(restarted.url, "status")
    assert "warning: the offsets log lost 1 record(s)" in shown.stdout
    assert "epoch 1, begun since the start" in shown.stdout

    listing = cli(restarted.url, "history", name).stdout.splitlines()
    assert "EPOCH" in listing[0]
    rows = [line.split() for line in listing[1:] if line.startswith("20")]
    assert {(row[1], " ".join(row[-2:])) for row in rows} >= {("0", '{"pos": 4}'), ("1", '{"pos": 3}')}
    assert any(line.startswith("note: these changes span archive epochs 0, 1") for line in listing)
    assert client.offsets(name)[0]["offset"] == {"pos": 3}, "the daemon serves what the log holds"

    (line,) = [ln for ln in restarted.log_path.read_text().splitlines() if "Starting epoch 1" in ln]
    assert "the log ends before offset 4 (its last record is at offset 3)" in line
    assert "records up to offset 4 inclusive (offset 4: 1 offset(s) the log no longer has)" in line


@pytest.mark.slow  # the archiver stalls after its three quick attempts (1.5 s)
def test_a_connector_not_archived_yet_while_the_archiver_is_stalled_is_a_404_that_says_so(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The archive's disk full: a connector written since has nothing archived. Its history and
    ``as_of`` used to answer a bare 404 "not found in the offsets history", no warning header, though
    every other history answer says the archive is behind then. The 404 now says it too: in its
    message and in the same ``X-Offsets-History-Warning`` header."""
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--history-rotate-bytes", "1")
    patch(daemon.url, unique("first"), [{"partition": {"p": 0}, "offset": {"n": 0}}])  # the archive exists
    (log_dir,) = [p for p in (data / "history").iterdir() if p.is_dir()]
    blocked = block_archive_files(log_dir)  # every new file refused, as on a full disk
    name = unique("unarchived")
    patch(daemon.url, name, [{"partition": {"p": 1}, "offset": {"n": 1}}])
    client = daemon.client()
    until(lambda: client.status()["history"]["mode"] == "stalled", "the archiver stalled", timeout_s=30)

    for path, params in (
        (f"/connectors/{name}/offsets/history", {}),
        (f"/connectors/{name}/offsets", {"as_of": "now"}),
    ):
        answer = httpx.get(daemon.url + path, params=params, timeout=30)
        assert answer.status_code == 404, answer.text
        # The blocking directories hold archive files' names: the 404 also names them as unreadable.
        assert "not found in what could be read of the offsets history" in answer.json()["message"]
        assert "may not be archived yet" in answer.json()["message"]
        assert "the archiver cannot write for" in answer.headers["X-Offsets-History-Warning"]

    for path in blocked:  # the disk is back: the connector is archived, and found
        path.rmdir()
    until(lambda: client.status()["history"]["mode"] == "writing", "the archiver writing again", timeout_s=30)
    assert [c["offset"] for c in history(daemon.url, name)["changes"]] == [{"n": 1}]
