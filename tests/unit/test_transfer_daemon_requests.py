"""How an import through a daemon is cut into requests and how the answers are put back together
(``emulator.transfer.locations.daemon``); the daemon itself: tests/integration/test_transfer_daemon_requests.py."""

from __future__ import annotations

import io
import json
from base64 import b64decode
from typing import Any, ClassVar

import pytest

from emulator.client.errors import AnswerLost, ApiError, DaemonUnavailable
from emulator.formats.diff import compute_diff
from emulator.formats.model import KeyIndex, RawRecord, latest_per_key
from emulator.model.errors import WriteOutcomeUnknown, WritePartlyApplied
from emulator.transfer.locations.daemon import (
    _BODY_FRAME,
    DaemonLocation,
    _body,
    _by_connector,
    _merged,
    _pack,
    _record_bytes,
    _smaller_budget,
)
from emulator.transfer.options import TransferContext, TransferOptions
from emulator.transfer.progress import Progress


def ctx(dry_run: bool = False) -> TransferContext:
    return TransferContext(TransferOptions(dry_run=dry_run), Progress(enabled=False), "to")


def rec(connector: str, i: int, value: bytes | None = b'{"position":1}') -> RawRecord:
    return RawRecord(f'["{connector}",{{"f":{i}}}]'.encode(), value)


def body_size(records: list[RawRecord]) -> int:
    return len(json.dumps(_body(records), separators=(",", ":")).encode())


def test_the_size_estimate_is_the_body_sent_give_or_take_one_comma() -> None:
    records = [rec("a", 1), rec("a", 2, None), RawRecord(b"\x00\xff odd", b"x" * 1001)]
    assert _BODY_FRAME + sum(_record_bytes(r) for r in records) == body_size(records) + 1
    assert body_size([]) == _BODY_FRAME


def test_requests_hold_whole_connectors_in_source_order_under_the_budget() -> None:
    context = ctx()
    records = [rec("b", 0), rec("a", 0), rec("b", 1), *(rec("big", i) for i in range(40)), rec("a", 1)]
    records.append(RawRecord(b'"no connector"', b"1"))
    grouped = _by_connector(records, context)
    assert [context.keys.connector(r.key) for r in grouped][:4] == ["b", "b", "a", "a"], "first seen, then grouped"
    budget = _BODY_FRAME + 10 * _record_bytes(rec("big", 10))
    requests = _pack(grouped, budget, context)
    assert [r for request in requests for r in request] == grouped, "nothing lost, nothing reordered"
    assert all(_BODY_FRAME + sum(_record_bytes(r) for r in request) <= budget for request in requests)
    where: dict[str | None, set[int]] = {}
    for number, request in enumerate(requests):
        for record in request:
            where.setdefault(context.keys.connector(record.key), set()).add(number)
    assert len(where["a"]) == len(where["b"]) == len(where[None]) == 1, "a connector that fits goes whole"
    assert where["big"] == set(range(min(where["big"]), max(where["big"]) + 1)), "a large one in consecutive requests"


def test_a_record_larger_than_the_budget_goes_alone_and_no_records_make_one_empty_request() -> None:
    context = ctx()
    huge = RawRecord(b'["a",{"f":0}]', b"x" * 1000)
    assert _pack([rec("a", 1), huge, rec("a", 2)], 200, context) == [[rec("a", 1)], [huge], [rec("a", 2)]]
    assert _pack([], 200, context) == [[]]


def test_a_413_sends_the_rest_under_the_limit_it_names_else_in_halves() -> None:
    named = "Request body of 900000 bytes exceeds this daemon's limit of 65536 bytes (--max-body-bytes); …"
    assert _smaller_budget(named, 8 << 20, 900_000) == 65536 - 6553
    assert _smaller_budget("<html>413 Request Entity Too Large</html>", 8 << 20, 900_000) == 450_000


def diff_of(records: list[RawRecord], live: dict[bytes, bytes], limit: int | None) -> dict[str, Any]:
    return compute_diff(live.get, records, KeyIndex()).as_dict(limit)


