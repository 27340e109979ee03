"""The pytest plugin on the embedded log, as a user's repository meets it: sample test files run by
``pytest`` in a subprocess, the plugin loaded through its entry point.

Specification: ``connect_offsets`` gives each test the kit over one daemon per session, launched
when collection ends and only if a collected test needs it; what a test named or seeded is reset
after it; failures read as per-partition diffs and partition histories; a daemon started
elsewhere is used with ``--connect-offsets-url`` (or its variable, or an ini key); the shell's
``CONNECT_OFFSETS_*`` settings never reach the test daemon; bad kit settings are usage errors.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.testing import EmbeddedDaemon
from tests.testkit.conftest import NOT_THE_USERS, exited, run_inner

USER_TESTS = """
import asyncio

FILE = {"filename": "/data/in.txt"}


def test_seed_then_assert(connect_offsets):
    connector = connect_offsets.unique_name("file-src")
    connect_offsets.seed(connector, [(FILE, {"position": 42})])
    connect_offsets.assert_offsets(connector, [(FILE, {"position": 42})])
    assert connect_offsets.offset(connector, FILE) == {"position": 42}


def test_wait_for_what_the_pipeline_commits(connect_offsets):
    connector = connect_offsets.unique_name("file-src")
    connect_offsets.seed(connector, [(FILE, {"position": 1})])
    connect_offsets.client.alter(connector, {"offsets": [{"partition": FILE, "offset": {"position": 2}}]})
    assert connect_offsets.wait_for_offset(connector, FILE, {"position": 2}, timeout=10) == {"position": 2}
    assert connect_offsets.wait_for_offset(connector, FILE, lambda o: o["position"] > 1, timeout=10)


def test_async_client(connect_offsets):
    connector = connect_offsets.unique_name("file-src")
    connect_offsets.seed(connector, [(FILE, {"position": 3})])

    async def read():
        async with connect_offsets.async_client() as client:
            return await client.offsets(connector)

    assert asyncio.run(read()) == [{"partition": FILE, "offset": {"position": 3}}]


def test_the_options_say_where_the_daemon_is(connect_offsets_options, connect_offsets_daemon, connect_offsets_url):
    assert connect_offsets_options.mode == "embedded"
    assert connect_offsets_daemon.url == connect_offsets_url
