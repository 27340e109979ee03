"""Creating, verifying and measuring the offsets topic the way Connect's worker does.

Connect (``KafkaTopicBasedBackingStore.topicInitializer`` + ``TopicAdmin``) creates the topic with
``cleanup.policy=compact`` if it is missing, and refuses an existing topic whose policy is anything
but exactly ``compact``: with ``delete`` in the policy, offsets of idle connectors silently expire and
a restarted task re-reads from scratch. We keep the same rule and Connect's wording so operators
recognise the failure.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition

# confluent-kafka documents these under ``confluent_kafka.admin`` but its stubs do not re-export them.
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType  # type: ignore[attr-defined]

from emulator.model.errors import LogConfigError, TopicMisconfigured

log = logging.getLogger(__name__)

CLEANUP_POLICY = "cleanup.policy"
COMPACT = "compact"
TOPIC_PROPERTY = "offset.storage.topic"
_PURPOSE = "source connector offsets"

# The topic may not be there (yet) although we were told otherwise: we retry these, Connect does too.
_RETRIABLE_CREATE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_CONTROLLER,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError.NETWORK_EXCEPTION,
}
# Connect logs these and carries on, assuming the topic exists or will be auto-created; whether it
# really exists is then decided by waiting for its metadata.
_CANNOT_CREATE_BUT_MAY_EXIST = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._UNSUPPORTED_FEATURE,
}


EARLIEST: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """What Connect's ``TopicAdmin.defineTopic(...).compacted()`` asks for; ``-1`` = broker default."""

    name: str
    partitions: int
    replication_factor: int


def cleanup_policy_error(topic: str, found: list[str]) -> str:
    """Connect's own refusal text (``TopicAdmin.verifyTopicCleanupPolicyOnlyCompact``, 4.3.0)."""
    return (
        f"Topic '{topic}' supplied via the '{TOPIC_PROPERTY}' property is required to have "
        f"'{CLEANUP_POLICY}={COMPACT}' to guarantee consistency and durability of {_PURPOSE}, but found "
        f"the topic currently has '{CLEANUP_POLICY}={','.join(found)}'. Continuing would likely result in "
        f"eventually losing {_PURPOSE} and problems restarting this Connect cluster in the future. "
        f"Change the '{TOPIC_PROPERTY}' property in the Connect worker configurations to use a topic "
        f"with '{CLEANUP_POLICY}={COMPACT}'."
    )


def parse_cleanup_policies(value: str | None) -> list[str]:
    """Split, trim, lower-case and de-duplicate, as Connect does before comparing with ``{compact}``."""
    if value is None:
        return []
    seen: list[str] = []
    for part in value.split(","):
        policy = part.strip().lower()
        if policy and policy not in seen:
            seen.append(policy)
    return seen


def _kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def ensure_topic(admin: AdminClient, spec: TopicSpec, timeout_s: float) -> bool:
    """Create the topic compacted, or verify the existing one. Returns True if we created it.

    Raises ``LogConfigError`` when the broker refuses the topic (bad partition/replication settings)
    or when an existing topic's cleanup policy is not exactly ``compact``.
    """
    deadline = time.monotonic() + timeout_s
    new_topic = NewTopic(
        spec.name,
        num_partitions=spec.partitions,
        replication_factor=spec.replication_factor,
        config={CLEANUP_POLICY: COMPACT},
    )
    while True:
        remaining = max(deadline - time.monotonic(), 0.1)
        future = admin.create_topics([new_topic], operation_timeout=remaining, request_timeout=remaining)[spec.name]
        try:
            future.result(timeout=remaining + 5.0)
        except KafkaException as exc:
            err = _kafka_error(exc)
            code = err.code() if err is not None else None
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                # Also the losing side of a create race with another worker or emulator.
                log.info("Topic '%s' already exists; verifying its cleanup policy", spec.name)
                verify_cleanup_policy(admin, spec.name, max(deadline - time.monotonic(), 1.0))
                return False
            if code in _CANNOT_CREATE_BUT_MAY_EXIST:
                log.warning(
                    "Unable to create topic '%s' (%s); assuming it exists or will be auto-created",
                    spec.name,
                    err,
                )
                return False
            retriable = err is not None and (code in _RETRIABLE_CREATE or err.retriable())
            if retriable and time.monotonic() < deadline:
                log.info("Retrying creation of topic '%s' after: %s", spec.name, err)
                time.sleep(0.5)
                continue
            raise LogConfigError(
                f"Unable to create topic '{spec.name}' with {spec.partitions} partitions and "
                f"replication factor {spec.replication_factor}: {err if err is not None else exc}"
            ) from exc
        log.info(
            "Created topic '%s' (partitions=%d, replication.factor=%d, %s=%s)",
            spec.name,
            spec.partitions,
            spec.replication_factor,
            CLEANUP_POLICY,
            COMPACT,
        )
        return True


