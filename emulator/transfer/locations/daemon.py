"""A running daemon as a location: ``GET``/``POST /offsets/records``.

The daemon plans and checks an import itself (Connect's STOPPED rule against its cluster,
read-your-writes, its own live view) and answers the diff, so a transfer through it is the safe
way to write offsets while Connect runs.
"""

from __future__ import annotations

import base64
import re
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from emulator.client.credentials import Credentials, redact
from emulator.client.errors import OUTCOME_UNKNOWN, AnswerLost, ApiError, ClientError, DaemonUnavailable
from emulator.codec.shown import shown_name
from emulator.formats.diff import Change
from emulator.formats.model import Loaded, RawRecord, latest_per_key
from emulator.model.errors import (
    SEND_AGAIN,
    OffsetsError,
    WriteOutcomeUnknown,
    WritePartlyApplied,
    partly_unknown,
    partly_written,
)
from emulator.transfer.errors import LocationError, TransferInterrupted
from emulator.transfer.locations.base import Location
from emulator.transfer.locations.logs import RUN_AGAIN
from emulator.transfer.options import TransferContext
from emulator.transfer.report import ApplyResult
from emulator.transfer.selection import with_tombstones

REQUEST_BYTES: Final = 8 * 1024 * 1024
"""The most body an import sends in one ``POST /offsets/records``: a quarter of the daemon's default
``--max-body-bytes`` (``emulator.server.routes.params.DEFAULT_MAX_BODY_BYTES``, 32 MiB), so a daemon
whose limit was lowered still takes it, and one request's memory in the daemon (~28 times its body
while parsed and planned, docs/api.md) stays well within what it allows large bodies at once. A
daemon that answers 413 all the same tells its limit, and the rest goes in smaller requests."""
_SHRINKS: Final = 4
"""How many times an import makes its requests smaller after a 413 (each at most half the size)."""
_LIMIT = re.compile(r"limit of (\d+) bytes")
"""How the daemon's 413 names its ``--max-body-bytes`` (``emulator.server.routes.params._too_large``)."""
_BODY_FRAME: Final = len('{"records":[]}')
_RECORD_FRAME: Final = len('{"key":"","value":""},')
_TOMBSTONE_FRAME: Final = len('{"key":"","value":null},')