"""


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_a_users_tests_seed_assert_and_wait_through_the_fixture(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_pipeline=USER_TESTS)

    result = run_inner(inner, "-v")

    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "connect-offsets: a daemon on the embedded log (one per session)",
            "plugins: *connect-offsets-emulator-*",
            "connect-offsets: daemon ready * s after launch; the first test using it waited * s",
        ]
    )


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_failures_read_as_a_diff_per_partition_and_a_partition_history(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_failing="""
        FILE = {"filename": "/data/in.txt"}

        def test_wrong_offsets(connect_offsets):
            connector = connect_offsets.unique_name("file-src")
            connect_offsets.seed(connector, [(FILE, {"position": 42}), ({"filename": "x"}, {"position": 1})])
            connect_offsets.assert_offsets(connector, [(FILE, {"position": 40})])

        def test_offset_never_arrives(connect_offsets):
            connector = connect_offsets.unique_name("file-src")
            connect_offsets.seed(connector, [(FILE, {"position": 10})])
            connect_offsets.seed(connector, [(FILE, {"position": 20})])
            connect_offsets.wait_for_offset(connector, FILE, lambda _: len(connect_offsets.history(connector)) == 2)
            connect_offsets.wait_for_offset(connector, FILE, {"position": 30}, timeout=0.5)
        """
    )

    result = run_inner(inner)

    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            '>       connect_offsets.assert_offsets(connector, [(FILE, {"position": 40})])',
            "E       AssertionError: offsets of connector 'file-src-test_wrong_offsets-*' differ from the expected "
            "ones in 2 partition(s):",
            'E         partition {"filename": "/data/in.txt"}:',
            'E           expected {"position": 40}',
            'E           actual   {"position": 42}',
            'E         partition {"filename": "x"}: unexpected, offset {"position": 1}',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            '>       connect_offsets.wait_for_offset(connector, FILE, {"position": 30}, timeout=0.5)',
            "E       AssertionError: connector 'file-src-test_offset_never_arrives-*' partition "
            '{"filename": "/data/in.txt"}: the offset did not become {"position": 30} within 0.5 s',
            'E         last seen: {"position": 20}',
            "E       recent history of this partition (oldest first, at most 10):",
            'E         *Z  daemon PATCH * {"position": 10}',
            'E         *Z  daemon PATCH * {"position": 20}',
        ]
    )
    assert "emulator/testing/kit.py" not in result.stdout.str()  # the kit's frames are hidden


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_one_daemon_serves_the_session_and_each_test_starts_from_reset_connectors(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_a="""
        import json, pathlib

        def test_first(connect_offsets):
            connector = connect_offsets.unique_name("shared")
            connect_offsets.seed(connector, [({"f": "a"}, {"p": 1})])
            pathlib.Path("first.json").write_text(json.dumps([connect_offsets.url, connector]))
        """,
        test_b="""
        import json, pathlib

        def test_second(connect_offsets):
            url, connector = json.loads(pathlib.Path("first.json").read_text())
            assert connect_offsets.url == url  # the same daemon: started once per session
            assert connect_offsets.offsets(connector) == []  # reset after the test that seeded it
        """,
    )

    run_inner(inner).assert_outcomes(passed=2)


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_snapshot_and_restore_keep_a_whole_log_between_tests(inner: pytest.Pytester) -> None:
    inner.makeconftest(
        """
        import pathlib
        import pytest

        @pytest.fixture(autouse=True)
        def restored_log(connect_offsets):
            baseline = connect_offsets.snapshot()
            yield
            connect_offsets.restore(baseline)

        @pytest.fixture(scope="session", autouse=True)
        def checked_at_session_end(connect_offsets_url):
            yield
            from emulator.testing import OffsetsKit  # the daemon still answers during session teardown

            with OffsetsKit(connect_offsets_url) as kit:
                pathlib.Path("at-end.txt").write_text(repr(kit.snapshot().records))
        """
    )
    inner.makepyfile(
        test_log="""
        def test_writes_anywhere(connect_offsets):
            connect_offsets.client.alter("not-unique", {"offsets": [{"partition": {"f": 1}, "offset": {"p": 9}}]},
                                         create=True)

        def test_sees_a_clean_log(connect_offsets):
            assert connect_offsets.offsets("not-unique") == []
            assert connect_offsets.client.records() == {}
        """
    )

    run_inner(inner).assert_outcomes(passed=2)
    assert (inner.path / "at-end.txt").read_text() == "{}"


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_the_daemon_launches_at_collection_only_when_a_test_needs_it(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conftest hook that runs after the plugin's counts the daemons' work directories."""
    tmp = inner.mkdir("tmp")
    monkeypatch.setenv("TMPDIR", str(tmp))  # where the inner session's daemon makes its work directory
    inner.makeconftest(
        f"""
        import pathlib, pytest

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(session):
            launched = len(list(pathlib.Path({str(tmp)!r}).glob("connect-offsets-*")))
            pathlib.Path("launched.txt").write_text(str(launched))
        """
    )
    inner.makepyfile(test_plain="def test_without_the_kit():\n    assert True\n")
    inner.makepyfile(test_kit="def test_with_the_kit(connect_offsets):\n    assert connect_offsets.url\n")

    result = run_inner(inner, "test_plain.py")
    result.assert_outcomes(passed=1)
    assert (inner.path / "launched.txt").read_text() == "0"

    result = run_inner(inner)
    result.assert_outcomes(passed=2)
    assert (inner.path / "launched.txt").read_text() == "1"
    assert list(tmp.glob("connect-offsets-*")) == []  # stopped, and its work directory removed


HANGING_TEST = """
import pathlib, time

def test_hangs(connect_offsets, connect_offsets_daemon):
    daemon = connect_offsets_daemon
    pathlib.Path("started.txt").write_text(f"{daemon.workdir} {daemon.proc.pid}")
    time.sleep(600)  # a CI job's timeout kills the run here
"""


