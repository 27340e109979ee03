"""The command line as users meet it: bad settings, ``--help``, ``--version``, abbreviations, a busy port.

Every command runs as a real ``connect-offsets`` process with a clean ``CONNECT_OFFSETS_*`` environment.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from emulator.client.errors import DaemonUnavailable
from emulator.client.http import OffsetsClient
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import free_port
from tests.fixtures.sockets import silent_port


def cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}
    return run_cli(*args, env={**clean, **(env or {})}, timeout_s=timeout_s)


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"], ["list", "--help"]])
def test_help_works_whatever_the_environment_holds(args: list[str]) -> None:
    shown = cli(*args, env={"CONNECT_OFFSETS_PORT": "abc", "CONNECT_OFFSETS_URL": "nowhere"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: connect-offsets")
    assert shown.stderr == ""


@pytest.mark.slow
def test_a_bad_environment_value_stops_serve_with_one_line_and_exit_2(tmp_path: Path) -> None:
    result = cli("serve", "--data-dir", str(tmp_path), env={"CONNECT_OFFSETS_PORT": "abc"})
    assert result.returncode == 2
    assert result.stderr == "error: CONNECT_OFFSETS_PORT: expected an integer within 0..65535, got 'abc'\n"
    assert not (tmp_path / "history").exists()  # nothing was opened


def test_a_bad_flag_value_stops_serve_with_one_line_and_exit_2(tmp_path: Path) -> None:
    result = cli("serve", "--data-dir", str(tmp_path), "--history-rotate-bytes", "lots")
    assert result.returncode == 2
    assert result.stderr == (
        "error: --history-rotate-bytes: expected a size in bytes, optionally with K/M/G (binary), "
        "e.g. 64MiB, got 'lots'\n"
    )


def test_a_bad_url_variable_stops_a_client_command_with_one_line_and_exit_2() -> None:
    result = cli("get", "some-connector", env={"CONNECT_OFFSETS_URL": "127.0.0.1:8081"})
    assert result.returncode == 2
    assert result.stderr == "error: CONNECT_OFFSETS_URL: expected an http:// or https:// URL, got '127.0.0.1:8081'\n"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """(certificate, key): a certificate whose key is in another file."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    subprocess.run([*request, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"CONNECT_OFFSETS_TLS_CERT": "/nonexistent.pem"},
            "--tls-cert /nonexistent.pem: cannot be read: No such file or directory "
            "(--tls-cert came from CONNECT_OFFSETS_TLS_CERT)",
        ),
        (
            {"CONNECT_OFFSETS_TLS_CERT": "{cert}", "CONNECT_OFFSETS_TLS_KEY": "/nonexistent.pem"},
            "--tls-key /nonexistent.pem: cannot be read: No such file or directory "
            "(--tls-key came from CONNECT_OFFSETS_TLS_KEY)",
        ),
        (
            {"CONNECT_OFFSETS_TOKENS_FILE": "/nonexistent"},
            "cannot read the tokens file (--tokens-file) /nonexistent: No such file or directory "
            "(--tokens-file came from CONNECT_OFFSETS_TOKENS_FILE)",
        ),
        (
            {"CONNECT_OFFSETS_CREDENTIALS_FILE": "{empty}"},
            "credentials file {empty} lists no user",
        ),
        (
            {"CONNECT_OFFSETS_URL_FILE": "/nonexistent/url"},
            "cannot write --url-file /nonexistent/url: the directory /nonexistent does not exist "
            "(--url-file came from CONNECT_OFFSETS_URL_FILE)",
        ),
    ],
    ids=["tls-cert", "tls-key", "tokens-file", "credentials-file", "url-file"],
)
def test_a_file_setting_from_the_environment_that_cannot_be_used_stops_serve_naming_the_variable(
    tmp_path: Path, variables: dict[str, str], expected: str
) -> None:
    """docs/configuration.md: a bad value stops the command with one line naming the flag or variable.
    A file is found unusable only when used, after the settings were built; the refusal still names
    the variable the path came from, the file that failed, and never a setting left unset (``None``)."""
    cert, _ = _self_signed(tmp_path)
    (empty := tmp_path / "empty").write_text("")
    env = {name: value.format(cert=cert, empty=empty) for name, value in variables.items()}
    result = cli("serve", "--data-dir", str(tmp_path / "data"), "--port", "0", env=env)
    assert result.returncode == 2, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: " + expected.format(cert=cert, empty=empty)), last
    assert last.endswith(")") and "came from CONNECT_OFFSETS_" in last
    assert "None" not in last


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"CONNECT_OFFSETS_CA": "/nonexistent.pem"},
            "error: --ca: cannot load the CA bundle /nonexistent.pem: No such file or directory "
            "(--ca came from CONNECT_OFFSETS_CA)",
        ),
        (
            {"CONNECT_OFFSETS_CA": "{cert}", "CONNECT_OFFSETS_CLIENT_CERT": "/nonexistent.pem"},
            "error: --client-cert: cannot read the client certificate /nonexistent.pem: No such file or directory "
            "(--client-cert came from CONNECT_OFFSETS_CLIENT_CERT)",
        ),
        (
            {"CONNECT_OFFSETS_CLIENT_CERT": "{cert}", "CONNECT_OFFSETS_CLIENT_KEY": "/nonexistent.pem"},
            "error: --client-key: cannot read the client key /nonexistent.pem: No such file or directory "
            "(--client-key came from CONNECT_OFFSETS_CLIENT_KEY)",
        ),
    ],
    ids=["ca", "client-cert", "client-key"],
)
def test_a_tls_file_from_the_environment_that_cannot_be_read_stops_a_client_command_naming_it(
    tmp_path: Path, variables: dict[str, str], expected: str
) -> None:
    """The client's TLS files are refused naming the one that failed, its flag and its variable (it
    was ``cannot load the TLS files (/nonexistent.pem ): …``: neither, and a stray blank)."""
    cert, _ = _self_signed(tmp_path)
    env = {"CONNECT_OFFSETS_URL": "https://127.0.0.1:1"} | {k: v.format(cert=cert) for k, v in variables.items()}
    result = cli("get", "some-connector", env=env)
    assert result.returncode == 2
    assert result.stderr == expected + "\n"