class DaemonLocation(Location):
    kind = "daemon"
    store = True

    def __init__(self, url: str, credentials: Credentials | None = None, request_bytes: int = REQUEST_BYTES) -> None:
        """``credentials`` left out: the process default (the environment's ``CONNECT_OFFSETS_TOKEN``
        and the like, see ``emulator.client.credentials``), or the URL's own ``user:password@``.
        ``request_bytes``: the most an import sends in one request's body (``REQUEST_BYTES``)."""
        self.url = url.rstrip("/")
        self.credentials = credentials
        self.request_bytes = request_bytes

    @property
    def description(self) -> str:
        return redact(self.url)

    def _call(
        self,
        method: str,
        path: str,
        ctx: TransferContext,
        params: dict[str, Any] | None = None,
        json: Any = None,
    ) -> Any:
        from emulator.client.http import OffsetsClient

        with OffsetsClient(self.url, timeout_s=ctx.options.timeout_s, credentials=self.credentials) as client:
            return client.request(method, path, params=params, json=json)

    def _export(self, ctx: TransferContext, connectors: Sequence[str], store: str | None) -> Loaded:
        params: dict[str, Any] = {}
        if connectors:
            params["connector"] = list(connectors)
        if store is not None:
            params["store"] = store
        body = self._call("GET", "/offsets/records", ctx, params=params or None)
        try:
            records = [
                RawRecord(
                    base64.b64decode(r["key"]),
                    None if r["value"] is None else base64.b64decode(r["value"]),
                    r.get("kafka_partition"),
                    r.get("offset"),
                    r.get("timestamp_ms"),
                )
                for r in body["records"]
            ]
            own_topics = sorted({(r["connector"], r["topic"]) for r in body["records"] if r.get("topic")})
            which, masked = body.get("store"), int(body.get("masked_worker_records", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{self.description}/offsets/records answered an unexpected body: {exc!r}") from exc
        if which is None and store not in (None, "worker"):
            raise LocationError(
                f"{self.description} does not know offsets stores (store={store} asked); it is older than this "
                "client and exports the worker's log only"
            )
        # The daemon answers in one response: the count is known, and reported, once it has arrived.
        ctx.progress.report(f"read {self.description}/offsets/records", len(records), len(records), force=True)
        return Loaded(records, _store_notes(which, own_topics, masked))

    def read(self, ctx: TransferContext) -> Loaded:
        with self._side(ctx):
            return self._export(ctx, sorted(ctx.options.connectors), ctx.options.store)

    @contextmanager
    def _side(self, ctx: TransferContext) -> Iterator[None]:
        """A daemon's refusal names the daemon and the side it is (``--from``/``--to``): a transfer between
        two daemons printed ``error: … (no credentials) (HTTP 401)`` without saying which one refused.
        (A daemon that cannot be reached is named by the client's own message, with its URL.)"""
        try:
            yield
        except ApiError as exc:
            if not exc.message.startswith(self.description):
                exc.message = f"{self.description} (--{ctx.role}) answered: {exc.message}"
                exc.args = (f"HTTP {exc.status}: {exc.message}",)
            raise

    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        with self._side(ctx):
            return self._apply(incoming, ctx)

    def _apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        """The daemon plans and checks the import itself (STOPPED rule, its live view) and answers the diff.

        The records go in requests of at most ``request_bytes`` of body each (``_pack``): whole connectors
        per request, a connector larger than that in consecutive requests in source order. Each request
        is planned, checked and applied by the daemon on its own; the answers are merged into one report.
        """
        from emulator.client.http import OffsetsClient

        if ctx.prune:  # what the daemon plans against: each connector as Connect reads it (its default store)
            incoming = with_tombstones(incoming, self._export(ctx, sorted(ctx.prune), None).records, ctx)
        params = {
            "dry_run": str(ctx.options.dry_run).lower(),
            "allow_malformed": str(ctx.options.malformed == "keep").lower(),
            "write_all": str(ctx.options.write_all).lower(),
        }
        if ctx.options.diff_limit is not None:
            params["diff_limit"] = str(ctx.options.diff_limit)
        # The daemon plans the last record per key (``compute_diff``): sending only that one, in the
        # order the keys first appear, changes nothing for one request, and for several it keeps a key
        # in one request, so that the answers' diffs add up to the diff of the whole import.
        records = list(latest_per_key(incoming).values())
        budget = self.request_bytes
        pending = deque(_pack(_by_connector(records, ctx), budget, ctx))
        answers: list[dict[str, Any]] = []
        notes: list[str] = []
        shrinks = 0
        sent = applied = 0  # records of the requests the daemon answered; of them, in effect (not a dry run)
        spread: Counter[str | None] = Counter()  # how many requests each connector's records went in
        where = f"{self.description}/offsets/records"
        with OffsetsClient(self.url, timeout_s=ctx.options.timeout_s, credentials=self.credentials) as client:
            while pending:
                request = pending.popleft()
                number, of = len(answers) + 1, len(answers) + 1 + len(pending)
                what = f"sending to {where}" if of == 1 else f"sending request {number} of {of} to {where}"
                ctx.progress.report(what, sent, len(records), force=True)
                ctx.writing = not ctx.options.dry_run
                try:
                    answer = client.request("POST", "/offsets/records", params=params, json=_body(request))
                except KeyboardInterrupt:
                    if ctx.options.dry_run:
                        raise  # only planned: the pipeline says nothing was changed
                    raise TransferInterrupted(
                        self._interrupted(number, of, len(request), applied, len(records))
                    ) from None
                except ApiError as exc:
                    size = _BODY_FRAME + sum(_record_bytes(r) for r in request)
                    if exc.status == 413 and len(request) > 1 and shrinks < _SHRINKS:
                        # Nothing of a body refused as too large was read, let alone written: send the
                        # rest in smaller requests (the daemon's limit is lower than the budget).
                        shrinks += 1
                        budget = _smaller_budget(exc.message, budget, size)
                        rest = [*request, *(r for later in pending for r in later)]
                        pending = deque(_pack(rest, budget, ctx))
                        named = _LIMIT.search(exc.message)
                        limit = f": its limit is {int(named.group(1)):,} bytes, --max-body-bytes" if named else ""
                        notes.append(
                            f"{self.description} refused a body of {size:,} bytes as too large (413{limit}); the "
                            f"rest was sent in requests of up to {budget:,} bytes"
                        )
                        continue
                    raise self._stopped(exc, number, of, request, applied, len(records), size) from exc
                except (AnswerLost, DaemonUnavailable) as exc:
                    if not applied:
                        raise
                    raise self._stopped(exc, number, of, request, applied, len(records), 0) from exc
                answers.append(answer)
                sent += len(request)
                applied = 0 if ctx.options.dry_run else sent
                spread.update({ctx.keys.connector(r.key) for r in request})
        if len(answers) > 1:
            ctx.progress.report(f"sent {len(answers)} requests to {where}", sent, len(records), force=True)
            done = "planned and checked" if ctx.options.dry_run else "checked and applied"
            notes.append(
                f"sent to {self.description} in {len(answers)} requests of up to {budget:,} bytes of body each: "
                f"the daemon {done} each on its own"
            )
            notes += [_split_note(name, count) for name, count in spread.items() if count > 1]
        unread = sum(int(a.get("unread_keys", 0)) for a in answers if isinstance(a, dict))
        if unread:
            verb = "would hold" if ctx.options.dry_run else "hold"
            notes.append(
                f"{unread} key(s) {verb} a value in bytes no converter writes (spaces, another number form): "
                "Connect lists their partitions, but no task reads these values and GET shows null"
            )
        try:
            # An older daemon does not check values and answers no count.
            return ApplyResult(
                _merged([a["diff"] for a in answers], ctx.options.diff_limit),
                sum(int(a["written"]) for a in answers),
                notes,
                unreadable_values=sum(int(a.get("unreadable_values", 0)) for a in answers),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{where} answered an unexpected body: {exc!r}") from exc

    def _interrupted(self, number: int, of: int, size: int, before: int, total: int) -> str:
        """Ctrl-C while request ``number`` of ``of`` (``size`` records) was under way, ``before`` records
        applied by the requests the daemon answered (completes "interrupted: `import` …")."""
        under_way = "its request" if of == 1 else f"request {number} of {of}"
        if before:
            said = f"had {before:,} of its {total:,} records applied by {self.description}, which are in effect; "
            said += f"{under_way} ({size:,} records) was under way and may have been applied"
        else:
            said = f"was sending {under_way} ({size:,} records) to {self.description}, which may have been applied"
        rest = total - before - size
        if rest:
            said += f"; the other {rest:,} were not sent"
        return f"{said}: see what the daemon holds (the same command with --dry-run) before running it again"

    def _stopped(
        self,
        exc: ClientError,
        number: int,
        of: int,
        request: list[RawRecord],
        before: int,
        total: int,
        size: int,
    ) -> Exception:
        """What request ``number`` of ``of`` failing with ``exc`` means for the whole import, ``before``
        records having been applied by the requests the daemon answered (0 in a dry run). Nothing applied
        before it: the error as it came (the CLI maps it to its exit code), unless part of this request
        is in effect and more requests were to follow. Earlier requests in effect: how many, and that
        running the same command again writes the rest, as a direct write's chunks say
        (``logs.LogLocation.apply``); exit 1, or 4 where this request's outcome is unknown."""
        after = total - before - len(request)
        if isinstance(exc, ApiError):
            said = f"{self.description} refused request {number} of {of} ({len(request):,} records, HTTP {exc.status})"
            said += f": {exc.message}"
            if exc.status == 413 and len(request) == 1:
                alone = f"; that request held one record alone ({size:,} bytes of body), which no split makes smaller"
                if not before:
                    return ApiError(exc.status, exc.message + alone, exc.kind)
                said += alone
        else:
            said = f"request {number} of {of} ({len(request):,} records): {exc}"
        if not before:
            if isinstance(exc, ApiError) and exc.kind == WritePartlyApplied.kind and after:
                return WritePartlyApplied(
                    f"{said.replace(f' ({SEND_AGAIN} writes the rest)', '')}; the {after:,} records after it were not "
                    f"sent ({RUN_AGAIN} writes the rest)"
                )
            return exc
        if isinstance(exc, AnswerLost) or (isinstance(exc, ApiError) and exc.kind == OUTCOME_UNKNOWN):
            return WriteOutcomeUnknown(partly_unknown(said, before, len(request), after, RUN_AGAIN))
        if isinstance(exc, ApiError) and exc.kind == WritePartlyApplied.kind:
            return WritePartlyApplied(
                f"{said.replace(f' ({SEND_AGAIN} writes the rest)', '')}; the {before:,} records of the requests "
                f"before it are in effect too, the {after:,} after it were not sent ({RUN_AGAIN} writes the rest)"
            )
        return partly_written(OffsetsError(said), before, total, RUN_AGAIN)


def _body(records: list[RawRecord]) -> dict[str, Any]:
    return {
        "records": [
            {
                "key": base64.b64encode(r.key).decode("ascii"),
                "value": None if r.value is None else base64.b64encode(r.value).decode("ascii"),
            }
            for r in records
        ]
    }


def _b64_bytes(raw: bytes) -> int:
    return (len(raw) + 2) // 3 * 4


def _record_bytes(record: RawRecord) -> int:
    """What ``record`` adds to a request's body (``_body`` as the client encodes it: compact JSON,
    base64 needing no escape), its separating comma included."""
    if record.value is None:
        return _TOMBSTONE_FRAME + _b64_bytes(record.key)
    return _RECORD_FRAME + _b64_bytes(record.key) + _b64_bytes(record.value)


def _by_connector(records: list[RawRecord], ctx: TransferContext) -> list[RawRecord]:
    """``records`` grouped by connector, each group in source order, the groups in the order their
    connectors first appear; keys Connect ignores (no connector) are a group of their own."""
    groups: dict[str | None, list[RawRecord]] = {}
    for record in records:
        groups.setdefault(ctx.keys.connector(record.key), []).append(record)
    return [record for group in groups.values() for record in group]


def _runs(records: list[RawRecord], ctx: TransferContext) -> Iterator[list[RawRecord]]:
    """The consecutive records of one connector (of ``_by_connector``'s order: one run per connector)."""
    run: list[RawRecord] = []
    for record in records:
        if run and ctx.keys.connector(record.key) != ctx.keys.connector(run[-1].key):
            yield run
            run = []
        run.append(record)
    if run:
        yield run


def _pack(records: list[RawRecord], budget: int, ctx: TransferContext) -> list[list[RawRecord]]:
    """The requests ``records`` (grouped by connector) go in: whole connectors, as many as fit in
    ``budget`` bytes of body; a connector larger than one request fills the rest of the current one and
    as many more as it needs, in source order. A record larger than the budget goes alone. At least one
    request, empty when there are no records (the daemon answers it with its empty diff, as before)."""
    requests: list[list[RawRecord]] = []
    current: list[RawRecord] = []
    size = _BODY_FRAME
    for run in _runs(records, ctx):
        sizes = [_record_bytes(r) for r in run]
        whole = _BODY_FRAME + sum(sizes)
        if current and size + whole - _BODY_FRAME > budget and whole <= budget:  # it fits in a request of its own
            requests.append(current)
            current, size = [], _BODY_FRAME
        for record, record_size in zip(run, sizes, strict=True):
            if current and size + record_size > budget:
                requests.append(current)
                current, size = [], _BODY_FRAME
            current.append(record)
            size += record_size
    if current or not requests:
        requests.append(current)
    return requests


def _smaller_budget(message: str, budget: int, size: int) -> int:
    """The budget after a 413 for a body of ``size`` bytes: under the limit the daemon's message names,
    else half of what was refused."""
    smaller = min(budget, size) // 2
    named = _LIMIT.search(message)
    if named is not None and int(named.group(1)) < size:
        limit = int(named.group(1))
        smaller = limit - limit // 10
    return max(smaller, 1)


def _merged(diffs: list[dict[str, Any]], limit: int | None) -> dict[str, Any]:
    """The daemon's answers to several requests as one ``Diff.as_dict``: no key is in two requests, so
    the counts add up; with ``limit`` (``diff_limit``), at most that many entries per connector are
    listed over all requests, changes first, and the rest counted in ``entries_omitted``."""
    if len(diffs) == 1:
        return diffs[0]
    summary: Counter[str] = Counter()
    connectors: dict[str, Counter[str]] = {}
    entries: list[dict[str, Any]] = []
    omitted = 0
    for diff in diffs:
        summary.update(diff["summary"])
        for name, counts in diff["connectors"].items():
            connectors.setdefault(name, Counter()).update(counts)
        entries += diff["entries"]
        omitted += int(diff.get("entries_omitted", 0))
    if limit is not None:
        taken: Counter[str | None] = Counter()
        listed = []
        for entry in sorted(entries, key=lambda e: e["status"] == Change.UNCHANGED.value):
            if taken[entry["connector"]] < limit:
                taken[entry["connector"]] += 1
                listed.append(entry)
            else:
                omitted += 1
        entries = listed
    return {
        "summary": {c.value: summary.get(c.value, 0) for c in Change},
        "connectors": {
            name: {c.value: counts.get(c.value, 0) for c in Change} for name, counts in sorted(connectors.items())
        },
        "entries": entries,
        "entries_omitted": omitted,
    }


def _split_note(connector: str | None, requests: int) -> str:
    name = "the keys Connect ignores" if connector is None else f"connector {shown_name(connector)}"
    return (
        f"the records of {name} did not fit in one request and went in {requests} consecutive ones: its import "
        "is not one atomic request (a refusal of a later one leaves the earlier ones in effect)"
    )


def _store_notes(which: str | None, own_topics: list[tuple[str, str]], masked: int) -> list[str]:
    """Say where the records came from when a connector's offsets are not (only) in the worker's log."""
    notes = []
    if own_topics:
        listed = ", ".join(f"{connector} from '{topic}'" for connector, topic in own_topics)
        notes.append(f"read store={which}: connectors with an offsets topic of their own were read from it ({listed})")
    if masked:
        notes.append(
            f"{masked} worker-topic record(s) of those connectors were left out: Connect does not read them "
            "(the connector's own topic wins); --store worker exports them"
        )
    return notes
