"""The pytest plugin (entry point ``pytest11``): Connect offsets as fixtures.

Fixtures:

- ``connect_offsets``: an :class:`~emulator.testing.kit.OffsetsKit` for the test (seed, offsets,
  history, wait_for_offset, assert_offsets, snapshot/restore, unique names, a sync client and an
  async one); the connectors it named or seeded are reset after the test.
- ``connect_offsets_url`` (session): the daemon's URL. Override it to use a daemon of your own,
  e.g. a compose stack's (``emulator.testing.compose``).
- ``connect_offsets_daemon`` (session): the daemon process the plugin started (embedded log, or
  ``--connect-offsets-bootstrap-servers``), or None with ``--connect-offsets-url``.
- ``connect_offsets_options`` (session): the resolved settings (broker, topics), so a test can
  point its own pipeline at the same place.

Start-up: the daemon starts once per session, and only if a collected test needs it. It is
launched when collection ends, so its start overlaps whatever else the session does before the
first test that uses it; that test waits only for the rest (measured in docs/testing.md).
"""

from __future__ import annotations

import inspect
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.testing.options import SETTINGS, KitOptions, resolve

if TYPE_CHECKING:  # imported when a fixture first runs: sessions without the kit stay fast to start
    from emulator.testing.kit import OffsetsKit
    from emulator.testing.process import DaemonProcess

_OPTIONS = pytest.StashKey[KitOptions]()
_DAEMON = pytest.StashKey["DaemonProcess"]()
_WAITED = pytest.StashKey[float]()
_DAEMON_URL = pytest.StashKey[str]()
"""The URL the session's daemon served at: its ``url`` is gone once it is stopped (``kill()`` too)."""
_DAEMON_FIXTURE = "connect_offsets_daemon"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("connect-offsets", "Kafka Connect offsets test kit (connect-offsets-emulator)")
    for setting in SETTINGS:
        default = f"; default {setting.default}" if setting.default else ""
        group.addoption(
            setting.flag,
            dest=setting.name,
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help} (env {setting.env}{default})",
        )
        parser.addini(setting.name, setting.help, type=setting.ini_type, default=None)


def pytest_configure(config: pytest.Config) -> None:
    flags = {s.name: _text(config.getoption(s.name)) for s in SETTINGS}
    ini = {s.name: _ini_text(config.getini(s.name)) for s in SETTINGS}
    try:
        config.stash[_OPTIONS] = resolve(flags, ini)
    except ValueError as exc:
        raise pytest.UsageError(f"connect-offsets: {exc}") from None


def _text(value: object) -> str | None:
    return str(value).strip() or None if value else None


def _ini_text(value: object) -> str | None:
    """An ini value as the option's text: a list (``args`` keys, e.g. a TOML array) shell-quoted."""
    return _text(shlex.join(value) if isinstance(value, list) else value)


def _options(config: pytest.Config) -> KitOptions:
    return config.stash[_OPTIONS]


def pytest_report_header(config: pytest.Config) -> str:
    return f"connect-offsets: {_options(config).describe()}"


