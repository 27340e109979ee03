"""Where the test kit's daemon comes from, as a test session configures it.

Each setting has a command-line option, an environment variable (for CI, where the broker's
address comes from the job) and an ini key (for a repository's ``pyproject.toml``), in that order
of precedence. Without any of them the kit starts a daemon on the embedded log.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

Mode = Literal["embedded", "kafka", "url"]

ENV_PREFIX = "CONNECT_OFFSETS_TEST_"

DEFAULT_START_TIMEOUT_S = 60.0
"""How long a daemon the kit starts may take to be ready, in the plugin and outside pytest alike
(``EmbeddedDaemon``, ``KafkaDaemon``, ``wait_until_ready``): the same daemon started by hand waited 30 s
where the plugin gave it 60, for no reason a user could see. Sized for a daemon on a broker (its
topics read to their ends) on a loaded CI machine; a daemon that exits is reported at once anyway,
so the time is only spent on one that hangs. Here, not in ``process``, because the plugin reads it
when pytest starts and must not import the HTTP stack for that."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    """The ini key; the option is ``--`` + it with dashes, the variable ``ENV_PREFIX`` + it upper-cased."""
    help: str
    default: str | None = None
    metavar: str = "TEXT"
    ini_type: Literal["string", "args"] = "string"
    """``args``: the ini key takes a TOML list or a shell-quoted string (``serve_args``)."""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.removeprefix("connect_offsets_").upper()


SETTINGS = (
    Setting(
        "connect_offsets_url",
        "use the connect-offsets daemon already running at this URL (e.g. in a compose stack) instead of starting one",
        metavar="URL",
    ),
    Setting(
        "connect_offsets_bootstrap_servers",
        "start the daemon on this Kafka cluster's offsets topic instead of the embedded log",
        metavar="SERVERS",
    ),
    Setting("connect_offsets_offsets_topic", "the Connect workers' offset.storage.topic", "connect-offsets", "TOPIC"),
    Setting(
        "connect_offsets_config_topic",
        "the workers' config.storage.topic: the daemon then applies Connect's 404 and STOPPED rules",
        metavar="TOPIC",
    ),
    Setting(
        "connect_offsets_status_topic", "the workers' status.storage.topic (needs the config topic)", metavar="TOPIC"
    ),
    Setting(
        "connect_offsets_serve_args",
        "more `connect-offsets serve` arguments for the daemon (shell syntax; in an ini file also a list)",
        metavar="ARGS",
        ini_type="args",
    ),
    Setting(
        "connect_offsets_start_timeout",
        "seconds the daemon may take to be ready",
        f"{DEFAULT_START_TIMEOUT_S:g}",
        "SECONDS",
    ),
)

_SETTING = {setting.name: setting for setting in SETTINGS}


@dataclass(frozen=True, slots=True)
class KitOptions:
    """The resolved settings: what the ``connect_offsets_options`` fixture returns, so a test can
    configure its own pipeline with the same broker and topics."""

    url: str | None = None
    bootstrap_servers: str | None = None
    offsets_topic: str = "connect-offsets"
    config_topic: str | None = None
    status_topic: str | None = None
    serve_args: list[str] = field(default_factory=list)
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S

    @property
    def mode(self) -> Mode:
        if self.url:
            return "url"
        return "kafka" if self.bootstrap_servers else "embedded"

    def describe(self) -> str:
        if self.mode == "url":
            return f"the daemon at {self.url}"
        if self.mode == "kafka":
            cluster = f", config topic {self.config_topic}" if self.config_topic else ""
            return f"a daemon on {self.bootstrap_servers}, offsets topic {self.offsets_topic}{cluster}"
        return "a daemon on the embedded log (one per session)"


def resolve(
    flags: Mapping[str, str | None], ini: Mapping[str, str | None], environ: Mapping[str, str] = os.environ
) -> KitOptions:
    """Each setting from its option, else its variable, else its ini key, else its default
    (``flags`` and ``ini`` by setting name; None or empty: not given). Raises ``ValueError``
    naming where the value that cannot be used came from (the option, the variable or the key)."""
    values: dict[str, str | None] = {}
    origins: dict[str, str] = {}
    for setting in SETTINGS:
        given = (
            (setting.flag, flags.get(setting.name)),
            (setting.env, environ.get(setting.env, "").strip()),
            (setting.name, ini.get(setting.name)),
        )
        origin, value = next(((where, v) for where, v in given if v), (f"{setting.name} (default)", setting.default))
        values[setting.name], origins[setting.name] = value, origin
    timeout = _seconds(
        values["connect_offsets_start_timeout"] or f"{DEFAULT_START_TIMEOUT_S:g}",
        origins["connect_offsets_start_timeout"],
    )
    if values["connect_offsets_url"]:
        _check_url(values["connect_offsets_url"], origins["connect_offsets_url"])
    if values["connect_offsets_status_topic"] and not values["connect_offsets_config_topic"]:
        # Named as the user gave it: an option's error that names an ini key sends them looking for a file.
        status, config = _SETTING["connect_offsets_status_topic"], _SETTING["connect_offsets_config_topic"]
        where = origins[status.name]
        needed = config.flag if where == status.flag else config.env if where == status.env else config.name
        raise ValueError(f"{where} needs {needed} (the workers' config topic)")
    _one_daemon_source(values, origins)
    try:
        serve_args = shlex.split(values["connect_offsets_serve_args"] or "")
    except ValueError as exc:  # "No closing quotation"
        raise ValueError(f"{origins['connect_offsets_serve_args']}: {exc}") from None
    return KitOptions(
        url=values["connect_offsets_url"],
        bootstrap_servers=values["connect_offsets_bootstrap_servers"],
        offsets_topic=values["connect_offsets_offsets_topic"] or "connect-offsets",
        config_topic=values["connect_offsets_config_topic"],
        status_topic=values["connect_offsets_status_topic"],
        serve_args=serve_args,
        start_timeout_s=timeout,
    )


_RANK = {"option": 0, "variable": 1, "ini key": 2}


def _level(origin: str) -> str:
    return "option" if origin.startswith("--") else "ini key" if origin.startswith("connect_offsets_") else "variable"


def _one_daemon_source(values: dict[str, str | None], origins: dict[str, str]) -> None:
    """A URL and a broker are two ways to get a daemon: the one given at the higher level (option, then
    variable, then ini key) is used and the other dropped, so a broker on the command line overrides a
    URL in pyproject.toml; at the same level they conflict. Without a broker or a URL the daemon runs on
    the embedded log, which has no topics: a topic setting then would be reported as in use while
    nothing used it, and is refused."""
    url, servers = "connect_offsets_url", "connect_offsets_bootstrap_servers"
    if values[url] and values[servers]:
        at_url, at_servers = _level(origins[url]), _level(origins[servers])
        if at_url == at_servers:
            raise ValueError(
                f"{origins[url]} and {origins[servers]} both given: the kit either uses the daemon at a URL or "
                "starts one on a broker; give one"
            )
        values[servers if _RANK[at_url] < _RANK[at_servers] else url] = None
    if values[url] or values[servers]:
        return
    for name in ("connect_offsets_offsets_topic", "connect_offsets_config_topic", "connect_offsets_status_topic"):
        if values[name] and not origins[name].endswith("(default)"):
            needed = _SETTING[servers]
            level = _level(origins[name])
            named = needed.flag if level == "option" else needed.env if level == "variable" else needed.name
            raise ValueError(
                f"{origins[name]} names a topic, but no broker is given ({named}): the session's daemon would "
                "run on the embedded log, which has no topics"
            )


def _seconds(text: str, origin: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{origin}: expected a number of seconds above 0, got {text!r}")
    return seconds


def _check_url(url: str, origin: str) -> None:
    """An ``http(s)://host`` URL, or a ``ValueError`` now: the kit would otherwise wait its whole
    start timeout for a daemon at an address no request can reach, then fail without saying why."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number in 0..65535)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        from emulator.client.credentials import redact  # only on this error path: the plugin loads this module

        try:
            shown = redact(url)  # a password in it stays out of the message
        except ValueError:  # unbalanced brackets: no part of it parses as a password
            shown = url
        raise ValueError(f"{origin}: expected the daemon's http:// or https:// URL with a host, got {shown!r}")
