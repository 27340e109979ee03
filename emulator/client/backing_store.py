"""Connect's ``OffsetBackingStore`` contract, served by the daemon, for Python engines.

A Python engine that hosts connectors (or imitates one) can keep its offsets in the daemon with
the same calls Connect's workers make on their store — ``configure``, ``start``, ``stop``,
``get(keys)`` and ``set(values, callback)`` returning futures, ``connector_partitions(name)`` —
and so share one offset history with real Connect workers and Spark jobs. Keys and values are
the raw bytes (``["<connector>",{…}]`` / offset JSON), exactly as in the offsets topic; lookups are
byte-exact, as ``KafkaOffsetBackingStore``'s are.

Seeding from a saved engine state: Flink CDC and RisingWave restore a Debezium engine from a state
string (``{"sourcePartition":…,"sourceOffset":…}``) passed as ``offset.storage.flink.state.value``
/ ``offset.storage.risingwave.state.value``; ``configure`` accepts the same properties and writes
that state through, under the engine's name (``name``, default ``engine`` as in Flink CDC), as
their ``FlinkOffsetBackingStore`` / ``ConfigurableOffsetBackingStore`` do.

A daemon that requires authentication takes ``offset.storage.token`` (or ``offset.storage.user``
and ``offset.storage.password``), and for ``https://`` ``offset.storage.ca`` (and
``offset.storage.client.cert``/``offset.storage.client.key`` for mutual TLS); each falls back to
its ``CONNECT_OFFSETS_*`` variable. A token scoped ``write:<engine>`` is enough: the store reads
and writes only its own connector's records.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Collection, Mapping
from typing import Any

from emulator.client.credentials import Credentials
from emulator.client.http import DEFAULT_URL, OffsetsClient
from emulator.codec.keys import KeyProblem, parse_key
from emulator.formats.cdc_state import FLINK_DEFAULT_ENGINE, parse_state, state_to_entry

URL_PROPERTY = "offset.storage.url"
CREDENTIAL_PROPERTIES = {
    "token": "offset.storage.token",
    "user": "offset.storage.user",
    "password": "offset.storage.password",
    "ca": "offset.storage.ca",
    "clientCert": "offset.storage.client.cert",
    "clientKey": "offset.storage.client.key",
}
STATE_PROPERTIES = ("offset.storage.flink.state.value", "offset.storage.risingwave.state.value")

Callback = Callable[[BaseException | None, None], None]


class DaemonOffsetBackingStore:
    def __init__(self, url: str | None = None, credentials: Credentials | None = None) -> None:
        self._url = url
        self._credentials = credentials
        self._client: OffsetsClient | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._seed: tuple[bytes, bytes | None] | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def configure(self, config: Mapping[str, str]) -> None:
        """``offset.storage.url`` (daemon URL) and, optionally, a Flink CDC / RisingWave state."""
        self._url = config.get(URL_PROPERTY, self._url or DEFAULT_URL)
        if any(config.get(prop) for prop in CREDENTIAL_PROPERTIES.values()):
            given = {option: config.get(prop, "") for option, prop in CREDENTIAL_PROPERTIES.items()}
            self._credentials = Credentials.from_options(given)
        for prop in STATE_PROPERTIES:
            document = config.get(prop)
            if document:
                engine = config.get("name", FLINK_DEFAULT_ENGINE)
                self._seed = state_to_entry(engine, parse_state(document, prop))

    def start(self) -> None:
        self._client = OffsetsClient(self._url or DEFAULT_URL, credentials=self._credentials)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="offset-store")
        if self._seed is not None:
            # The engines write the restored state before the task starts and wait for it.
            self._require_client().import_records([self._seed], write_all=True)

    def stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def _require_client(self) -> OffsetsClient:
        if self._client is None:
            raise RuntimeError("DaemonOffsetBackingStore is not started; call start() first")
        return self._client

    def _submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        if self._executor is None:
            raise RuntimeError("DaemonOffsetBackingStore is not started; call start() first")
        return self._executor.submit(fn)

    # -- the OffsetBackingStore calls ------------------------------------------------------
    def get(self, keys: Collection[bytes]) -> concurrent.futures.Future[dict[bytes, bytes | None]]:
        """One entry per requested key: its value, or ``None`` when absent or deleted (Connect's
        contract), matched by exact bytes. The daemon answers only once its log was read to the
        end, and reflects every write it acknowledged (read-your-writes)."""
        wanted = list(keys)

        def lookup() -> dict[bytes, bytes | None]:
            connectors = sorted({c for c in map(_connector, wanted) if c is not None})
            live = self._require_client().records(connectors) if connectors else {}
            return {key: live.get(key) for key in wanted}

        return self._submit(lookup)

    def set(
        self, values: Mapping[bytes, bytes | None], callback: Callback | None = None
    ) -> concurrent.futures.Future[None]:
        """Write every entry (``None`` = tombstone), acknowledged and applied before the future
        completes; ``callback(error, None)`` runs on completion, as Connect's ``Callback<Void>``."""
        entries = list(values.items())

        def write() -> None:
            error: BaseException | None = None
            try:
                if entries:
                    self._require_client().import_records(entries, write_all=True)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if callback is not None:
                    callback(error, None)

        return self._submit(write)

    def connector_partitions(self, connector: str) -> list[dict[str, Any]]:
        """The connector's live partitions (Connect's ``connectorPartitions``)."""
        client = self._require_client()
        partitions = []
        for key in client.records([connector]):
            parsed = parse_key(key)
            if not isinstance(parsed, KeyProblem) and parsed.connector == connector:
                partitions.append(parsed.partition)
        return partitions


def _connector(key: bytes) -> str | None:
    parsed = parse_key(key)
    return None if isinstance(parsed, KeyProblem) else parsed.connector
