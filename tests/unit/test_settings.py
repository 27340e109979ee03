"""The settings table: flags, environment variables, defaults and one-line errors, all from one place."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest

from emulator.cli.common import ClientSettings
from emulator.cli.main import build_parser
from emulator.server.auth.config import build_security
from emulator.server.options import SettingsError, options, resolve
from emulator.server.settings import Settings
from emulator.server.wiring import ignored_proxy_variable, proxy_options


def settings(*flags: str, env: Mapping[str, str] | None = None) -> Settings:
    args = build_parser().parse_args(["serve", *flags])
    return resolve(Settings, args, env or {})


def test_the_defaults_are_the_daemons_historic_ones() -> None:
    s = settings()
    assert s == Settings()
    assert (s.bootstrap_servers, s.offsets_topic, s.offsets_partitions, s.replication_factor) == (
        None,
        "connect-offsets",
        25,
        -1,
    )
    assert (s.data_dir, s.host, s.port, s.kafka_config, s.read_committed, s.log_level) == (
        Path("./data"),
        "127.0.0.1",
        8081,
        {},
        False,
        "INFO",
    )
    assert (s.config_topic, s.status_topic, s.claims_topic) == (None, None, None)
    assert (s.history, s.history_dir, s.history_root) == (True, None, Path.cwd() / "data" / "history")
    assert s.history_retention_s == 30 * 86400.0
    assert s.history_rotate_bytes == 64 * 1024 * 1024
    assert s.history_rotate_interval_s == 86400.0
    assert s.sequence_cache_expiry_s == 600.0
    assert (s.tail_fetch_wait_s, s.tail_fetch_wait_ms) == (0.5, "500")  # as Connect's workers' consumers
    assert s.embedded


def test_the_tail_fetch_wait_is_librdkafkas_milliseconds_within_its_range() -> None:
    assert settings("--tail-fetch-wait", "10ms").tail_fetch_wait_ms == "10"
    assert settings(env={"CONNECT_OFFSETS_TAIL_FETCH_WAIT": "2s"}).tail_fetch_wait_ms == "2000"
    with pytest.raises(SettingsError, match=r"--tail-fetch-wait must be between 1ms and 300s .* got 301s"):
        settings("--tail-fetch-wait", "301s")


def test_a_flag_wins_over_its_variable_and_the_variable_over_the_default() -> None:
    env = {"CONNECT_OFFSETS_PORT": "9100", "CONNECT_OFFSETS_OFFSETS_TOPIC": "from-env"}
    s = settings("--port", "9000", env=env)
    assert (s.port, s.offsets_topic, s.host) == (9000, "from-env", "127.0.0.1")


def test_an_empty_variable_counts_as_unset() -> None:
    s = settings(env={"CONNECT_OFFSETS_PORT": "", "CONNECT_OFFSETS_BOOTSTRAP_SERVERS": "  "})
    assert (s.port, s.bootstrap_servers) == (8081, None)


def test_values_are_parsed_the_way_operators_type_them() -> None:
    env = {
        "CONNECT_OFFSETS_HISTORY_RETENTION": "never",
        "CONNECT_OFFSETS_HISTORY_ROTATE_BYTES": "1MiB",
        "CONNECT_OFFSETS_SEQUENCE_CACHE_EXPIRY": "500ms",
        "CONNECT_OFFSETS_LOG_LEVEL": "debug",
        "CONNECT_OFFSETS_HISTORY_DIR": "/tmp/h",
    }
    s = settings("--history-rotate-interval", "1h", env=env)
    assert s.history_retention_s is None
    assert s.history_rotate_bytes == 1024 * 1024
    assert s.history_rotate_interval_s == 3600.0
    assert s.sequence_cache_expiry_s == 0.5
    assert s.log_level == "DEBUG"
    assert s.history_root == Path("/tmp/h")


@pytest.mark.parametrize(
    ("flags", "env", "said"),
    [
        (("--offsets-topic", "my offsets"), {}, "--offsets-topic: expected a Kafka topic name"),
        ((), {"CONNECT_OFFSETS_CONFIG_TOPIC": "connect/configs"}, "CONNECT_OFFSETS_CONFIG_TOPIC: expected a Kafka"),
        (("--status-topic", ".."), {}, "--status-topic: expected a Kafka topic name"),
        (("--offsets-topic", "x" * 250), {}, "(1 to 249 of the letters, digits, '.', '_' and '-'; not '.' or '..')"),
    ],
)
def test_a_topic_name_kafka_refuses_stops_the_start_naming_the_flag(
    flags: tuple[str, ...], env: dict[str, str], said: str
) -> None:
    """Tansu takes "my offsets"; Apache Kafka refuses it when the topic is created, long after the flag."""
    with pytest.raises(SettingsError) as refused:
        settings(*flags, env=env)
    assert said in str(refused.value)


def test_topic_names_kafka_takes_are_taken() -> None:
    s = settings(
        "--bootstrap-servers", "b:9092", "--offsets-topic", "connect-offsets.v2_EU", "--config-topic", "connect-configs"
    )
    assert (s.offsets_topic, s.config_topic) == ("connect-offsets.v2_EU", "connect-configs")


@pytest.mark.parametrize(
    ("flags", "env", "history", "read_committed"),
    [
        ((), {}, True, False),
        (("--no-history", "--read-committed"), {}, False, True),
        ((), {"CONNECT_OFFSETS_NO_HISTORY": "yes", "CONNECT_OFFSETS_READ_COMMITTED": "1"}, False, True),
        ((), {"CONNECT_OFFSETS_NO_HISTORY": "false", "CONNECT_OFFSETS_READ_COMMITTED": "off"}, True, False),
    ],
)
def test_switches_come_from_the_flag_or_a_true_variable(
    flags: tuple[str, ...], env: dict[str, str], history: bool, read_committed: bool
) -> None:
    s = settings(*flags, env=env)
    assert (s.history, s.read_committed) == (history, read_committed)


def test_kafka_config_flags_repeat_and_the_variable_separates_pairs_by_commas() -> None:
    by_flag = settings("--kafka-config", "ssl.cipher.suites=A,B", "--kafka-config", " acks = all ")
    assert by_flag.kafka_config == {"ssl.cipher.suites": "A,B", "acks": "all"}
    by_env = settings(env={"CONNECT_OFFSETS_KAFKA_CONFIG": "security.protocol=SSL, acks=all,"})
    assert by_env.kafka_config == {"security.protocol": "SSL", "acks": "all"}
    both = settings("--kafka-config", "a=1", env={"CONNECT_OFFSETS_KAFKA_CONFIG": "b=2"})
    assert both.kafka_config == {"a": "1"}


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        ((), {"CONNECT_OFFSETS_PORT": "abc"}, "CONNECT_OFFSETS_PORT: expected an integer within 0..65535, got 'abc'"),
        (("--port", "70000"), {}, "--port: expected an integer within 0..65535, got '70000'"),
        (("--offsets-partitions", "0"), {}, "--offsets-partitions: expected an integer >= 1, got '0'"),
        (
            (),
            {"CONNECT_OFFSETS_NO_HISTORY": "maybe"},
            "CONNECT_OFFSETS_NO_HISTORY: expected true or false (also 1/0, yes/no, on/off), got 'maybe'",
        ),
        (
            ("--log-level", "loud"),
            {},
            "--log-level: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'",
        ),
        (
            (),
            {"CONNECT_OFFSETS_HISTORY_RETENTION": "soon"},
            "CONNECT_OFFSETS_HISTORY_RETENTION: expected a duration such as 30d, 12h, 90m, 500ms, or 'never', "
            "got 'soon'",
        ),
        (
            ("--sequence-cache-expiry", "never"),
            {},
            "--sequence-cache-expiry: expected a positive duration such as 10m, 30s, 500ms, got 'never'",
        ),
        (
            (),
            {"CONNECT_OFFSETS_HISTORY_ROTATE_BYTES": "big"},
            "CONNECT_OFFSETS_HISTORY_ROTATE_BYTES: expected a size in bytes, optionally with K/M/G (binary), "
            "e.g. 64MiB, got 'big'",
        ),
        (
            (),
            {"CONNECT_OFFSETS_KAFKA_CONFIG": "acks=all,oops"},
            "CONNECT_OFFSETS_KAFKA_CONFIG: expected KEY=VALUE, got 'oops'",
        ),
        (
            ("--config-topic", "connect-configs"),
            {},
            "--config-topic names a topic of a Connect cluster's Kafka: it needs --bootstrap-servers",
        ),
        (
            ("--bootstrap-servers", "k:9092", "--status-topic", "connect-status"),
            {},
            "--status-topic needs --config-topic (connector states come from the config topic)",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_its_flag_or_variable(
    flags: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        settings(*flags, env=env)
    assert str(refused.value) == message


def test_the_client_url_comes_from_its_flag_or_variable_and_must_be_http() -> None:
    def url(*flags: str, env: Mapping[str, str]) -> str:
        return resolve(ClientSettings, build_parser().parse_args(["list", *flags]), env).url

    assert url(env={}) == "http://127.0.0.1:8081"
    assert url(env={"CONNECT_OFFSETS_URL": "https://offsets:9"}) == "https://offsets:9"
    assert url("--url", "http://a:1", env={"CONNECT_OFFSETS_URL": "http://b:2"}) == "http://a:1"
    with pytest.raises(SettingsError, match=r"^CONNECT_OFFSETS_URL: expected an http:// or https:// URL, got 'b:2'$"):
        url(env={"CONNECT_OFFSETS_URL": "b:2"})


def test_every_settings_field_is_declared_with_its_flag_and_variable() -> None:
    for settings_type in (Settings, ClientSettings):
        declared = options(settings_type)
        assert [o.field for o in declared] == [f.name for f in dataclasses.fields(settings_type)]
        for o in declared:
            assert o.env == "CONNECT_OFFSETS_" + o.flag.removeprefix("--").replace("-", "_").upper()
            assert o.help and o.group


def test_no_parser_accepts_an_abbreviated_flag() -> None:
    root = build_parser()
    subparsers = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    assert root.allow_abbrev is False
    assert all(parser.allow_abbrev is False for parser in subparsers.choices.values())
    with pytest.raises(SystemExit) as refused:
        root.parse_args(["serve", "--bootstrap-server", "k:9092"])
    assert refused.value.code == 2


@pytest.mark.parametrize(
    ("host", "warned"), [("127.0.0.1", False), ("::1", False), ("localhost", False), ("0.0.0.0", True)]
)
def test_insecure_no_auth_warns_only_where_it_opens_the_port(host: str, warned: bool) -> None:
    """On loopback the flag changes nothing, so a warning that the daemon 'listens beyond loopback' would be false."""
    security = build_security(settings("--host", host, "--insecure-no-auth"))
    assert security.insecure_no_auth is True
    assert bool(security.warnings()) is warned


def test_without_authentication_beyond_loopback_the_warnings_name_dns_rebinding_and_allowed_hosts() -> None:
    own = build_security(settings("--host", "0.0.0.0", "--insecure-no-auth")).warnings()
    assert any("DNS rebinding" in w and "--allowed-hosts" in w for w in own), own
    listed = build_security(settings("--host", "0.0.0.0", "--insecure-no-auth", "--allowed-hosts", "a.internal"))
    assert len(listed.warnings()) == 1, "names listed: the Host check stands, only the open port is worth a word"
    anything = build_security(settings("--host", "0.0.0.0", "--insecure-no-auth", "--allowed-hosts", "*"))
    assert any("DNS rebinding" in w and "any Host" in w for w in anything.warnings())


def test_any_host_on_loopback_without_authentication_warns_of_dns_rebinding(tmp_path: Path) -> None:
    """On loopback the default names are what stops DNS rebinding: a rebound page's requests are
    same-origin, so the cross-site checks pass them, and without authentication nothing else stands
    in the way. ``--allowed-hosts '*'`` there was accepted without a word (security QA LOW)."""
    warned = build_security(settings("--allowed-hosts", "*")).warnings()
    assert len(warned) == 1 and "DNS rebinding" in warned[0] and "any Host" in warned[0], warned
    assert "rewrite offsets" in warned[0] and "authentication" in warned[0]
    assert build_security(settings("--allowed-hosts", "localhost,127.0.0.1")).warnings() == []
    users = tmp_path / "users.properties"
    users.write_text("alice=pw\n")
    assert build_security(settings("--allowed-hosts", "*", "--credentials-file", str(users))).warnings() == [], (
        "a rebound page has no credentials to send"
    )


def test_cors_for_any_origin_without_authentication_warns_that_any_site_reads_offsets(tmp_path: Path) -> None:
    """``--cors-origins '*'`` lets every web site a browser opens read the answers of a daemon
    without authentication (its writes stay refused by the same-origin rule); with authentication a
    site has no credentials to send. It was accepted without a word (security QA LOW)."""
    warned = build_security(settings("--cors-origins", "*")).warnings()
    assert len(warned) == 1 and warned[0].startswith("--cors-origins '*' without authentication"), warned
    assert "read every connector's offsets" in warned[0]
    assert build_security(settings("--cors-origins", "https://ui.example")).warnings() == []
    users = tmp_path / "users.properties"
    users.write_text("alice=pw\n")
    assert build_security(settings("--cors-origins", "*", "--credentials-file", str(users))).warnings() == []


def test_forwarded_headers_are_believed_from_no_proxy_unless_named() -> None:
    assert proxy_options(settings()) == {"proxy_headers": False, "forwarded_allow_ips": []}
    named = settings("--forwarded-allow-ips", "10.0.0.7,[::1],10.1.0.0/16")
    assert proxy_options(named) == {"proxy_headers": True, "forwarded_allow_ips": ["10.0.0.7", "::1", "10.1.0.0/16"]}
    with pytest.raises(SettingsError, match=r"'proxy\.internal' is not an IP address or network"):
        settings("--forwarded-allow-ips", "proxy.internal")
    assert ignored_proxy_variable({"FORWARDED_ALLOW_IPS": "*"}) is not None
    assert ignored_proxy_variable({}) is None


def test_no_variable_a_setting_reads_is_called_unknown() -> None:
    """Every ``serve`` and client setting's variable, and the password the clients read, pass; the
    test kit's namespace is its own."""
    from emulator.cli.common import ClientSettings
    from emulator.cli.environment import known_variables, unknown_variable_warnings
    from emulator.server.options import options
    from emulator.server.settings import Settings

    every = {opt.env: "x" for kind in (Settings, ClientSettings) for opt in options(kind)}
    assert unknown_variable_warnings({**every, "CONNECT_OFFSETS_PASSWORD": "p", "CONNECT_OFFSETS_TEST_URL": "u"}) == []
    assert set(every) < known_variables()
    assert unknown_variable_warnings({"CONNECT_OFFSETS_XYZZY": "1", "PATH": "/bin"}) == [
        "CONNECT_OFFSETS_XYZZY is set but is not a connect-offsets setting: ignored"
    ]
