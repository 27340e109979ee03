"""The daemon's settings: the one table from which ``serve``'s flags, its ``CONNECT_OFFSETS_<FLAG>``
environment variables and docs/configuration.md are derived (see ``emulator.server.options``).

Environment variables make the daemon configurable in containers (docker-compose) without a
command line; flags win over the environment so an operator can override one setting ad hoc.
To add a setting, declare one field here; then regenerate docs/configuration.md
(``python -m emulator.cli.config_docs > docs/configuration.md``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from emulator.server.options import (
    BOOLEAN,
    DURATION_OR_NEVER,
    KEY_VALUE,
    OPTIONAL_TEXT,
    OPTIONAL_TOPIC,
    PATH,
    POSITIVE_DURATION,
    SIZE,
    TEXT,
    TOPIC,
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
OBSERVE = "logs and metrics (docs/operations.md)"
SECURITY = "security: who may connect, and how (docs/operations.md, Security)"

OPTIONAL_PATH: Kind[Path | None] = Kind("path", "a path", lambda text: Path(text) if text.strip() else None, "PATH")
_PORT = integer(1, 65535)
OPTIONAL_PORT: Kind[int | None] = Kind(
    _PORT.name, _PORT.expected, lambda text: _PORT.parse(text) if text.strip() else None, "PORT"
)
NAMES: Kind[tuple[str, ...]] = Kind(
    "comma-separated list",
    "names separated by commas",
    lambda text: tuple(n.strip() for n in text.split(",") if n.strip()),
    "A,B",
)


@dataclass(frozen=True, slots=True)
class Settings:
    bootstrap_servers: str | None = option(
        None, OPTIONAL_TEXT, "Kafka bootstrap servers; absent = the embedded log under --data-dir", group=DAEMON
    )
    offsets_topic: str = option("connect-offsets", TOPIC, "Connect's offset.storage.topic", group=DAEMON)
    offsets_partitions: int = option(
        "25", integer(1), "partitions when creating the topic or embedded log (25 is Connect's default)", group=DAEMON
    )
    replication_factor: int = option(
        "-1", integer(), "replication factor when creating the topic (-1 = broker default)", group=DAEMON
    )
    data_dir: Path = option("./data", PATH, "where the embedded log lives", group=DAEMON)
    compaction_interval_s: float | None = option(
        "10m",
        DURATION_OR_NEVER,
        "embedded log: how often to check whether it holds twice the records its last compaction left "
        "(and at least 100,000), and then keep only the latest record per key, as Kafka's cleaner does "
        "('never' keeps every record)",
        group=DAEMON,
        flag="--compaction-interval",
    )
    host: str = option("127.0.0.1", TEXT, "listen address", group=DAEMON)
    port: int = option(
        "8081",
        integer(0, 65535),
        "listen port; 0 = a free port the system picks (the daemon prints its URL on stdout once ready; "
        "see --url-file)",
        group=DAEMON,
    )
    url_file: Path | None = option(
        None,
        OPTIONAL_PATH,
        "once ready (/readyz would answer 200), write the daemon's URL to this file, atomically; "
        "removed at startup and at shutdown, so it never names a daemon that is not ready",
        group=DAEMON,
    )
    kafka_config: dict[str, str] = option(
        None,
        KEY_VALUE,
        "any librdkafka setting (SASL, SSL, ...), repeatable; the variable takes comma-separated KEY=VALUE pairs",
        group=DAEMON,
        repeatable=True,
    )
    tail_fetch_wait_s: float = option(
        "500ms",
        POSITIVE_DURATION,
        "Kafka only: how long the readers' fetches may wait at the broker for new records once read to the end "
        "(fetch.wait.max.ms). Kafka answers as soon as a record arrives, so this only sets how often an idle "
        "daemon asks (twice a second, as Connect's workers); brokers that hold every fetch this long (Tansu, "
        "used in tests) deliver records this late, so tests against them use 10ms. --kafka-config "
        "fetch.wait.max.ms wins over it",
        group=DAEMON,
        flag="--tail-fetch-wait",
    )
    read_committed: bool = option(
        "false",
        BOOLEAN,
        "read with isolation.level=read_committed (Connect does so when exactly-once source is enabled)",
        group=DAEMON,
        switch=True,
    )
    max_body_bytes: int = option(
        "32MiB",
        SIZE,
        "largest request body accepted (413 beyond it, refused before it is read whole); the default admits "
        "a PATCH or raw-records body holding the longest string Connect's reader accepts (20,000,000 characters)",
        group=DAEMON,
    )
    max_connections: int = option(
        "1000",
        integer(1),
        "HTTP connections open at once, TLS ones from their accept (handshake included); one more is answered "
        "503 too_many_connections and closed, so file descriptors stay for the log and the history (the "
        "open-files limit is raised to fit at start)",
        group=DAEMON,
    )
    header_timeout_s: float = option(
        "10s",
        POSITIVE_DURATION,
        "a request's line and headers must arrive within this long of the connection opening (TLS handshake "
        "included) or of its first byte: past it, 408 request_timeout and the connection is closed; a body that "
        "stops arriving for this long, or arrives slower than 16 KiB/s after it, is cut off, and so is a "
        "client that reads none of its answer for this long",
        group=DAEMON,
        flag="--header-timeout",
    )
    write_timeout_s: float = option(
        "10s",
        POSITIVE_DURATION,
        "answer every write (and every read from the log's end: ?fresh=true, GET …/claim) within this long: "
        "past it, 503 with Retry-After saying whether "
        "anything may have been written (docs/operations.md, Faults)",
        group=DAEMON,
        flag="--write-timeout",
    )
    startup_timeout_s: float | None = option(
        "never",
        DURATION_OR_NEVER,
        "give up starting when the Kafka cluster has not answered, or the embedded log's disk has had no "
        "space, for this long ('never' keeps trying, with a progress line every 5 s)",
        group=DAEMON,
        flag="--startup-timeout",
    )
    log_level: str = option(
        "INFO", choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", metavar="LEVEL"), "log level", group=DAEMON
    )

    config_topic: str | None = option(
        None,
        OPTIONAL_TOPIC,
        "the Connect workers' config.storage.topic: unknown connectors get 404, and offsets may be modified "
        "only while STOPPED with 0 tasks, as in Connect; sinks use their consumer group",
        group=CLUSTER,
    )
    status_topic: str | None = option(
        None, OPTIONAL_TOPIC, "the Connect workers' status.storage.topic (connector states)", group=CLUSTER
    )
    exactly_once_source: str | None = option(
        None,
        choice("disabled", "preparing", "enabled", metavar="SUPPORT"),
        "the Connect workers' exactly.once.source.support; enabled: offsets topics are read read_committed and "
        "a source connector's offsets are written in a transaction of its task 0's transactional id, fencing "
        "zombie tasks (unset: from --worker-config, else disabled)",
        group=CLUSTER,
    )
    connect_group_id: str | None = option(
        None,
        OPTIONAL_TEXT,
        "the Connect workers' group.id, which task transactional ids start with (<group.id>-<connector>-<task>); "
        "needed with exactly-once source support (unset: from --worker-config)",
        group=CLUSTER,
    )
    worker_config: Path | None = option(
        None,
        OPTIONAL_PATH,
        "a Connect worker's properties file (connect-distributed.properties): exactly.once.source.support and "
        "group.id are taken from it unless given above",
        group=CLUSTER,
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

    log_format: str = option(
        "text",
        choice("text", "json", metavar="FORMAT"),
        "log lines as text (time LEVEL logger: message) or json (one object per line with time, level, "
        "logger, message and structured fields), for every log of the daemon",
        group=OBSERVE,
    )
    access_log: bool = option(
        "true",
        BOOLEAN,
        "do not write the access log (one INFO line per request: method, route, status, duration, principal)",
        group=OBSERVE,
        flag="--no-access-log",
        switch=True,
    )
    metrics_port: int | None = option(
        None,
        OPTIONAL_PORT,
        "also serve the Prometheus metrics on this port of --metrics-host, without authentication (the main "
        "port serves /metrics to the admin scope)",
        group=OBSERVE,
    )
    metrics_host: str = option(
        "127.0.0.1",
        TEXT,
        "listen address of --metrics-port (beyond loopback, anyone who reaches it reads metrics naming every "
        "connector: a WARNING says so); its Host header is checked as the API's without authentication",
        group=OBSERVE,
    )
    credentials_file: Path | None = option(
        None,
        OPTIONAL_PATH,
        "HTTP Basic users: Connect's PropertyFileLoginModule file (user=password lines, java.util.Properties "
        "syntax); an empty file is refused",
        group=SECURITY,
    )
    tokens_file: Path | None = option(
        None,
        OPTIONAL_PATH,
        "bearer tokens, stored hashed: NAME:sha256$HEX:SCOPES lines (`connect-offsets token mint` prints one)",
        group=SECURITY,
    )
    scopes_file: Path | None = option(
        None,
        OPTIONAL_PATH,
        'TOML [scopes] of Basic users and client-certificate subjects, e.g. alice = ["write:orders-*"] '
        "(unset: every authenticated user is admin, as in Connect)",
        group=SECURITY,
    )
    tls_cert: Path | None = option(None, OPTIONAL_PATH, "serve HTTPS with this PEM certificate (chain)", group=SECURITY)
    tls_key: Path | None = option(
        None, OPTIONAL_PATH, "the PEM private key of --tls-cert (unset: inside the --tls-cert file)", group=SECURITY
    )
    tls_client_ca: Path | None = option(
        None,
        OPTIONAL_PATH,
        "mutual TLS: accept client certificates this PEM CA signed; the subject becomes the principal",
        group=SECURITY,
    )
    insecure_no_auth: bool = option(
        "false",
        BOOLEAN,
        "listen beyond loopback without authentication (anyone who reaches the port can rewrite offsets)",
        group=SECURITY,
        switch=True,
    )
    allowed_hosts: tuple[str, ...] | None = option(
        None,
        NAMES,
        "Host header values served, globs allowed (against DNS rebinding; unset: the loopback names when "
        "listening on loopback; beyond it, any with authentication, else only IP addresses and this machine's "
        "own names)",
        group=SECURITY,
    )
    cors_origins: tuple[str, ...] | None = option(
        None, NAMES, "browser origins allowed to call the API (CORS); unset: none", group=SECURITY
    )
    forwarded_allow_ips: tuple[str, ...] | None = option(
        None,
        NAMES,
        "addresses or networks (CIDR) of the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are "
        "believed: the client address of the access log, audit line and history ('*': any peer; unset: none, "
        "the peer's own address is recorded; uvicorn's FORWARDED_ALLOW_IPS is not read)",
        group=SECURITY,
    )

    def __post_init__(self) -> None:
        """The checks that span settings; Connect's topics exist only on a Connect cluster's Kafka."""
        for flag, topic in (("--config-topic", self.config_topic), ("--status-topic", self.status_topic)):
            if topic is not None and self.embedded:
                raise SettingsError(f"{flag} names a topic of a Connect cluster's Kafka: it needs --bootstrap-servers")
        eos = None if self.exactly_once_source == "disabled" else self.exactly_once_source
        for flag, given in (("--exactly-once-source", eos), ("--worker-config", self.worker_config)):
            if given is not None and self.config_topic is None:
                raise SettingsError(
                    f"{flag} describes a Connect cluster: it needs --config-topic (connector configs say which "
                    "offsets topics each connector uses)"
                )
        if self.status_topic is not None and self.config_topic is None:
            raise SettingsError("--status-topic needs --config-topic (connector states come from the config topic)")
        if self.metrics_port is not None and self.metrics_port == self.port:
            raise SettingsError(f"--metrics-port {self.metrics_port} is the HTTP port (--port); choose another")
        if not 0.001 <= self.tail_fetch_wait_s <= 300.0:
            raise SettingsError(
                f"--tail-fetch-wait must be between 1ms and 300s (librdkafka's fetch.wait.max.ms), got "
                f"{self.tail_fetch_wait_s:g}s"
            )
        self._check_security()

    def _check_security(self) -> None:
        """No open port by accident: beyond loopback, authentication or a deliberate opt-out."""
        for flag, value in (("--tls-key", self.tls_key), ("--tls-client-ca", self.tls_client_ca)):
            if value is not None and self.tls_cert is None:
                raise SettingsError(f"{flag} needs --tls-cert (the daemon's own certificate)")
        if self.scopes_file is not None and not self.authenticates:
            raise SettingsError("--scopes-file needs a way to authenticate: --credentials-file or --tls-client-ca")
        for proxy in self.forwarded_allow_ips or ():
            if proxy != "*" and not _is_network(proxy):
                raise SettingsError(
                    f"--forwarded-allow-ips: {proxy!r} is not an IP address or network "
                    "(e.g. 10.0.0.7, 10.0.0.0/24, '*')"
                )
        if self.insecure_no_auth and self.authenticates:
            raise SettingsError("--insecure-no-auth contradicts the credentials given; leave one out")
        if not self.authenticates and not self.insecure_no_auth and not is_loopback(self.host):
            raise SettingsError(
                f"--host {self.host} listens beyond loopback without authentication: anyone who reaches the port "
                "could rewrite the offsets Connect resumes from. Give --credentials-file, --tokens-file or "
                "--tls-client-ca, or --insecure-no-auth to accept that"
            )

    @property
    def authenticates(self) -> bool:
        return self.credentials_file is not None or self.tokens_file is not None or self.tls_client_ca is not None

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers

    @property
    def tail_fetch_wait_ms(self) -> str:
        """``--tail-fetch-wait`` as librdkafka's ``fetch.wait.max.ms`` value."""
        return str(round(self.tail_fetch_wait_s * 1000))

    @property
    def history_root(self) -> Path:
        """Absolute (under the working directory at startup): the archive creates and rotates files
        for as long as the daemon runs, and must keep doing so where it started."""
        return (self.history_dir if self.history_dir is not None else self.data_dir / "history").absolute()


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address; any other name may resolve beyond this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def _is_network(text: str) -> bool:
    try:
        ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return False
    return True


def parse_kafka_config(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts as a librdkafka config (also used by the transfer commands' options)."""
    config: dict[str, str] = {}
    for pair in pairs:
        try:
            config.update(KEY_VALUE.parse(pair))
        except ValueError:
            raise ValueError(f"--kafka-config expects KEY=VALUE, got {pair!r}") from None
    return config