@pytest.mark.parametrize("limit", [None, 1, 3])
def test_the_answers_of_several_requests_merge_into_the_diff_of_one(limit: int | None) -> None:
    records = [rec("a", i) for i in range(4)] + [rec("b", i) for i in range(5)] + [RawRecord(b"[]", b"1")]
    live = {rec("a", 0).key: b'{"position":1}', rec("b", 1).key: b'{"position":0}', rec("b", 2).key: b"9"}
    records.append(rec("b", 2, None))  # the last record of a key is the one planned
    whole = diff_of(records, live, limit)
    once = list(latest_per_key(records).values())  # as the location sends them: one record per key
    parts = [once[:2], once[2:6], once[6:]]
    merged = _merged([diff_of(part, live, limit) for part in parts], limit)
    assert merged["summary"] == whole["summary"] and merged["connectors"] == whole["connectors"]
    assert merged["entries_omitted"] == whole["entries_omitted"]
    assert sorted(map(json.dumps, merged["entries"])) == sorted(map(json.dumps, whole["entries"]))


class TestAFailedRequest:
    """What request 2 of 3 failing means for the import, 100 records having been applied by request 1."""

    location = DaemonLocation("http://daemon:8081")
    request: ClassVar[list[RawRecord]] = [rec("b", i) for i in range(30)]

    def stopped(self, exc: Exception, before: int = 100) -> Exception:
        return self.location._stopped(exc, 2, 3, self.request, before, 200, 4000)  # type: ignore[arg-type]

    def test_refused_after_others_is_partly_applied_and_run_again(self) -> None:
        error = self.stopped(ApiError(403, "Forbidden: b", "forbidden"))
        assert isinstance(error, WritePartlyApplied)
        assert error.message == (
            "http://daemon:8081 refused request 2 of 3 (30 records, HTTP 403): Forbidden: b; the first 100 of this "
            "write's 200 records were written before it and are in effect, the other 100 were not (running the same "
            "command again writes the rest)"
        )
        unreachable = self.stopped(DaemonUnavailable("cannot reach the connect-offsets daemon at …"))
        assert isinstance(unreachable, WritePartlyApplied) and "the first 100 of this write's 200" in str(unreachable)

    def test_of_unknown_outcome_after_others_says_which_may_still_land(self) -> None:
        for exc in (ApiError(503, "the log did not answer", "write_outcome_unknown"), AnswerLost("lost", "POST", "/")):
            error = self.stopped(exc)
            assert isinstance(error, WriteOutcomeUnknown), exc
            assert (
                "the first 100 of this write's 200 records were written before it and are in effect, the next 30 may "
            )
            assert "the next 30 may still be applied, the other 70 were not and will not be" in error.message

    def test_partly_applied_itself_counts_the_requests_before_it_too(self) -> None:
        daemon = "the first 10,000 of this write's 20,000 records were written … (sending the same request again "
        daemon += "writes the rest)"
        error = self.stopped(ApiError(503, daemon, "write_partly_applied"))
        assert isinstance(error, WritePartlyApplied)
        assert error.message.endswith(
            "the first 10,000 of this write's 20,000 records were written …; the 100 records of the requests before it "
            "are in effect too, the 70 after it were not sent (running the same command again writes the rest)"
        )

    def test_nothing_applied_before_it_is_the_error_as_it_came(self) -> None:
        refused = ApiError(400, "Connector b is not stopped", "not_stopped")
        assert self.stopped(refused, before=0) is refused
        one = DaemonLocation("http://d")._stopped(
            ApiError(413, "too large", "request_too_large"), 1, 1, [rec("a", 0)], 0, 1, 9
        )
        assert isinstance(one, ApiError) and one.message == (
            "too large; that request held one record alone (9 bytes of body), which no split makes smaller"
        )


