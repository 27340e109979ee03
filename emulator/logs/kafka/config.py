"""The one place that turns the user's librdkafka settings into a client configuration per role.

Every Kafka client of the daemon (the offsets log's producer, readers and admin client, the claims
producers, the readers of Connect's config and status topics, the admin client for sink connectors'
consumer groups, transfers) starts from the same pass-through settings (SASL, SSL, timeouts,
``client.id``, ...), as Connect's worker passes its settings to every client it creates. On top of
them each role gets the settings our correctness depends on; those win over the user's, with a
warning naming both, so a setting that is ignored never goes unnoticed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from confluent_kafka import KafkaError, KafkaException

from emulator.logs.kafka.log_throttle import LIBRDKAFKA_LOGGER, LibrdkafkaFilter
from emulator.model.errors import LogConfigError

LIBRDKAFKA_MAX_MESSAGE_BYTES = 1_000_000
LIBRDKAFKA_MESSAGE_TIMEOUT_MS = 300_000
"""librdkafka's ``message.timeout.ms`` (alias ``delivery.timeout.ms``), which the daemon does not set:
how long a record handed to the producer may still be written, at the latest."""

RECEIVE_MESSAGE_MAX_BYTES = 2_147_483_647
"""The consumers' ``receive.message.max.bytes`` unless the user's settings name it: librdkafka's maximum.

librdkafka refuses (and retries for ever) a response larger than this, 100 MB by default, while
Java's consumer has no such cap: a record of 114 MB, which a topic with ``max.message.bytes`` above it
holds and Connect reads, stopped the daemon's reader at its partition for good (QA D6). The cap saves
no memory: librdkafka allocates what a response holds, not the cap, and a broker's fetch response holds
at most ``fetch.max.bytes`` (50 MB) or one record batch beyond it, whose size the topic's own
``max.message.bytes`` bounds when it is written. So the bound that matters is the topic's, which the
operator chose; a record that large must be held to be read at all, as Java holds it. A user's lower
setting still applies (and the reader then says which record it cannot read:
``TopicReader.blocked``)."""

log = logging.getLogger(__name__)

LIBRDKAFKA_LOG = logging.getLogger(LIBRDKAFKA_LOGGER)
"""Where every client's librdkafka log lines go (``debug=...`` output included)."""
LIBRDKAFKA_LOG.addFilter(LibrdkafkaFilter())  # a gone broker: one line per client and kind per 30 s

DEFAULT_CLIENT_ID = "connect-offsets-emulator"
"""Used as ``client.id`` and consumer ``group.id`` unless the user's settings name them.

The group id is required by librdkafka's consumer but never used: like Connect's ``KafkaBasedLog`` our
readers assign partitions and never commit, so no group ever forms."""

Role = Literal["producer", "transactional producer", "consumer", "admin"]
ErrorCallback = Callable[[KafkaError], None]
_Client = TypeVar("_Client")


DEFAULT_TAIL_FETCH_WAIT_MS = "500"
"""``fetch.wait.max.ms`` of the daemon's tailing consumers (the offsets log's, its claims', Connect's
config and status topics'). A Kafka broker answers a fetch as soon as a record arrives, so this does
not delay anything there: it only sets how often an idle reader asks — twice a second, as Connect's
own workers do (the consumer's default). Brokers that hold every fetch until this wait expires
(Tansu 0.6, this project's test broker) deliver records that late, so tests against them pass
``--tail-fetch-wait 10ms``; at 10 ms an idle daemon sends a hundred fetches a second per topic it
reads (an idle Tansu spent 0.13–0.16 of a core answering one idle daemon, against 0.01 at 500 ms)."""


