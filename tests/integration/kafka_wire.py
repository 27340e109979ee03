"""What clients ask a Kafka broker for, read off the wire: a recording proxy in front of a Tansu broker.

Some of the daemon's promises are about requests, not answers: it reads a topic ``read_committed``
(Fetch's ``isolation_level``), it writes with a given transactional id (InitProducerId's
``transactional_id``). A broker that does not act on a setting cannot show it in its answers (Tansu
0.6 does not filter aborted transactions; docs/testing.md), but the request carries it either way.
So tests start a broker of their own whose advertised address is this proxy: every connection of
every client (bootstrap and per-broker ones alike) passes through it, and each request's header and
the fields tests check are recorded. Answers are relayed untouched.

Request layouts are Kafka's protocol (``clients/src/main/resources/common/message/*.json``): the
header is ``api_key int16, api_version int16, correlation_id int32, client_id nullable string``
(plus tagged fields in flexible versions), then the body.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from tests.fixtures.broker import TansuBroker
from tests.fixtures.processes import free_port, spawn_tansu, wait_ready

FETCH = 1
INIT_PRODUCER_ID = 22
_FLEXIBLE_FROM = {FETCH: 12, INIT_PRODUCER_ID: 2}


@dataclass(frozen=True)
class Request:
    """One request as a client sent it."""

    api_key: int
    api_version: int
    client_id: str | None
    isolation_level: int | None = None
    """Fetch: 0 read_uncommitted, 1 read_committed."""
    topics: tuple[str, ...] = ()
    """Fetch: topic names (versions before 13)."""
    topic_ids: tuple[uuid.UUID, ...] = ()
    """Fetch: topic ids (versions 13 and later)."""
    transactional_id: str | None = None
    """InitProducerId."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("request shorter than its fields")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self, flexible: bool) -> str | None:
        length = self.uvarint() - 1 if flexible else self.int16()
        return None if length < 0 else self.take(length).decode("utf-8")

    def array_length(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.int32()

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def parse_request(frame: bytes) -> Request:
    """The header and, for the requests tests look at, their fields (ValueError on a frame it cannot read)."""
    r = _Reader(frame)
    api_key, api_version = r.int16(), r.int16()
    r.int32()  # correlation id
    client_id = r.string(flexible=False)  # the header's client_id is never a compact string
    flexible = api_key in _FLEXIBLE_FROM and api_version >= _FLEXIBLE_FROM[api_key]
    if flexible:
        r.tagged_fields()
    if api_key == FETCH:
        return _fetch(r, api_version, client_id, flexible)
    if api_key == INIT_PRODUCER_ID:
        return Request(api_key, api_version, client_id, transactional_id=r.string(flexible))
    return Request(api_key, api_version, client_id)


def _fetch(r: _Reader, version: int, client_id: str | None, flexible: bool) -> Request:
    if version < 15:
        r.int32()  # replica_id
    r.int32()  # max_wait_ms
    r.int32()  # min_bytes
    if version >= 3:
        r.int32()  # max_bytes
    isolation = r.int8() if version >= 4 else 0
    if version >= 7:
        r.int32()  # session_id
        r.int32()  # session_epoch
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for _ in range(max(r.array_length(flexible), 0)):
        if version >= 13:
            ids.append(uuid.UUID(bytes=r.take(16)))
        else:
            name = r.string(flexible)
            if name is not None:
                names.append(name)
        for _ in range(max(r.array_length(flexible), 0)):
            r.int32()  # partition
            if version >= 9:
                r.int32()  # current_leader_epoch
            r.int64()  # fetch_offset
            if version >= 12:
                r.int32()  # last_fetched_epoch
            if version >= 5:
                r.int64()  # log_start_offset
            r.int32()  # partition_max_bytes
            if flexible:
                r.tagged_fields()
        if flexible:
            r.tagged_fields()
    return Request(FETCH, version, client_id, isolation_level=isolation, topics=tuple(names), topic_ids=tuple(ids))


@dataclass
class WireTap:
    """A proxy on ``port`` relaying to ``upstream_port``, recording every request it relays."""

    upstream_port: int
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    unreadable: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self.port = int(server.getsockname()[1])
        self._server = server
        threading.Thread(target=self._accept, name="wiretap-accept", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.close()

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        buffer = b""
        try:
            while True:
                chunk = client.recv(65536)
                if not chunk:
                    return
                upstream.sendall(chunk)
                buffer += chunk
                while len(buffer) >= 4:
                    size = struct.unpack(">i", buffer[:4])[0]
                    if len(buffer) < 4 + size:
                        break
                    frame, buffer = buffer[4 : 4 + size], buffer[4 + size :]
                    self._record(frame)
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _record(self, frame: bytes) -> None:
        try:
            request = parse_request(frame)
        except (ValueError, UnicodeDecodeError, struct.error):
            with self._lock:
                self.unreadable += 1
            return
        with self._lock:
            self.requests.append(request)

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def seen(self) -> list[Request]:
        with self._lock:
            return list(self.requests)


class TappedTansu(TansuBroker):
    """A Tansu broker of its own whose advertised address is a ``WireTap``: ``bootstrap`` is the tap."""

    def __init__(self, binary: str, log_path: Path) -> None:
        super().__init__(binary, log_path)
        self.tap: WireTap | None = None

    def start(self) -> None:
        upstream = free_port()
        tap = WireTap(upstream)
        tap.start()
        self.tap = tap
        self.port = tap.port
        self.process = spawn_tansu(self.binary, self.log_path, upstream, tap.port)
        problem = wait_ready(self.process, self.bootstrap)
        if problem is not None:
            self.stop()
            raise AssertionError(f"tapped Tansu did not start: {problem}\n{self.log_tail()}")

    def stop(self) -> None:
        super().stop()
        if self.tap is not None:
            self.tap.close()

    def topic_ids(self, topics: list[str]) -> dict[uuid.UUID, str]:
        """Topic id → name, to read Fetch requests of versions that name topics by id."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        described = admin.describe_topics(TopicCollection(topics))
        found: dict[uuid.UUID, str] = {}
        for name, future in described.items():
            topic_id = future.result(timeout=15).topic_id
            msb = topic_id.get_most_significant_bits() & (2**64 - 1)
            lsb = topic_id.get_least_significant_bits() & (2**64 - 1)
            found[uuid.UUID(int=(msb << 64) | lsb)] = name
        return found

    def fetch_isolation(self, topic: str, client_id: str) -> set[int]:
        """Every isolation level the fetches of ``client_id`` for ``topic`` carried."""
        assert self.tap is not None
        ids = {i for i, name in self.topic_ids([topic]).items() if name == topic}
        return {
            r.isolation_level
            for r in self.tap.seen()
            if r.api_key == FETCH
            and r.client_id == client_id
            and r.isolation_level is not None
            and (topic in r.topics or ids & set(r.topic_ids))
        }

    def wait_for_fetch(self, topic: str, client_id: str, deadline_s: float = 15.0) -> set[int]:
        """The isolation levels of ``client_id``'s fetches for ``topic``, once one was seen (or the deadline passed)."""
        deadline = time.monotonic() + deadline_s
        while True:
            levels = self.fetch_isolation(topic, client_id)
            if levels or time.monotonic() > deadline:
                return levels
            time.sleep(0.1)
