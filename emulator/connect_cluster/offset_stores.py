"""Which offsets topics a source connector's ``ConnectorOffsetBackingStore`` is made of, from its config.

``Worker.offsetStoreForRegularSourceConnector`` (exactly-once source support off) and
``offsetStoreForExactlyOnceSourceConnector`` (on) decide it, and every offsets request of Connect
goes through the store they build (docs/protocol.md §5.4):

| exactly-once | ``offsets.storage.topic`` | connector store (primary) | worker store (secondary) |
|---|---|---|---|
| off | unset | none | the worker topic |
| off | the worker topic | the worker topic | none |
| off | another topic | that topic | the worker topic |
| on | unset or the worker topic | the worker topic | none |
| on | another topic | that topic | the worker topic |

"The worker topic" means the same name on the same cluster (``sameOffsetTopicAsWorker`` compares the
connector producer's ``bootstrap.servers`` with the worker's). The connector store's consumer reads
``read_committed``: forced with exactly-once source support, a default the connector may override
(``consumer.override.isolation.level``) without it (``regularSourceOffsetsConsumerConfigs``). The
worker store reads ``read_committed`` only with exactly-once source support on.

Only this decision lives here; the topics are read by ``emulator.connect_cluster.offsets_topics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.model.exactly_once import ExactlyOnceSource

OFFSETS_TOPIC_CONFIG = "offsets.storage.topic"
_ISOLATION_OVERRIDE = "consumer.override.isolation.level"
_BOOTSTRAP_OVERRIDES = ("producer.override.bootstrap.servers", "consumer.override.bootstrap.servers")


@dataclass(frozen=True, slots=True)
class ConnectorStores:
    """The stores of one source connector, as Connect's ``Worker`` builds them."""

    connector_topic: str | None
    """The connector store's topic (the primary store); None: the worker store alone."""
    worker: bool
    """Whether the worker topic is a store of its own here (the only one, or the secondary)."""
    exactly_once: bool
    """Writes go in a transaction of task 0's transactional id."""
    read_committed: bool
    """The connector store's consumer isolation (meaningless without a connector store)."""
    problem: str | None = None
    """Why the daemon cannot serve this connector's offsets (its offsets topic is on another cluster)."""

    @property
    def separate_topic(self) -> bool:
        """A connector topic other than the worker's: two stores, merged on reads, both written."""
        return self.connector_topic is not None and self.worker

    @property
    def primary_topic(self) -> str | None:
        """The topic written first (the connector store's), or None when it is the worker store."""
        return self.connector_topic

    def describe(self, worker_topic: str) -> dict[str, Any]:
        """For ``/status`` and docs: which topics this connector's offsets live in, and how they are read."""
        return {
            "connector_topic": self.connector_topic,
            "worker_topic": worker_topic if self.worker else None,
            "primary": self.connector_topic or worker_topic,
            "secondary": worker_topic if self.separate_topic else None,
            "exactly_once": self.exactly_once,
            "connector_store_isolation": None
            if self.connector_topic is None
            else ("read_committed" if self.read_committed else "read_uncommitted"),
            "problem": self.problem,
        }


WORKER_ONLY = ConnectorStores(connector_topic=None, worker=True, exactly_once=False, read_committed=False)
"""No connector store: a sink, a connector without a config, or no Connect cluster at all."""


def _servers(text: str) -> frozenset[str]:
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def connector_stores(
    config: Mapping[str, Any] | None, worker_topic: str, bootstrap: str, eos: ExactlyOnceSource
) -> ConnectorStores:
    """The stores Connect builds for a source connector with ``config`` on a worker whose offsets topic
    is ``worker_topic`` on ``bootstrap`` (the daemon's own cluster)."""
    if config is None:  # a connector Connect does not know (``?create=true``): no store of Connect's to follow
        return WORKER_ONLY
    raw = config.get(OFFSETS_TOPIC_CONFIG)
    topic = raw.strip() if isinstance(raw, str) and raw.strip() else None
    if not eos.enabled and topic is None:
        return WORKER_ONLY
    if eos.enabled:
        topic = topic or worker_topic
        read_committed = True
    else:
        override = config.get(_ISOLATION_OVERRIDE)
        read_committed = not (isinstance(override, str) and override.strip().lower() == "read_uncommitted")
    problem = None
    for key in _BOOTSTRAP_OVERRIDES:
        value = config.get(key)
        if isinstance(value, str) and value.strip() and _servers(value) != _servers(bootstrap):
            problem = (
                f"its offsets topic '{topic}' is on another Kafka cluster ({key}={value.strip()}); this daemon "
                f"reads {bootstrap} only"
            )
    assert topic is not None
    if topic == worker_topic and problem is None:
        return ConnectorStores(worker_topic, False, eos.enabled, read_committed)
    return ConnectorStores(topic, True, eos.enabled, read_committed, problem)