def _new_daemon(options: KitOptions) -> DaemonProcess:
    from emulator.testing.process import EmbeddedDaemon, KafkaDaemon

    if options.mode == "kafka":
        assert options.bootstrap_servers is not None
        return KafkaDaemon(
            options.bootstrap_servers,
            offsets_topic=options.offsets_topic,
            config_topic=options.config_topic,
            status_topic=options.status_topic,
            extra_args=options.serve_args,
            start_timeout_s=options.start_timeout_s,
        )
    return EmbeddedDaemon(extra_args=options.serve_args, start_timeout_s=options.start_timeout_s)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Launch the daemon early when a collected test will need it (see the module docstring)."""
    config = session.config
    _say_where_an_overridden_url_comes_from(session)
    if config.option.collectonly or _options(config).mode == "url" or _DAEMON in config.stash:
        return
    if any(_DAEMON_FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
        config.stash[_DAEMON] = _new_daemon(_options(config)).launch()


def _say_where_an_overridden_url_comes_from(session: pytest.Session) -> None:
    """The header named the configured daemon; a conftest's ``connect_offsets_url`` (a compose
    stack's, say) replaces it, and then no daemon is launched: the run says so, and where from."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for item in session.items:
        info = getattr(item, "_fixtureinfo", None)
        definitions = info.name2fixturedefs.get("connect_offsets_url") if info is not None else None
        if reporter is None or not definitions or definitions[-1].func.__module__ == __name__:
            continue
        source = Path(inspect.getsourcefile(definitions[-1].func) or definitions[-1].func.__module__)
        where = (
            source.relative_to(session.config.rootpath) if source.is_relative_to(session.config.rootpath) else source
        )
        launched = any(_DAEMON_FIXTURE in getattr(i, "fixturenames", ()) for i in session.items)
        reporter.write_line(
            f"connect-offsets: connect_offsets_url is overridden ({where.as_posix()}): the kit uses that daemon"
            + ("" if launched else " and launches none")
        )
        return


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a launched daemon that no test got to use (e.g. the run stopped at the first failure).

    Last, after pytest has torn down the session's fixtures: a user's session fixture may still
    talk to the daemon in its teardown (restore a baseline, say)."""
    daemon = session.config.stash.get(_DAEMON, None)
    if daemon is not None:
        daemon.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    daemon = config.stash.get(_DAEMON, None)
    if daemon is None or daemon.ready_after_s is None or config.option.verbose < 1:
        return
    waited = config.stash.get(_WAITED, 0.0)
    terminalreporter.write_line(
        f"connect-offsets: daemon ready {daemon.ready_after_s:.3f} s after launch; "
        f"the first test using it waited {waited:.3f} s"
    )


@pytest.fixture(scope="session")
def connect_offsets_options(pytestconfig: pytest.Config) -> KitOptions:
    """The resolved kit settings: ``.bootstrap_servers``, ``.offsets_topic``, ``.config_topic``, ``.mode``."""
    return _options(pytestconfig)


@pytest.fixture(scope="session")
def connect_offsets_daemon(pytestconfig: pytest.Config) -> Iterator[DaemonProcess | None]:
    """The daemon this plugin runs for the session (None when ``--connect-offsets-url`` names one)."""
    options = _options(pytestconfig)
    if options.mode == "url":
        yield None
        return
    daemon = pytestconfig.stash.get(_DAEMON, None)
    if daemon is None:
        daemon = pytestconfig.stash[_DAEMON] = _new_daemon(options).launch()
    started = time.monotonic()
    from emulator.testing.process import DaemonStartError

    try:
        pytestconfig.stash[_DAEMON_URL] = daemon.wait_ready()
    except DaemonStartError as exc:
        # The daemon's own words (its log's tail) say why; the kit's traceback around them, repeated
        # for every test that needed the daemon, buried them (1,100 lines for 15 tests).
        pytest.fail(f"connect-offsets: {exc}", pytrace=False)
    pytestconfig.stash[_WAITED] = time.monotonic() - started
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def connect_offsets_url(connect_offsets_daemon: DaemonProcess | None, connect_offsets_options: KitOptions) -> str:
    """The URL of the daemon the kit talks to; override it in a conftest to bring your own."""
    from emulator.testing.process import wait_until_ready

    if connect_offsets_daemon is not None:
        return connect_offsets_daemon.url
    assert connect_offsets_options.url is not None
    return wait_until_ready(connect_offsets_options.url, connect_offsets_options.start_timeout_s)


@pytest.fixture
def connect_offsets(connect_offsets_url: str, request: pytest.FixtureRequest) -> Iterator[OffsetsKit]:
    """The test kit for this test; connectors it named or seeded are reset afterwards."""
    from emulator.testing.kit import OffsetsKit

    daemon = request.config.stash.get(_DAEMON, None)
    if (
        daemon is not None
        and daemon.proc is not None
        and daemon.proc.poll() is not None
        and request.config.stash.get(_DAEMON_URL, None) == connect_offsets_url
    ):
        # without this every later test says only "cannot reach" (or, once a test called the
        # daemon's kill() or stop(), which forget its URL, "the daemon is not running"): the exit
        # code and the log are what explain it
        pytest.fail(
            f"connect-offsets: the session's daemon exited (code {daemon.proc.returncode})\n{daemon.log_tail()}",
            pytrace=False,
        )
    kit = OffsetsKit(connect_offsets_url, context=request.node.name)
    try:
        yield kit
    finally:
        if kit.close():
            from emulator.testing import report

            request.node.add_report_section("teardown", "connect-offsets", report.not_reset(kit.refusals))