class FakeDaemon:
    """``OffsetsClient`` as ``DaemonLocation.apply`` uses it: each body planned against ``live`` (and,
    unless a dry run, applied to it), a body over ``limit`` bytes answered 413 as the daemon words it."""

    live: ClassVar[dict[bytes, bytes]] = {}
    limit: ClassVar[int] = 1 << 30
    bodies: ClassVar[list[int]] = []

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def __enter__(self) -> FakeDaemon:
        return self

    def __exit__(self, *_args: object) -> None:
        pass

    def request(self, method: str, path: str, *, params: dict[str, str], json: dict[str, Any]) -> dict[str, Any]:
        size = body_size([]) + len(encoded(json)) - 2
        if size > self.limit:
            raise ApiError(413, f"Request body of {size} bytes exceeds this daemon's limit of {self.limit} bytes", "x")
        self.bodies.append(size)
        records = [
            RawRecord(b64decode(r["key"]), None if r["value"] is None else b64decode(r["value"]))
            for r in json["records"]
        ]
        diff = compute_diff(self.live.get, records, KeyIndex())
        written = diff.records_to_write()
        if params["dry_run"] == "false":
            for record in written:
                if record.value is None:
                    self.live.pop(record.key, None)
                else:
                    self.live[record.key] = record.value
        return {"diff": diff.as_dict(), "written": 0 if params["dry_run"] == "true" else len(written)}


def encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body["records"], separators=(",", ":")).encode()


@pytest.fixture
def fake_daemon(monkeypatch: pytest.MonkeyPatch) -> type[FakeDaemon]:
    monkeypatch.setattr("emulator.client.http.OffsetsClient", FakeDaemon)
    monkeypatch.setattr(FakeDaemon, "live", {})
    monkeypatch.setattr(FakeDaemon, "bodies", [])
    monkeypatch.setattr(FakeDaemon, "limit", 1 << 30)
    return FakeDaemon


def test_each_request_is_reported_and_the_answers_make_one_report(fake_daemon: type[FakeDaemon]) -> None:
    records = [rec("a", i) for i in range(6000)] + [rec("b", i) for i in range(6000)]
    budget = body_size(records[:5000])
    stream = io.StringIO()
    context = TransferContext(TransferOptions(), Progress(stream, every_s=3600), "to")
    result = DaemonLocation("http://d", request_bytes=budget).apply(records, context)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sending request 1 of 3 to http://d/offsets/records: 0/12000 records"
    assert "sending request 3 of 3 to http://d/offsets/records: " in lines[2]
    assert lines[3] == "sent 3 requests to http://d/offsets/records: 12000/12000 records"
    assert result.written == 12000 and result.diff["summary"]["added"] == 12000
    assert len(fake_daemon.live) == 12000 and all(size <= budget for size in fake_daemon.bodies)
    assert any("connector a did not fit in one request and went in 2 consecutive ones" in n for n in result.notes)


def test_a_413_naming_the_limit_sends_everything_under_it(fake_daemon: type[FakeDaemon]) -> None:
    fake_daemon.limit = 20_000
    records = [rec("a", i) for i in range(2000)]
    result = DaemonLocation("http://d").apply(records, ctx())
    assert result.written == 2000 and len(fake_daemon.live) == 2000
    assert all(size <= 20_000 for size in fake_daemon.bodies) and len(fake_daemon.bodies) > 1
    assert "(413: its limit is 20,000 bytes, --max-body-bytes)" in result.notes[0]


def test_a_413_for_a_single_record_is_the_daemons_refusal(fake_daemon: type[FakeDaemon]) -> None:
    fake_daemon.limit = 100
    with pytest.raises(ApiError, match="that request held one record alone"):
        DaemonLocation("http://d").apply([RawRecord(b'["a",{}]', b"x" * 200)], ctx())