@dataclass(frozen=True, slots=True)
class KafkaClientConfig:
    """The brokers, the user's librdkafka settings, and what the clients are for (used in messages).

    ``purpose`` completes "for ... <role>" in warnings and errors, e.g. ``"the offsets log"``.
    """

    bootstrap: str
    user: Mapping[str, str] = field(default_factory=dict)
    purpose: str = "the offsets log"
    tail_fetch_wait_ms: str = DEFAULT_TAIL_FETCH_WAIT_MS
    """How long a tailing consumer's fetch may wait at the broker (``--tail-fetch-wait``); see
    ``DEFAULT_TAIL_FETCH_WAIT_MS``. The user's ``fetch.wait.max.ms``, if set, wins everywhere."""

    def user_sets(self, key: str) -> bool:
        return key in self.user

    def producer_max_message_bytes(self) -> int:
        """The producers' ``message.max.bytes``: the user's, else librdkafka's default (1,000,000)."""
        try:
            return int(self.user.get("message.max.bytes", LIBRDKAFKA_MAX_MESSAGE_BYTES))
        except ValueError:  # librdkafka itself refuses the setting when the producer is created
            return LIBRDKAFKA_MAX_MESSAGE_BYTES

    def producer_message_timeout_s(self) -> float:
        """The producers' ``message.timeout.ms`` (or its alias ``delivery.timeout.ms``), in seconds: the
        user's, else librdkafka's default (300 s). Every record handed over is reported within it, so a
        write whose answer is late may land until then and no longer (0, "infinite", is taken as the
        default: the claim's message names a bound, and none is known then)."""
        given = self.user.get("message.timeout.ms", self.user.get("delivery.timeout.ms"))
        try:
            ms = int(given) if given is not None else LIBRDKAFKA_MESSAGE_TIMEOUT_MS
        except ValueError:  # librdkafka itself refuses the setting when the producer is created
            ms = LIBRDKAFKA_MESSAGE_TIMEOUT_MS
        return (ms or LIBRDKAFKA_MESSAGE_TIMEOUT_MS) / 1000

    def build(
        self,
        role: Role,
        *,
        error_cb: ErrorCallback | None = None,
        read_committed: bool = False,
        fetch_wait_ms: str | None = None,
        transactional_id: str | None = None,
    ) -> dict[str, Any]:
        """The configuration dictionary for one client of ``role``.

        ``fetch_wait_ms`` (consumers) applies unless the user chose ``fetch.wait.max.ms``;
        ``read_committed`` picks the consumer's isolation level (Connect's reader is
        ``read_uncommitted`` unless exactly-once source support is on); ``transactional_id`` is
        required for, and only used by, the transactional producer.
        """
        config: dict[str, Any] = dict(self.user)
        given = config.get("bootstrap.servers")
        if given is not None and given != self.bootstrap:
            log.warning("client_config bootstrap.servers=%s ignored; using %s", given, self.bootstrap)
        config["bootstrap.servers"] = self.bootstrap
        config.setdefault("client.id", DEFAULT_CLIENT_ID)
        config["logger"] = LIBRDKAFKA_LOG
        if error_cb is not None:
            config["error_cb"] = error_cb
        # Connect creates its internal topics explicitly, and a missing Connect topic must stay a
        # startup error: never let a metadata lookup create a topic (brokers with
        # auto.create.topics.enable, and Tansu, create any topic a metadata request names).
        self._forced(config, "allow.auto.create.topics", "false", role)
        if role in ("producer", "transactional producer"):
            self._forced(config, "acks", "all", role)
            # Per-key order across retries (Connect uses max.in.flight=1 for the same reason).
            self._forced(config, "enable.idempotence", "true", role)
            # Every keyed record gets an explicit partition; this only guards against a future caller
            # forgetting it, with the partitioner that agrees with Java's.
            config.setdefault("partitioner", "murmur2_random")
            # Java's producer default, and Connect's: a commit is sent at once, not held for a batch
            # (librdkafka's 5 ms default linger was most of an acknowledged write's latency here).
            config.setdefault("linger.ms", "0")
            if role == "transactional producer":
                if transactional_id is None:
                    raise ValueError("a transactional producer needs a transactional_id")
                config["transactional.id"] = transactional_id
        elif role == "consumer":
            config.setdefault("group.id", DEFAULT_CLIENT_ID)
            if fetch_wait_ms is not None:
                config.setdefault("fetch.wait.max.ms", fetch_wait_ms)
            config.setdefault("receive.message.max.bytes", str(RECEIVE_MESSAGE_MAX_BYTES))
            self._forced(config, "enable.auto.commit", "false", role)
            self._forced(config, "enable.auto.offset.store", "false", role)
            self._forced(config, "auto.offset.reset", "earliest", role)
            self._forced(config, "enable.partition.eof", "false", role)
            # librdkafka defaults to read_committed; Connect's reader is read_uncommitted unless EOS.
            self._forced(config, "isolation.level", "read_committed" if read_committed else "read_uncommitted", role)
        return config

    def create(
        self,
        role: Role,
        factory: Callable[[dict[str, Any]], _Client],
        *,
        error_cb: ErrorCallback | None = None,
        read_committed: bool = False,
        fetch_wait_ms: str | None = None,
        transactional_id: str | None = None,
    ) -> _Client:
        """``factory(build(role, ...))``, with a refused setting turned into ``LogConfigError``."""
        config = self.build(
            role,
            error_cb=error_cb,
            read_committed=read_committed,
            fetch_wait_ms=fetch_wait_ms,
            transactional_id=transactional_id,
        )
        try:
            return factory(config)
        except (KafkaException, ValueError, TypeError) as exc:
            # The refused setting is the user's (ours are librdkafka's own): say where it came from
            # first; which client met it first (the sink admin, the log's producer) is a detail.
            raise LogConfigError(
                f"Invalid Kafka client configuration (the --kafka-config KEY=VALUE settings): {exc} "
                f"(refused when creating the {role} for {self.purpose})"
            ) from exc

    def plain(self, role: Role) -> dict[str, str]:
        """``build(role)`` without the Python objects (logger), for a client in another process."""
        return {key: str(value) for key, value in self.build(role).items() if isinstance(value, str | int | bool)}

    def _forced(self, config: dict[str, Any], key: str, value: str, role: Role) -> None:
        """Set a setting our correctness depends on, telling the user if theirs is overridden."""
        previous = config.get(key)
        if previous is not None and str(previous).lower() != value.lower():
            log.warning(
                "Ignoring client setting %s=%s for %s %s: it requires %s=%s",
                key,
                previous,
                self.purpose,
                role,
                key,
                value,
            )
        config[key] = value
