"""A running daemon as a location: ``GET``/``POST /offsets/records``.

The daemon plans and checks an import itself (Connect's STOPPED rule against its cluster,
read-your-writes, its own live view) and answers the diff, so a transfer through it is the safe
way to write offsets while Connect runs.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from emulator.client.credentials import Credentials, redact
from emulator.formats.model import Loaded, RawRecord
from emulator.transfer.errors import LocationError
from emulator.transfer.locations.base import Location
from emulator.transfer.options import TransferContext
from emulator.transfer.report import ApplyResult


class DaemonLocation(Location):
    kind = "daemon"
    store = True

    def __init__(self, url: str, credentials: Credentials | None = None) -> None:
        """``credentials`` left out: the process default (the environment's ``CONNECT_OFFSETS_TOKEN``
        and the like, see ``emulator.client.credentials``), or the URL's own ``user:password@``."""
        self.url = url.rstrip("/")
        self.credentials = credentials

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
        return self._export(ctx, sorted(ctx.options.connectors), ctx.options.store)

    def current(self, ctx: TransferContext, connectors: Sequence[str]) -> list[RawRecord]:
        """What a write here is diffed against: each connector as Connect reads it (the daemon's default)."""
        return self._export(ctx, connectors, None).records if connectors else []

    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        """The daemon plans and checks the import itself (STOPPED rule, its live view) and answers the diff."""
        params = {
            "dry_run": str(ctx.options.dry_run).lower(),
            "allow_malformed": str(ctx.options.malformed == "keep").lower(),
            "write_all": str(ctx.options.write_all).lower(),
        }
        if ctx.options.diff_limit is not None:
            params["diff_limit"] = str(ctx.options.diff_limit)
        body = {
            "records": [
                {
                    "key": base64.b64encode(r.key).decode("ascii"),
                    "value": None if r.value is None else base64.b64encode(r.value).decode("ascii"),
                }
                for r in incoming
            ]
        }
        ctx.progress.report(f"sending to {self.description}/offsets/records", len(incoming), len(incoming), force=True)
        result = self._call("POST", "/offsets/records", ctx, params=params, json=body)
        try:
            # An older daemon does not check values and answers no count.
            return ApplyResult(
                result["diff"], int(result["written"]), unreadable_values=int(result.get("unreadable_values", 0))
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{self.description}/offsets/records answered an unexpected body: {exc!r}") from exc


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
