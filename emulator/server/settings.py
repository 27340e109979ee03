"""Daemon settings: every flag also comes from an environment variable ``CONNECT_OFFSETS_<FLAG>``.

Environment variables make the daemon configurable in containers (docker-compose) without a
command line; flags win over the environment so an operator can override one setting ad hoc.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from emulator.model.times import parse_duration_s, parse_size_bytes

ENV_PREFIX = "CONNECT_OFFSETS_"


@dataclass(frozen=True, slots=True)
class Settings:
    bootstrap_servers: str | None = None
    offsets_topic: str = "connect-offsets"
    offsets_partitions: int = 25
    replication_factor: int = -1
    data_dir: Path = Path("./data")
    host: str = "127.0.0.1"
    port: int = 8081
    kafka_config: dict[str, str] = field(default_factory=dict)
    read_committed: bool = False
    log_level: str = "INFO"
    config_topic: str | None = None
    """Connect's config.storage.topic: enables Connect's 404/STOPPED rules and sink connectors."""
    status_topic: str | None = None
    """Connect's status.storage.topic (connector states, informational)."""
    history: bool = True
    history_dir: Path | None = None
    """None = ``<data_dir>/history``."""
    history_retention_s: float | None = 30 * 86400.0
    history_rotate_bytes: int = 64 * 1024 * 1024
    history_rotate_interval_s: float | None = 86400.0
    sequence_cache_expiry_s: float = 600.0
    """How long a partition's last commit sequence is remembered (reordering detection)."""
    claims_topic: str | None = None
    """Kafka only: where claims live (default ``<offsets-topic>-emulator-claims``, created on first claim)."""

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    @property
    def history_root(self) -> Path:
        return self.history_dir if self.history_dir is not None else self.data_dir / "history"


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def add_serve_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    defaults = Settings()

    def env_default(flag: str, default: object) -> object:
        return env.get(env_name(flag), default)

    parser.add_argument(
        "--bootstrap-servers",
        default=env_default("--bootstrap-servers", None),
        help="Kafka bootstrap servers; absent = the embedded log under --data-dir "
        "(env CONNECT_OFFSETS_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--offsets-topic",
        default=env_default("--offsets-topic", defaults.offsets_topic),
        help="Connect's offset.storage.topic (default connect-offsets)",
    )
    parser.add_argument(
        "--offsets-partitions",
        type=int,
        default=int(env_default("--offsets-partitions", defaults.offsets_partitions)),  # type: ignore[call-overload]
        help="partitions when creating the topic or embedded log (Connect's default 25)",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=int(env_default("--replication-factor", defaults.replication_factor)),  # type: ignore[call-overload]
        help="replication factor when creating the topic (-1 = broker default)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(str(env_default("--data-dir", defaults.data_dir))),
        help="where the embedded log lives (default ./data)",
    )
    parser.add_argument(
        "--host", default=env_default("--host", defaults.host), help="listen address (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(env_default("--port", defaults.port)),  # type: ignore[call-overload]
        help="listen port (default 8081)",
    )
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="any librdkafka setting (SASL, SSL, ...), repeatable; env CONNECT_OFFSETS_KAFKA_CONFIG "
        "takes comma-separated KEY=VALUE pairs",
    )
    parser.add_argument(
        "--read-committed",
        action="store_true",
        default=str(env_default("--read-committed", "")).lower() in {"1", "true", "yes"},
        help="read with isolation.level=read_committed (Connect does so when exactly-once source is enabled)",
    )
    parser.add_argument("--log-level", default=env_default("--log-level", defaults.log_level))
    cluster = parser.add_argument_group("Connect cluster awareness (read only; needs --bootstrap-servers)")
    cluster.add_argument(
        "--config-topic",
        default=env_default("--config-topic", None),
        help="the Connect workers' config.storage.topic: unknown connectors get 404, and offsets may be "
        "modified only while STOPPED with 0 tasks, as in Connect; sinks use their consumer group "
        "(env CONNECT_OFFSETS_CONFIG_TOPIC)",
    )
    cluster.add_argument(
        "--status-topic",
        default=env_default("--status-topic", None),
        help="the Connect workers' status.storage.topic (env CONNECT_OFFSETS_STATUS_TOPIC)",
    )
    history = parser.add_argument_group("offsets history (archive of every change, beyond compaction)")
    history.add_argument(
        "--no-history",
        action="store_true",
        default=str(env_default("--no-history", "")).lower() in {"1", "true", "yes"},
        help="do not archive changes (history routes then answer 404)",
    )
    history.add_argument(
        "--history-dir",
        type=Path,
        default=env_default("--history-dir", None),
        help="where the Avro history files live (default <data-dir>/history)",
    )
    history.add_argument(
        "--history-retention",
        default=env_default("--history-retention", "30d"),
        help="files whose newest record is older than this are folded into a base file and deleted "
        "(e.g. 30d, 12h; 'never' keeps everything; default 30d)",
    )
    history.add_argument(
        "--history-rotate-bytes",
        default=env_default("--history-rotate-bytes", "64MiB"),
        help="start a new history file after this size (e.g. 64MiB; default 64MiB)",
    )
    history.add_argument(
        "--history-rotate-interval",
        default=env_default("--history-rotate-interval", "1d"),
        help="start a new history file after this time (e.g. 1d, 1h; 'never'; default 1d)",
    )


    writers = parser.add_argument_group("writers: claims and commit sequences")
    writers.add_argument(
        "--sequence-cache-expiry",
        default=env_default("--sequence-cache-expiry", "10m"),
        help="forget a partition's last commit sequence after this long without commits (e.g. 10m; default 10m)",
    )
    writers.add_argument(
        "--claims-topic",
        default=env_default("--claims-topic", None),
        help="Kafka only: compacted topic holding connector claims (default <offsets-topic>-emulator-claims, "
        "created on the first claim)",
    )