def verify_cleanup_policy(admin: AdminClient, topic: str, timeout_s: float) -> bool:
    """Connect's check on an existing topic: True if verified, False if it could not be checked."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries: dict[str, Any] = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(
            timeout=timeout_s + 5.0
        )
    except Exception as exc:  # ACLs, an old broker, a timeout: Connect logs INFO and continues
        log.info(
            "Unable to use admin client to verify the cleanup policy of '%s' topic is '%s', either "
            "because the broker is an older version or because the Kafka principal used for Connect "
            "internal topics does not have the required permission to describe topic configurations. "
            "(%s)",
            topic,
            COMPACT,
            exc,
        )
        return False
    entry = entries.get(CLEANUP_POLICY)
    policies = parse_cleanup_policies(entry.value if entry is not None else None)
    if not policies:
        log.info(
            "Unable to use admin client to verify the cleanup policy of '%s' topic is '%s': the broker "
            "did not report %s for it.",
            topic,
            COMPACT,
            CLEANUP_POLICY,
        )
        return False
    if set(policies) != {COMPACT}:
        raise TopicMisconfigured(cleanup_policy_error(topic, policies))
    return True


_NO_ANSWER = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
"""Errors of a metadata request that mean the cluster did not answer, not that the topic lacks partitions."""


def wait_for_partition_count(admin: AdminClient, topic: str, timeout_s: float) -> int:
    """Poll metadata until the topic has partitions, as ``KafkaBasedLog.start()`` does (30 s there).

    Metadata may lag the create call on a multi-broker cluster; a topic that never shows up (e.g. we
    were not allowed to create it and nobody else did) is a configuration error, not a hang.
    """
    return wait_for_topic(admin, topic, timeout_s)[0]


def wait_for_topic(admin: AdminClient, topic: str, timeout_s: float) -> tuple[int, str | None]:
    """``wait_for_partition_count``, and the cluster id the same metadata answer carries (None from a
    broker that gives none): the offsets log names its history archive after it."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            metadata = admin.list_topics(topic=topic, timeout=max(min(deadline - time.monotonic(), 5.0), 0.5))
            topic_md = metadata.topics.get(topic)
            if topic_md is not None and topic_md.error is None and topic_md.partitions:
                return len(topic_md.partitions), metadata.cluster_id or None
            last = topic_md.error if topic_md is not None else "topic missing from metadata"
        except KafkaException as exc:
            last = exc
        if time.monotonic() >= deadline:
            if isinstance(last, KafkaException) and last.args[0].code() in _NO_ANSWER:
                # A stalled broker, not a missing topic: the reader retries once the cluster answers.
                raise LogConfigError(
                    f"the Kafka cluster did not answer a metadata request for topic '{topic}' within "
                    f"{timeout_s:g} s: {last}"
                )
            raise LogConfigError(
                f"topic '{topic}' has no partitions in the cluster's metadata after {timeout_s:g} s: {last}"
            )
        time.sleep(0.2)


def list_offsets(
    admin: AdminClient, topic: str, partitions: list[int], spec: OffsetSpec, timeout_s: float
) -> dict[int, int]:
    """Offsets per partition from ``ListOffsets`` with ``READ_UNCOMMITTED``, like ``TopicAdmin.endOffsets``.

    Connect takes the high watermark (not the last stable offset) even for a ``read_committed``
    reader, so reading to the end also waits for open transactions to resolve.
    """
    request = {TopicPartition(topic, p): spec for p in partitions}
    futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=timeout_s)
    result: dict[int, int] = {}
    for tp, future in futures.items():
        result[tp.partition] = answered_offset(tp, int(future.result(timeout=timeout_s + 5.0).offset), timeout_s)
    return result


def answered_offset(tp: TopicPartition, offset: int, timeout_s: float) -> int:
    """The earliest or latest offset is never negative. confluent-kafka (2.16) resolves a ``ListOffsets``
    the broker did not answer within ``request_timeout`` with offset -1001 and no error: taken as an
    end offset, every reader would count itself at the end of a log it never read (a restore
    "finished" with nothing, a ``?fresh=true`` read or a claim served from a stale view)."""
    if offset < 0:
        raise KafkaException(
            KafkaError(
                KafkaError._TIMED_OUT,
                f"no offset for {tp.topic}[{tp.partition}] within {timeout_s:g} s (ListOffsets answered {offset})",
            )
        )
    return offset
