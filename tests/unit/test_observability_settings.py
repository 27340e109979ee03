"""Logs and metrics settings, the JSON log line, and the /status fields that name server paths."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from emulator.cli.main import build_parser
from emulator.model.principal import Principal
from emulator.server.auth.config import build_security, metrics_host_rule
from emulator.server.auth.hosts import HostRule
from emulator.server.auth.status import HIDDEN, for_principal
from emulator.server.log_format import JsonFormatter, fields, formatter
from emulator.server.options import SettingsError, resolve
from emulator.server.settings import Settings
from emulator.server.wiring import log_metrics_url


def settings(*flags: str, env: dict[str, str] | None = None) -> Settings:
    return resolve(Settings, build_parser().parse_args(["serve", *flags]), env or {})


def test_logs_are_text_with_an_access_log_and_no_metrics_port_by_default() -> None:
    s = settings()
    assert (s.log_format, s.access_log, s.metrics_port) == ("text", True, None)


def test_the_logs_and_metrics_settings_come_from_flags_or_variables() -> None:
    s = settings("--log-format", "JSON", "--no-access-log", "--metrics-port", "9464")
    assert (s.log_format, s.access_log, s.metrics_port) == ("json", False, 9464)
    env = {"CONNECT_OFFSETS_LOG_FORMAT": "json", "CONNECT_OFFSETS_NO_ACCESS_LOG": "true"}
    assert (settings(env=env).log_format, settings(env=env).access_log) == ("json", False)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--log-format", "yaml"], "--log-format: expected one of text, json, got 'yaml'"),
        (["--metrics-port", "0"], "--metrics-port: expected an integer within 1..65535, got '0'"),
        (["--metrics-port", "8081"], "--metrics-port 8081 is the HTTP port (--port); choose another"),
    ],
)
def test_a_bad_logs_or_metrics_setting_is_one_line_naming_it(flags: list[str], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        settings(*flags)
    assert str(refused.value) == message


def record(message: str, **structured: object) -> logging.LogRecord:
    made = logging.LogRecord("emulator.audit", logging.INFO, __file__, 1, message, (), None)
    made.__dict__.update(fields(**structured))
    return made


def test_a_json_line_has_time_level_logger_message_and_the_structured_fields() -> None:
    line = json.loads(JsonFormatter().format(record("PATCH c by alice", principal="alice", status=200)))
    assert line["level"] == "INFO" and line["logger"] == "emulator.audit" and line["message"] == "PATCH c by alice"
    assert line["time"].endswith("Z") and (line["principal"], line["status"]) == ("alice", 200)


def test_a_field_cannot_disguise_a_lines_level_or_logger_and_exceptions_stay_on_one_line() -> None:
    line = json.loads(JsonFormatter().format(record("m", level="DEBUG", logger="other", remote=None)))
    assert (line["level"], line["logger"], line["remote"]) == ("INFO", "emulator.audit", None)
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = JsonFormatter().format(failed)
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["exception"]


def test_the_text_format_is_the_historic_one() -> None:
    text = formatter("text").format(record("hello", principal="alice"))
    assert text.endswith(" INFO emulator.audit: hello")


def test_status_hides_server_paths_from_a_principal_without_admin() -> None:
    status = {
        "log": "embedded:///srv/data/connect-offsets.sqlite3",
        "ready": True,
        "history": {
            "directory": "/srv/data/history/x",
            "log": "embedded:///srv/x",
            "recovered_files": ["/srv/data/history/x/00001.avro"],
            "mode": "writing",
        },
    }
    hidden = {"directory": HIDDEN, "log": HIDDEN, "recovered_files": HIDDEN, "mode": "writing"}
    assert for_principal(status, Principal("reader", "token", ("read:*",))) == {
        "log": HIDDEN,
        "ready": True,
        "history": hidden,
    }
    assert for_principal(status, Principal("root", "token", ("admin",))) == status
    assert status["history"]["directory"] == "/srv/data/history/x"  # the original is left alone


def test_the_metrics_port_listens_on_loopback_unless_metrics_host_says_otherwise_and_then_warns() -> None:
    beyond = settings("--host", "0.0.0.0", "--insecure-no-auth", "--metrics-port", "9464")
    assert beyond.metrics_host == "127.0.0.1", "not --host: the metrics name every connector"
    assert not any("--metrics-host" in w for w in build_security(beyond).warnings())
    assert metrics_host_rule(beyond).allowed[:3] == ("localhost", "127.0.0.1", "::1")
    assert metrics_host_rule(beyond).ip_literals is False

    open_metrics = settings("--metrics-port", "9464", "--metrics-host", "0.0.0.0")
    assert any(
        w.startswith("--metrics-host 0.0.0.0") and "every connector" in w
        for w in build_security(open_metrics).warnings()
    )
    rule = metrics_host_rule(open_metrics)
    assert rule.refusal("192.0.2.7:9464", "1.1") is None, "an address cannot be rebound"
    assert rule.refusal("attacker.example:9464", "1.1") is not None, "an unauthenticated port: no foreign name"
    listed = settings("--metrics-port", "9464", "--metrics-host", "0.0.0.0", "--allowed-hosts", "prometheus-target")
    assert metrics_host_rule(listed).refusal("prometheus-target:9464", "1.1") is None
    unused = settings("--metrics-host", "0.0.0.0")
    assert build_security(unused).warnings() == [], "no metrics port, nothing listens there"


def test_metrics_only_this_machine_can_scrape_beside_an_api_open_to_others_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """--metrics-host became loopback by default: a remote Prometheus that scraped an older daemon
    on --host 0.0.0.0 would only see its target go down; the log says why once, at startup."""
    with caplog.at_level("INFO", logger="emulator.server.wiring"):
        log_metrics_url(settings("--host", "0.0.0.0", "--insecure-no-auth", "--metrics-port", "9464"))
        log_metrics_url(settings("--metrics-port", "9464"))
        log_metrics_url(
            settings("--host", "0.0.0.0", "--insecure-no-auth", "--metrics-port", "9464", "--metrics-host", "0.0.0.0")
        )
    (warned, local, opened) = caplog.records
    assert warned.levelname == "WARNING" and "loopback only, while the API listens on 0.0.0.0" in warned.getMessage()
    assert "give --metrics-host" in warned.getMessage()
    assert (local.levelname, local.getMessage()) == ("INFO", "Prometheus metrics on http://127.0.0.1:9464/metrics")
    assert (opened.levelname, opened.getMessage()) == ("INFO", "Prometheus metrics on http://0.0.0.0:9464/metrics")


def test_a_request_without_host_is_served_only_over_http_1_0_where_any_host_is() -> None:
    anything, named = HostRule.of(["*"]), HostRule.of(["localhost"], ip_literals=True)
    assert anything.refusal(None, "1.1") is not None and named.refusal(None, "1.1") is not None, "RFC 9112"
    assert anything.refusal(None, "1.0") is None
    assert named.refusal(None, "1.0") is not None, "leaving Host out must not skip the check"