def parse_kafka_config(pairs: Sequence[str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--kafka-config expects KEY=VALUE, got {pair!r}")
        config[key.strip()] = value.strip()
    return config


def _connect_topic(args: argparse.Namespace, name: str) -> str | None:
    """A Connect-owned topic: only on a Kafka cluster, and only with the config topic."""
    topic = str(getattr(args, name, None) or "").strip() or None
    flag = "--" + name.replace("_", "-")
    if topic is not None and not args.bootstrap_servers:
        raise ValueError(f"{flag} names a topic of a Connect cluster's Kafka: it needs --bootstrap-servers")
    if name == "status_topic" and topic is not None and not str(getattr(args, "config_topic", None) or "").strip():
        raise ValueError("--status-topic needs --config-topic (connector states come from the config topic)")
    return topic


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    pairs: list[str] = list(args.kafka_config or [])
    if not pairs and env.get(env_name("--kafka-config")):
        pairs = [p for p in env[env_name("--kafka-config")].split(",") if p.strip()]
    if args.offsets_partitions <= 0:
        raise ValueError(f"--offsets-partitions must be positive, got {args.offsets_partitions}")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be within 1..65535, got {args.port}")
    return Settings(
        bootstrap_servers=args.bootstrap_servers or None,
        offsets_topic=args.offsets_topic,
        offsets_partitions=args.offsets_partitions,
        replication_factor=args.replication_factor,
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        kafka_config=parse_kafka_config(pairs),
        read_committed=args.read_committed,
        log_level=str(args.log_level).upper(),
        config_topic=_connect_topic(args, "config_topic"),
        status_topic=_connect_topic(args, "status_topic"),
        history=not args.no_history,
        history_dir=Path(args.history_dir) if args.history_dir else None,
        history_retention_s=parse_duration_s(str(args.history_retention)),
        history_rotate_bytes=parse_size_bytes(str(args.history_rotate_bytes)),
        history_rotate_interval_s=parse_duration_s(str(args.history_rotate_interval)),
        sequence_cache_expiry_s=_positive_duration(str(args.sequence_cache_expiry), "--sequence-cache-expiry"),
        claims_topic=str(args.claims_topic).strip() or None if args.claims_topic else None,
    )


def _positive_duration(text: str, flag: str) -> float:
    value = parse_duration_s(text)
    if value is None or value <= 0:
        raise ValueError(f"{flag} must be a positive duration such as 10m, got {text!r}")
    return value
