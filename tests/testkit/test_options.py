"""Where the kit's daemon comes from: option, then variable, then ini key, then the default
(``emulator.testing.options``, what the plugin resolves at ``pytest_configure``)."""

from __future__ import annotations

import re

import pytest

from emulator.testing.options import SETTINGS, resolve

NAME = "connect_offsets_bootstrap_servers"


@pytest.mark.parametrize(
    ("flag", "variable", "ini", "expected"),
    [
        ("flag:9092", "env:9092", "ini:9092", "flag:9092"),
        (None, "env:9092", "ini:9092", "env:9092"),
        (None, "  ", "ini:9092", "ini:9092"),  # an empty variable counts as unset
        (None, None, None, None),
    ],
)
def test_an_option_wins_over_its_variable_which_wins_over_its_ini_key(
    flag: str | None, variable: str | None, ini: str | None, expected: str | None
) -> None:
    environ = {} if variable is None else {"CONNECT_OFFSETS_TEST_BOOTSTRAP_SERVERS": variable}
    options = resolve({NAME: flag}, {NAME: ini}, environ)
    assert options.bootstrap_servers == expected
    assert options.mode == ("embedded" if expected is None else "kafka")


def test_defaults_modes_and_serve_arguments() -> None:
    options = resolve({"connect_offsets_serve_args": "--kafka-config 'sasl.password=a b'"}, {}, {})
    assert (options.mode, options.offsets_topic, options.start_timeout_s) == ("embedded", "connect-offsets", 60.0)
    assert options.serve_args == ["--kafka-config", "sasl.password=a b"]
    assert resolve({}, {}, {"CONNECT_OFFSETS_TEST_URL": "http://h:1"}).mode == "url"


def test_a_daemon_started_by_hand_waits_as_long_as_the_plugins() -> None:
    """``EmbeddedDaemon`` waited 30 s by default where the plugin gave the same daemon 60 s."""
    import inspect

    from emulator.testing.process import EmbeddedDaemon, KafkaDaemon, wait_until_ready

    plugin = resolve({}, {}, {}).start_timeout_s
    assert plugin == 60.0
    assert EmbeddedDaemon().start_timeout_s == KafkaDaemon("127.0.0.1:1").start_timeout_s == plugin
    assert inspect.signature(wait_until_ready).parameters["timeout_s"].default == plugin


TIMEOUT = "connect_offsets_start_timeout"
SECONDS = "expected a number of seconds above 0, got"
NOT_A_URL = "expected the daemon's http:// or https:// URL with a host, got"


@pytest.mark.parametrize(
    ("flags", "environ", "ini", "message"),
    [
        ({TIMEOUT: "soon"}, {}, {}, f"--connect-offsets-start-timeout: {SECONDS} 'soon'"),
        ({}, {"CONNECT_OFFSETS_TEST_START_TIMEOUT": "-1"}, {}, f"CONNECT_OFFSETS_TEST_START_TIMEOUT: {SECONDS} '-1'"),
        ({}, {}, {TIMEOUT: "nan"}, f"connect_offsets_start_timeout: {SECONDS} 'nan'"),
        ({TIMEOUT: "0"}, {}, {}, f"--connect-offsets-start-timeout: {SECONDS} '0'"),
        (
            {"connect_offsets_serve_args": "--kafka-config 'a=b"},
            {},
            {},
            "--connect-offsets-serve-args: No closing quotation",
        ),
        ({"connect_offsets_url": "not-a-url"}, {}, {}, f"--connect-offsets-url: {NOT_A_URL} 'not-a-url'"),
        (
            {},
            {"CONNECT_OFFSETS_TEST_URL": "localhost:8083"},
            {},
            f"CONNECT_OFFSETS_TEST_URL: {NOT_A_URL} 'localhost:8083'",
        ),
        ({}, {}, {"connect_offsets_url": "http://"}, f"connect_offsets_url: {NOT_A_URL} 'http://'"),
        ({"connect_offsets_url": "http://h:port"}, {}, {}, f"--connect-offsets-url: {NOT_A_URL} 'http://h:port'"),
        (  # the password stays out of the message
            {"connect_offsets_url": "ftp://u:secret@h"},
            {},
            {},
            f"--connect-offsets-url: {NOT_A_URL} 'ftp://u:***@h'",
        ),
        (  # each named as the user gave it: the option said the ini key
            {"connect_offsets_status_topic": "s"},
            {},
            {},
            "--connect-offsets-status-topic needs --connect-offsets-config-topic (the workers' config topic)",
        ),
        (
            {},
            {"CONNECT_OFFSETS_TEST_STATUS_TOPIC": "s"},
            {},
            "CONNECT_OFFSETS_TEST_STATUS_TOPIC needs CONNECT_OFFSETS_TEST_CONFIG_TOPIC (the workers' config topic)",
        ),
        (
            {},
            {},
            {"connect_offsets_status_topic": "s"},
            "connect_offsets_status_topic needs connect_offsets_config_topic (the workers' config topic)",
        ),
    ],
)
def test_settings_that_cannot_be_used_are_refused_naming_where_they_came_from(
    flags: dict[str, str], environ: dict[str, str], ini: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        resolve(flags, ini, environ)


def test_every_setting_has_an_option_a_variable_and_an_ini_key() -> None:
    assert [(s.flag, s.env) for s in SETTINGS][:2] == [
        ("--connect-offsets-url", "CONNECT_OFFSETS_TEST_URL"),
        ("--connect-offsets-bootstrap-servers", "CONNECT_OFFSETS_TEST_BOOTSTRAP_SERVERS"),
    ]
    assert all(s.name.startswith("connect_offsets_") for s in SETTINGS)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8083", "https://u:p@offsets.example:443/base", "http://[::1]:1"])
def test_a_daemon_url_with_a_scheme_and_a_host_is_taken_as_given(url: str) -> None:
    assert resolve({"connect_offsets_url": url}, {}, {}).url == url


@pytest.mark.parametrize(
    ("flags", "environ", "ini", "mode"),
    [
        ({NAME: "b:9092"}, {}, {"connect_offsets_url": "http://h:1"}, "kafka"),  # the command line wins
        ({}, {"CONNECT_OFFSETS_TEST_URL": "http://h:1"}, {NAME: "b:9092"}, "url"),
    ],
)
def test_a_url_and_a_broker_at_different_levels_the_higher_one_is_used(
    flags: dict[str, str], environ: dict[str, str], ini: dict[str, str], mode: str
) -> None:
    options = resolve(flags, ini, environ)
    assert options.mode == mode
    assert (options.url is None) == (mode == "kafka") and (options.bootstrap_servers is None) == (mode == "url")


def test_a_url_and_a_broker_at_the_same_level_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^--connect-offsets-url and --connect-offsets-bootstrap-servers both given"):
        resolve({"connect_offsets_url": "http://h:1", NAME: "b:9092"}, {}, {})


@pytest.mark.parametrize(
    ("flags", "ini", "origin", "needed"),
    [
        (
            {"connect_offsets_offsets_topic": "my-offsets"},
            {},
            "--connect-offsets-offsets-topic",
            "--connect-offsets-bootstrap-servers",
        ),
        (
            {},
            {"connect_offsets_config_topic": "configs"},
            "connect_offsets_config_topic",
            "connect_offsets_bootstrap_servers",
        ),
    ],
)
def test_a_topic_without_a_broker_is_refused_not_reported_as_in_use(
    flags: dict[str, str], ini: dict[str, str], origin: str, needed: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(origin)} names a topic, but no broker is given \\({needed}\\)"):
        resolve(flags, ini, {})