@pytest.mark.slow  # two pytest sessions of their own, with a daemon each
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_runs_work_directory_is_removed_by_the_next_run(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """Killed, pytest runs no cleanup: its daemon exits with it, but the daemon's temporary directory
    stayed, and a CI that kills runs on timeout filled /tmp. The promise: it stays (with the log that
    says why the run hung) until the kit next starts a daemon, which removes it."""
    tmp = inner.mkdir("tmp")
    monkeypatch.setenv("TMPDIR", str(tmp))  # where the inner sessions' daemons make their work directories
    inner.makepyfile(test_hangs=HANGING_TEST)
    with (inner.path / "killed-run.out").open("wb") as out:
        run = inner.popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *NOT_THE_USERS, "test_hangs.py"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        started = inner.path / "started.txt"
        deadline = time.monotonic() + 120
        while not started.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), (inner.path / "killed-run.out").read_text()
        run.send_signal(sig)
        run.wait(30)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
    workdir, pid = started.read_text().split()
    assert exited(int(pid), within_s=30), "the killed run's daemon outlived it"  # SIGTERM when its parent died
    left = Path(workdir)
    assert left.parent == tmp and (left / "daemon.log").read_text()  # left behind, its log readable

    inner.makepyfile(test_hangs="def test_next_run(connect_offsets):\n    assert connect_offsets.url\n")
    run_inner(inner).assert_outcomes(passed=1)

    assert list(tmp.glob("connect-offsets-*")) == []  # the killed run's directory, and the next run's own


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_the_launch_overlaps_what_the_session_does_before_the_first_kit_test(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_order="""
        import time

        def test_something_slow_first():
            time.sleep(2.0)

        def test_then_the_kit(connect_offsets):
            assert connect_offsets.url
        """
    )

    result = run_inner(inner, "-v")

    result.assert_outcomes(passed=2)
    summary = re.search(
        r"daemon ready ([\d.]+) s after launch; the first test using it waited ([\d.]+) s", result.stdout.str()
    )
    assert summary is not None, result.stdout.str()
    ready, waited = float(summary.group(1)), float(summary.group(2))
    # The daemon started while the 2 s test ran: the kit's first test waits only for what was left.
    assert waited <= max(ready - 2.0, 0.0) + 0.3, (ready, waited)


@pytest.mark.slow  # a pytest session of its own, with a daemon
@pytest.mark.parametrize("how", ["option", "variable", "ini"])
def test_a_daemon_started_elsewhere_is_used_and_none_is_launched(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    inner.makepyfile(
        test_elsewhere="""
        def test_uses_it(connect_offsets, connect_offsets_daemon, connect_offsets_options):
            assert connect_offsets_daemon is None and connect_offsets_options.mode == "url"
            connector = connect_offsets.unique_name("remote")
            connect_offsets.seed(connector, [({"f": 1}, {"p": 1})])
            assert connect_offsets.offsets(connector) == [{"partition": {"f": 1}, "offset": {"p": 1}}]
        """
    )
    with EmbeddedDaemon() as daemon:
        url = daemon.url
        if how == "option":
            result = run_inner(inner, f"--connect-offsets-url={url}")
        elif how == "variable":
            monkeypatch.setenv("CONNECT_OFFSETS_TEST_URL", url)
            result = run_inner(inner)
        else:
            inner.makeini(f"[pytest]\nconnect_offsets_url = {url}\n")
            result = run_inner(inner)

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"connect-offsets: the daemon at {url}"])


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_the_shells_daemon_settings_never_reach_the_test_daemon(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONNECT_OFFSETS_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # a production broker's variable
    monkeypatch.setenv("CONNECT_OFFSETS_PORT", "not-a-port")
    inner.makepyfile(
        test_env="""
        def test_embedded(connect_offsets):
            assert connect_offsets.client.status()["log"].startswith("embedded")
        """
    )

    run_inner(inner).assert_outcomes(passed=1)


@pytest.mark.slow
def test_a_bad_kit_setting_is_a_usage_error(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_any="def test_any():\n    pass\n")

    result = run_inner(inner, "--connect-offsets-start-timeout=soon")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*connect-offsets: --connect-offsets-start-timeout: expected a number of seconds above 0, got 'soon'"]
    )


@pytest.mark.slow
def test_a_daemon_url_that_is_no_url_is_a_usage_error_at_once(inner: pytest.Pytester) -> None:
    """It waited out the start timeout for a daemon no request could reach, then failed the test."""
    inner.makepyfile(test_any="def test_any(connect_offsets):\n    pass\n")

    # A start timeout far above what a pytest session takes to start on a loaded machine (the
    # duration below counts that start too): the previous kit waited all of it.
    result = run_inner(inner, "--connect-offsets-url=not-a-url", "--connect-offsets-start-timeout=120")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*connect-offsets: --connect-offsets-url: expected the daemon's http:// or https:// URL with a host, "
            "got 'not-a-url'"
        ]
    )
    assert result.duration < 60


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_serve_arguments_in_pyproject_may_be_a_toml_list(inner: pytest.Pytester) -> None:
    inner.makepyprojecttoml('[tool.pytest.ini_options]\nconnect_offsets_serve_args = ["--offsets-partitions", "3"]\n')
    inner.makepyfile(
        test_list="""
        def test_the_daemon_got_them(connect_offsets, connect_offsets_options):
            assert connect_offsets_options.serve_args == ["--offsets-partitions", "3"]
            assert connect_offsets.client.status()["partitions"] == 3
        """
    )

    result = run_inner(inner, "-W", "error::pytest.PytestRemovedIn10Warning")

    result.assert_outcomes(passed=1)