def test_ctrl_c_during_a_request_says_what_the_daemon_applied_and_what_may_land(
    fake_daemon: type[FakeDaemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 21 #6: a Ctrl-C said only "what `import` had already sent may have been applied". The requests
    the daemon answered are in effect, the one under way may land, the rest was not sent."""
    from emulator.transfer.errors import TransferInterrupted

    records = [rec("a", i) for i in range(6000)] + [rec("b", i) for i in range(6000)]
    budget = body_size(records[:5000])
    answered = fake_daemon.request

    under_way: list[int] = []

    def request(self: FakeDaemon, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if len(fake_daemon.bodies) == 1:
            under_way.append(len(kwargs["json"]["records"]))
            raise KeyboardInterrupt
        return answered(self, *args, **kwargs)

    monkeypatch.setattr(FakeDaemon, "request", request)
    context = ctx()
    with pytest.raises(TransferInterrupted) as interrupted:
        DaemonLocation("http://d", request_bytes=budget).apply(records, context)
    first, second = len(fake_daemon.live), under_way[0]
    assert interrupted.value.detail == (
        f"had {first:,} of its 12,000 records applied by http://d, which are in effect; request 2 of 3 "
        f"({second:,} records) was under way and may have been applied; the other {12000 - first - second:,} were "
        "not sent: see what the daemon holds (the same command with --dry-run) before running it again"
    )
    assert context.writing and not interrupted.value.nothing_written


class RefusingDaemon(FakeDaemon):
    """Answers every request 401, as a daemon given no credentials does."""

    def request(self, method: str, path: str, **_kwargs: Any) -> dict[str, Any]:
        from emulator.client.errors import AuthenticationError

        raise AuthenticationError(401, "User cannot access the resource. (no credentials)", "unauthenticated")


@pytest.mark.parametrize("side", ["from", "to"])
def test_a_daemons_refusal_names_the_daemon_and_its_side(
    side: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    """QA 21 #7: ``migrate --from http://… --to https://…`` refused by one of the two printed ``error: User
    cannot access the resource. (no credentials) (HTTP 401)``: which daemon, and which side?"""
    from emulator.cli.main import main
    from emulator.formats import kip875

    monkeypatch.setattr("emulator.client.http.OffsetsClient", RefusingDaemon)
    body = tmp_path / "o.json"
    body.write_bytes(kip875.encode_file([rec("a", 1)]).data)
    daemon = "http://127.0.0.1:48801"
    ends = ["--from", daemon, "--to", str(body)] if side == "from" else ["--from", str(body), "--to", daemon]
    code = main(["migrate", *ends, "--quiet", "--yes"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(
        f"error: {daemon} (--{side}) answered: User cannot access the resource. (no credentials) (HTTP 401)"
    ), err


def test_a_401_says_which_flags_and_variables_give_credentials(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    """QA 21 #8: a 401 said "(no credentials)" in the daemon's terms; the CLI names its own ways in."""
    from emulator.cli.main import main

    monkeypatch.setattr("emulator.client.http.OffsetsClient", RefusingDaemon)
    monkeypatch.delenv("CONNECT_OFFSETS_TOKEN", raising=False)
    monkeypatch.delenv("CONNECT_OFFSETS_USER", raising=False)
    assert main(["export", "--from", "http://127.0.0.1:48801", "--to", str(tmp_path / "o.json"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[1] == (
        "hint: the daemon wants credentials: a bearer token (--token, or CONNECT_OFFSETS_TOKEN) or an HTTP Basic "
        "user (--user, or CONNECT_OFFSETS_USER, with the password in CONNECT_OFFSETS_PASSWORD)"
    ), err
    assert main(["export", "--to", str(tmp_path / "o.json"), "--url", "http://127.0.0.1:48801", "--token", "t"]) == 1
    err = capsys.readouterr().err
    assert "hint: the daemon did not accept the credentials given; it takes a bearer token (--token" in err, err


def test_https_to_a_plain_http_listener_says_to_use_its_http_url() -> None:
    """QA 21 #8: it said only ``[SSL: WRONG_VERSION_NUMBER]`` (the reverse case had a hint)."""
    import socket
    import threading

    from emulator.client.http import OffsetsClient

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def plain_http() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(4096)  # the TLS ClientHello
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

        threading.Thread(target=plain_http, daemon=True).start()
        with pytest.raises(DaemonUnavailable) as refused, OffsetsClient(f"https://127.0.0.1:{port}") as client:
            client.request("GET", "/connectors")
    said = str(refused.value)
    assert "WRONG_VERSION_NUMBER" in said, said
    hint = "; the daemon there answers plain HTTP (it was started without --tls-cert): use its http:// URL"
    assert said.endswith(hint), said