@pytest.mark.slow
def test_timeout_bounds_the_wait_for_a_daemon_that_accepts_and_never_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client command waited 90 s there, and ``--retry-for 0`` did not shorten it."""
    with silent_port() as port:
        url = f"http://127.0.0.1:{port}"
        for args, env in (
            (("get", "c", "--timeout", "1s"), {}),
            (("list", "--retry-for", "0"), {"CONNECT_OFFSETS_TIMEOUT": "1500ms"}),
            (("status", "--timeout", "1"), {}),
        ):
            started = time.monotonic()
            done = cli(*args, "--url", url, env=env, timeout_s=30)
            assert done.returncode == 3, done.stderr
            assert time.monotonic() - started < 15, args
            assert "accepted the connection but did not answer" in done.stderr and " within 1" in done.stderr, args
        monkeypatch.setenv("CONNECT_OFFSETS_TIMEOUT", "1s")
        started = time.monotonic()
        with OffsetsClient(url) as client, pytest.raises(DaemonUnavailable, match="within 1 s"):
            client.connectors()  # a library client built without timeout_s reads the variable too
        assert time.monotonic() - started < 10
    refused = cli("list", "--timeout", "0")
    assert refused.returncode == 2
    assert refused.stderr == "error: --timeout: expected a positive duration such as 10s, 2m, 500ms, got '0'\n"
    bad_env = cli("list", env={"CONNECT_OFFSETS_TIMEOUT": "soon"})
    assert bad_env.returncode == 2 and bad_env.stderr.startswith("error: CONNECT_OFFSETS_TIMEOUT: expected")


@pytest.mark.slow
def test_version_prints_the_installed_package_version() -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"connect-offsets {metadata.version('connect-offsets-emulator')}\n"


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        (["serve", "--bootstrap-server", "localhost:9092"], "--bootstrap-server"),
        (["get", "some-connector", "--ur", "http://127.0.0.1:1"], "--ur"),
        (["history", "some-connector", "--lim", "3"], "--lim"),
    ],
)
def test_an_abbreviated_flag_is_refused(args: list[str], prefix: str) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert f"unrecognized arguments: {prefix}" in result.stderr


@pytest.mark.parametrize(
    ("args", "command", "unknown"),
    [
        (["history", "some-connector", "--since", "yesterday"], "history", "--since yesterday"),
        (["token", "mint", "spark", "--scope", "read", "--ttl", "1d"], "token mint", "--ttl 1d"),
    ],
)
def test_an_unknown_option_is_refused_with_the_usage_of_the_command_given(
    args: list[str], command: str, unknown: str
) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"usage: connect-offsets {command} ")
    assert f"connect-offsets {command}: error: unrecognized arguments: {unknown}\n" in result.stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", free_port()))
        other.listen()
        yield int(other.getsockname()[1])


@pytest.mark.slow
def test_serve_on_a_busy_port_says_so_in_one_line_and_exits_2(busy_port: int, tmp_path: Path) -> None:
    result = cli("serve", "--data-dir", str(tmp_path), "--port", str(busy_port))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: cannot listen on 127.0.0.1:{busy_port}: the address is already in use "
        "(another daemon? choose another --port)"
    ]
    assert result.stderr.splitlines()[-1] == errors[0]


@pytest.mark.slow
def test_a_busy_port_from_the_environment_is_named_as_the_variable_too(busy_port: int, tmp_path: Path) -> None:
    """An operator who never typed ``--port`` was told to choose another one."""
    result = cli("serve", "--data-dir", str(tmp_path), env={"CONNECT_OFFSETS_PORT": str(busy_port)})
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot listen on 127.0.0.1:{busy_port}: the address is already in use "
        "(another daemon? choose another --port) (--port came from CONNECT_OFFSETS_PORT)"
    )


@pytest.mark.slow
def test_serve_on_an_unknown_host_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    result = cli(
        "serve",
        "--data-dir",
        str(tmp_path),
        "--host",
        "no-such-host.invalid",
        "--insecure-no-auth",  # not loopback: without it the daemon refuses before trying to listen
        "--port",
        str(free_port()),
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: cannot listen on no-such-host.invalid:") and "check --host" in last


@pytest.mark.slow
@pytest.mark.parametrize("from_environment", [False, True], ids=["flag", "variable"])
def test_a_data_directory_that_is_a_file_names_the_setting_and_where_it_came_from(
    tmp_path: Path, from_environment: bool
) -> None:
    """mkdir's own words were ``[Errno 17] File exists``, naming neither the problem nor the setting."""
    taken = tmp_path / "data"
    taken.write_text("not a directory")
    setting = {"CONNECT_OFFSETS_DATA_DIR": str(taken)} if from_environment else {}
    flag = [] if from_environment else ["--data-dir", str(taken)]
    result = cli("serve", *flag, "--port", str(free_port()), env=setting)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: --data-dir: data directory {taken} exists and is not a directory"
        + (" (--data-dir came from CONNECT_OFFSETS_DATA_DIR)" if from_environment else "")
    )


@pytest.mark.slow
@pytest.mark.parametrize("history_dir", [False, True], ids=["default-place", "history-dir"])
def test_a_history_directory_that_cannot_be_used_names_the_setting_that_placed_it(
    tmp_path: Path, history_dir: bool
) -> None:
    """The history is kept under the data directory unless ``--history-dir`` moves it: the refusal
    says which of the two to change."""
    data = tmp_path / "data"
    data.mkdir()
    blocker = tmp_path / "elsewhere" if history_dir else data / "history"
    blocker.write_text("not a directory")
    moved = ["--history-dir", str(blocker)] if history_dir else []
    result = cli("serve", "--data-dir", str(data), *moved, "--port", str(free_port()))
    assert result.returncode == 2
    last = result.stderr.splitlines()[-1]
    assert last.startswith(f"error: {'--history-dir' if history_dir else '--data-dir'}: history directory {blocker}/")
    assert "cannot be used" in last and "--no-history" in last
    assert last.endswith("unless --history-dir moves it") != history_dir