@pytest.mark.slow  # a pytest session of its own, with a daemon
@pytest.mark.parametrize(
    ("ending", "code", "log"),
    [
        ("connect_offsets_daemon.proc.kill(); connect_offsets_daemon.proc.wait(10)", "-9", "--- daemon log*"),
        # kill() and stop() forget the URL (and remove the work directory with the log): the next
        # test was told only "the daemon is not running (start() it, ...)"
        ("connect_offsets_daemon.kill()", "-9", "--- no daemon log ---"),
        ("connect_offsets_daemon.stop()", "*", "--- no daemon log ---"),
    ],
    ids=["died", "kill", "stop"],
)
def test_a_daemon_that_died_fails_the_next_test_with_its_log(
    inner: pytest.Pytester, ending: str, code: str, log: str
) -> None:
    inner.makepyfile(
        test_dies=f"""
        def test_kills_the_daemon(connect_offsets, connect_offsets_daemon):
            {ending}

        def test_after_it(connect_offsets):
            pass
        """
    )

    result = run_inner(inner)

    result.assert_outcomes(passed=1, errors=1)  # the kit's fixture refuses, with the daemon's log
    result.stdout.fnmatch_lines([f"*connect-offsets: the session's daemon exited (code {code})", f"*{log}"])
    result.stdout.no_fnmatch_line("*the daemon is not running*")


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_a_reset_the_daemon_forbids_is_reported_with_the_daemons_reason(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 403 was reported as "running, claimed, or the daemon is gone", none of which it was."""
    (inner.path / "users.properties").write_text("tester=tester-pw\n")
    (inner.path / "scopes.toml").write_text('[scopes]\ntester = ["read:*", "write:mine-*"]\n')
    monkeypatch.setenv("CONNECT_OFFSETS_USER", "tester")  # how the kit's clients authenticate
    monkeypatch.setenv("CONNECT_OFFSETS_PASSWORD", "tester-pw")
    inner.makepyfile(
        test_scoped="""
        def test_names_one_it_may_not_write(connect_offsets):
            mine = connect_offsets.unique_name("mine")
            connect_offsets.seed(mine, [({"f": 1}, {"p": 1})])
            connect_offsets.unique_name("theirs")  # its reset after the test is forbidden
        """
    )

    result = run_inner(
        inner, "--connect-offsets-serve-args=--credentials-file users.properties --scopes-file scopes.toml"
    )

    result.assert_outcomes(passed=1)  # a teardown must not fail the test
    result.stdout.fnmatch_lines(
        [
            "*connect-offsets*",
            "not reset: theirs-test_names_one_it_may_not_write-* the daemon refused it (403): tester (basic) may "
            "not do this: needs write on connector 'theirs-test_names_one_it_may_not_write-*'",
        ]
    )
    result.stdout.no_fnmatch_line("*running, claimed, or the daemon is gone*")


@pytest.mark.slow  # a pytest session of its own, with a daemon
def test_a_conftest_that_overrides_the_url_is_named_and_no_daemon_is_launched(inner: pytest.Pytester) -> None:
    """docs/testing.md: override ``connect_offsets_url`` to bring your own daemon (a compose stack's).
    The header can only name the configured daemon; the run then says whose URL the kit uses."""
    with EmbeddedDaemon() as daemon:
        inner.makeconftest(
            f"""
            import pytest

            @pytest.fixture(scope="session")
            def connect_offsets_url():
                return {daemon.url!r}
            """
        )
        inner.makepyfile(
            test_own="""
            def test_uses_it(connect_offsets):
                connector = connect_offsets.unique_name("own")
                connect_offsets.seed(connector, [({"f": 1}, {"p": 1})])
                assert connect_offsets.offsets(connector) == [{"partition": {"f": 1}, "offset": {"p": 1}}]
            """
        )
        result = run_inner(inner, "-v")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["connect-offsets: connect_offsets_url is overridden (conftest.py): the kit uses that daemon and launches none"]
    )
    result.stdout.no_fnmatch_line("connect-offsets: daemon ready*")


@pytest.mark.slow  # a pytest session of its own, whose daemon fails to start
def test_a_daemon_that_cannot_start_is_reported_in_its_own_words_without_the_kits_traceback(
    inner: pytest.Pytester,
) -> None:
    inner.makepyfile(
        test_two="""
        def test_one(connect_offsets):
            pass

        def test_two(connect_offsets):
            pass
        """
    )
    result = run_inner(inner, "--connect-offsets-serve-args=--no-such-flag")
    result.assert_outcomes(errors=2)
    output = result.stdout.str()
    assert "unrecognized arguments: --no-such-flag" in output
    assert "emulator/testing/plugin.py" not in output and "Traceback" not in output
