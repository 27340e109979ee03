"""The daemon's settings: the one table from which ``serve``'s flags, its ``CONNECT_OFFSETS_<FLAG>``
environment variables and docs/configuration.md are derived (see ``emulator.server.options``).

Environment variables make the daemon configurable in containers (docker-compose) without a
command line; flags win over the environment so an operator can override one setting ad hoc.
To add a setting, declare one field here; then regenerate docs/configuration.md
(``python -m emulator.cli.config_docs > docs/configuration.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from emulator.server.options import (
    BOOLEAN,
    DURATION_OR_NEVER,
    KEY_VALUE,
    OPTIONAL_TEXT,
    PATH,
    POSITIVE_DURATION,
    SIZE,
    TEXT,
    Kind,
    SettingsError,
    choice,
    env_name,
    integer,
    option,
)

__all__ = ["Settings", "SettingsError", "env_name", "parse_kafka_config"]

DAEMON = "the offsets log and the HTTP listener"
CLUSTER = "Connect cluster awareness (read only; needs --bootstrap-servers)"
HISTORY = "offsets history (archive of every change, beyond compaction)"
WRITERS = "writers: claims and commit sequences"

OPTIONAL_PATH: Kind[Path | None] = Kind("path", "a path", lambda text: Path(text) if text.strip() else None, "PATH")


@dataclass(frozen=True, slots=True)
class Settings:
    bootstrap_servers: str | None = option(
        None, OPTIONAL_TEXT, "Kafka bootstrap servers; absent = the embedded log under --data-dir", group=DAEMON
    )
    offsets_topic: str = option("connect-offsets", TEXT, "Connect's offset.storage.topic", group=DAEMON)
    offsets_partitions: int = option(
        "25", integer(1), "partitions when creating the topic or embedded log (25 is Connect's default)", group=DAEMON
    )
    replication_factor: int = option(
        "-1", integer(), "replication factor when creating the topic (-1 = broker default)", group=DAEMON
    )
    data_dir: Path = option("./data", PATH, "where the embedded log lives", group=DAEMON)
    host: str = option("127.0.0.1", TEXT, "listen address", group=DAEMON)
    port: int = option("8081", integer(1, 65535), "listen port", group=DAEMON)
    kafka_config: dict[str, str] = option(
        None,
        KEY_VALUE,
        "any librdkafka setting (SASL, SSL, ...), repeatable; the variable takes comma-separated KEY=VALUE pairs",
        group=DAEMON,
        repeatable=True,
    )
    read_committed: bool = option(
        "false",
        BOOLEAN,
        "read with isolation.level=read_committed (Connect does so when exactly-once source is enabled)",
        group=DAEMON,
        switch=True,
    )
    write_timeout_s: float = option(
        "10s",
        POSITIVE_DURATION,
        "answer every write (and fresh read) within this long: past it, 503 with Retry-After saying whether "
        "anything may have been written (docs/operations.md, Faults)",
        group=DAEMON,
        flag="--write-timeout",
    )
    startup_timeout_s: float | None = option(
        "never",
        DURATION_OR_NEVER,
        "Kafka only: give up starting when the cluster has not answered for this long ('never' keeps "
        "trying, with a progress line every 5 s)",
        group=DAEMON,
        flag="--startup-timeout",
    )
    log_level: str = option(
        "INFO", choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", metavar="LEVEL"), "log level", group=DAEMON
    )

    config_topic: str | None = option(
        None,
        OPTIONAL_TEXT,
        "the Connect workers' config.storage.topic: unknown connectors get 404, and offsets may be modified "
        "only while STOPPED with 0 tasks, as in Connect; sinks use their consumer group",
        group=CLUSTER,
    )
    status_topic: str | None = option(
        None, OPTIONAL_TEXT, "the Connect workers' status.storage.topic (connector states)", group=CLUSTER
    )

    history: bool = option(
        "true",
        BOOLEAN,
        "do not archive changes (history routes then answer 404)",
        group=HISTORY,
        flag="--no-history",
        switch=True,
    )
    history_dir: Path | None = option(
        None, OPTIONAL_PATH, "where the Avro history files live (unset: <data-dir>/history)", group=HISTORY
    )
    history_retention_s: float | None = option(
        "30d",
        DURATION_OR_NEVER,
        "files whose newest record is older than this are folded into a base file and deleted "
        "(e.g. 30d, 12h; 'never' keeps everything)",
        group=HISTORY,
        flag="--history-retention",
    )
    history_rotate_bytes: int = option("64MiB", SIZE, "start a new history file after this size", group=HISTORY)
    history_rotate_interval_s: float | None = option(
        "1d",
        DURATION_OR_NEVER,
        "start a new history file after this time (e.g. 1d, 1h; 'never')",
        group=HISTORY,
        flag="--history-rotate-interval",
    )

    sequence_cache_expiry_s: float = option(
        "10m",
        POSITIVE_DURATION,
        "forget a partition's last commit sequence after this long without commits (reordering detection)",
        group=WRITERS,
        flag="--sequence-cache-expiry",
    )
    claims_topic: str | None = option(
        None,
        OPTIONAL_TEXT,
        "Kafka only: compacted topic holding connector claims (unset: <offsets-topic>-emulator-claims, "
        "created on the first claim)",
        group=WRITERS,
    )

    def __post_init__(self) -> None:
        """The checks that span settings; Connect's topics exist only on a Connect cluster's Kafka."""
        for flag, topic in (("--config-topic", self.config_topic), ("--status-topic", self.status_topic)):
            if topic is not None and self.embedded:
                raise SettingsError(f"{flag} names a topic of a Connect cluster's Kafka: it needs --bootstrap-servers")
        if self.status_topic is not None and self.config_topic is None:
            raise SettingsError("--status-topic needs --config-topic (connector states come from the config topic)")

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    @property
    def history_root(self) -> Path:
        return self.history_dir if self.history_dir is not None else self.data_dir / "history"


def parse_kafka_config(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts as a librdkafka config (also used by the transfer commands' options)."""
    config: dict[str, str] = {}
    for pair in pairs:
        try:
            config.update(KEY_VALUE.parse(pair))
        except ValueError:
            raise ValueError(f"--kafka-config expects KEY=VALUE, got {pair!r}") from None
    return config
