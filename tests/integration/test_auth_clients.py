"""Every client of the project carries credentials to a daemon that requires them: the sync and
async clients, the history client, the CLI (flags, variables, a Basic password from the
environment), the ``OffsetBackingStore`` adapter, Spark's committer, background committer,
listener and batch sources (their pure parts, no SparkSession: the code path is the same),
``spark-handoff``, and transfers to ``http://``. Each is also shown refused without them."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.client import AsyncOffsetsClient, AuthenticationError, Credentials, ForbiddenError, OffsetsClient
from emulator.client.backing_store import DaemonOffsetBackingStore
from emulator.client.credentials import use_default
from emulator.client.history import HistoryClient
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.integration.auth_helpers import PASSWORDS, SecurityFiles, cli, write_security_files

BODY = {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": 3}}]}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> SecurityFiles:
    return write_security_files(tmp_path_factory.mktemp("security"))


@pytest.fixture(scope="module")
def daemon(files: SecurityFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    logs = tmp_path_factory.mktemp("clients-daemon")
    started = DaemonProcess(["--data-dir", str(logs / "data"), *files.serve_args()], free_port(), logs / "log").start()
    yield started
    started.stop()


@pytest.fixture(autouse=True)
def no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for variable in ("TOKEN", "USER", "PASSWORD", "CA", "CLIENT_CERT", "CLIENT_KEY"):
        monkeypatch.delenv(f"CONNECT_OFFSETS_{variable}", raising=False)
    use_default(None)
    yield
    use_default(None)


def orders() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}"


def writer(files: SecurityFiles) -> Credentials:
    return Credentials(token=files.tokens["writer"])


@pytest.mark.slow
def test_sync_client_with_a_token_and_refused_without(daemon: DaemonProcess, files: SecurityFiles) -> None:
    name = orders()
    with OffsetsClient(daemon.url, credentials=writer(files)) as client:
        assert "altered successfully" in client.alter(name, BODY, create=True)["message"]
        with pytest.raises(ForbiddenError):
            client.alter("billing", BODY, create=True)
    with OffsetsClient(daemon.url) as anonymous, pytest.raises(AuthenticationError) as refused:
        anonymous.offsets(name)
    assert refused.value.status == 401 and refused.value.kind == "unauthenticated"


def test_clients_take_the_token_from_the_environment(
    daemon: DaemonProcess, files: SecurityFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONNECT_OFFSETS_TOKEN", files.tokens["writer"])
    name = orders()
    with OffsetsClient(daemon.url) as client:
        client.alter(name, BODY, create=True)
        assert client.offsets(name) == BODY["offsets"]


def test_async_client_with_basic_credentials(daemon: DaemonProcess) -> None:
    async def run() -> list[str]:
        credentials = Credentials(user="alice", password=PASSWORDS["alice"])
        async with AsyncOffsetsClient(daemon.url, credentials=credentials) as client:
            return await client.connectors()

    assert isinstance(asyncio.run(run()), list)


def test_history_rollback_sends_json_without_a_body(daemon: DaemonProcess, files: SecurityFiles) -> None:
    name = orders()
    with HistoryClient(daemon.url, credentials=writer(files)) as client:
        client.alter(name, BODY, create=True)
        rolled = client.rollback(name, 0, dry_run=True)
    assert rolled["dry_run"] is True


@pytest.mark.slow
def test_cli_token_flag_variable_and_basic_password_from_the_environment(
    daemon: DaemonProcess, files: SecurityFiles
) -> None:
    name = orders()
    with OffsetsClient(daemon.url, credentials=writer(files)) as client:
        client.alter(name, BODY, create=True)
    url = ("--url", daemon.url, "--json")
    by_flag = cli("get", name, *url, "--token", files.tokens["writer"])
    assert by_flag.returncode == 0, by_flag.stderr
    assert json.loads(by_flag.stdout) == BODY
    by_variable = cli("get", name, *url, env={"CONNECT_OFFSETS_TOKEN": files.tokens["claimer"]})
    assert by_variable.returncode == 0, by_variable.stderr
    as_bob = cli("get", name, *url, "--user", "bob", env={"CONNECT_OFFSETS_PASSWORD": PASSWORDS["bob"]})
    assert as_bob.returncode == 0, as_bob.stderr
    refused = cli("get", name, *url)
    assert refused.returncode == 1 and "User cannot access the resource" in refused.stderr and "401" in refused.stderr
    forbidden = cli(
        "reset", name, "--yes", "--url", daemon.url, "--user", "bob", env={"CONNECT_OFFSETS_PASSWORD": "bob-pw"}
    )
    assert forbidden.returncode == 1 and "(HTTP 403)" in forbidden.stderr
    no_password = cli("get", name, *url, "--user", "bob")
    assert no_password.returncode == 2 and "CONNECT_OFFSETS_PASSWORD" in no_password.stderr
    both = cli("get", name, *url, "--user", "bob", "--token", "x", env={"CONNECT_OFFSETS_PASSWORD": "p"})
    assert both.returncode == 2 and "either a token or a user" in both.stderr
    # a flag wins over the other mechanism's variable (it was refused as "either a token or a user")
    exported = {"CONNECT_OFFSETS_TOKEN": files.tokens["writer"], "CONNECT_OFFSETS_PASSWORD": PASSWORDS["bob"]}
    bob_over_token = cli("reset", name, "--yes", "--url", daemon.url, "--user", "bob", env=exported)
    assert bob_over_token.returncode == 1 and "(HTTP 403)" in bob_over_token.stderr, "bob, who may only read"
    token_over_user = cli("get", name, *url, "--token", files.tokens["writer"], env={"CONNECT_OFFSETS_USER": "carol"})
    assert token_over_user.returncode == 0, token_over_user.stderr
    both_variables = cli("get", name, *url, env={**exported, "CONNECT_OFFSETS_USER": "bob"})
    assert both_variables.returncode == 2 and "either a token or a user" in both_variables.stderr


def test_backing_store_with_a_token_scoped_to_its_connector(daemon: DaemonProcess, files: SecurityFiles) -> None:
    name = orders()
    key, value = json.dumps([name, {"f": "s"}], separators=(",", ":")).encode(), b'{"pos":9}'
    store = DaemonOffsetBackingStore()
    store.configure({"offset.storage.url": daemon.url, "offset.storage.token": files.tokens["writer"]})
    store.start()
    try:
        store.set({key: value}).result(timeout=30)
        assert store.get([key]).result(timeout=30) == {key: value}
        foreign = json.dumps(["billing", {"f": "s"}]).encode()
        with pytest.raises(ForbiddenError):
            store.set({foreign: value}).result(timeout=30)
    finally:
        store.stop()
    anonymous = DaemonOffsetBackingStore(daemon.url)
    anonymous.start()
    try:
        with pytest.raises(AuthenticationError):
            anonymous.get([key]).result(timeout=30)
    finally:
        anonymous.stop()


def test_spark_committer_background_committer_and_listener_carry_the_token(
    daemon: DaemonProcess, files: SecurityFiles
) -> None:
    pytest.importorskip("pyspark", reason="the Spark extra is not installed")
    from emulator.spark.background import committer_for
    from emulator.spark.committer import DaemonOffsets
    from emulator.spark.listener import ListenerCommitter
    from emulator.spark.options import daemon_credentials

    credentials = daemon_credentials({"token": files.tokens["writer"]})
    name = orders()
    with DaemonOffsets(daemon.url, credentials=credentials) as committer:
        outcome = committer.commit(name, [({"f": "a"}, {"pos": 1})])
        assert outcome.written and committer.find(name, {"f": "a"}) == {"pos": 1}

    background = committer_for(daemon.url, name, credentials)
    background.submit([({"f": "a"}, {"pos": 2})])
    assert background.flush(30)
    listener = ListenerCommitter(spark=None, url=daemon.url, credentials=credentials)
    with listener._new_client("a-query-id") as listeners_client:  # what each query's publishing thread uses
        assert listeners_client.find(name, {"f": "a"}) == {"pos": 2}

    with DaemonOffsets(daemon.url, credentials=Credentials()) as anonymous, pytest.raises(AuthenticationError):
        anonymous.commit(name, [({"f": "a"}, {"pos": 3})])


def test_spark_batch_sources_read_with_the_token_option(daemon: DaemonProcess, files: SecurityFiles) -> None:
    pytest.importorskip("pyspark", reason="the Spark extra is not installed")
    from emulator.history.spark import rows as history_rows
    from emulator.spark.offsets_source import current_rows
    from emulator.spark.options import daemon_credentials

    name = orders()
    with OffsetsClient(daemon.url, credentials=writer(files)) as client:
        client.alter(name, BODY, create=True)
    options = {"url": daemon.url, "connector": name, "token": files.tokens["claimer"]}
    rows = list(current_rows(daemon.url, name, daemon_credentials(options)))
    assert [(r[0], r[1], r[2]) for r in rows] == [(name, '{"f":"a"}', '{"pos":3}')]
    assert rows[0][3] is not None, "the record's coordinates came from /offsets/records, with the token"
    assert [r[0] for r in history_rows(options)] == [name]
    with pytest.raises(AuthenticationError):
        list(current_rows(daemon.url, name, Credentials()))


@pytest.mark.slow
def test_spark_handoff_with_a_token(daemon: DaemonProcess, files: SecurityFiles, tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    (tmp_path / "offsets" / "0").write_text('v1\n{}\n{"n": 5}')
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    name = orders()
    args = (
        "spark-handoff",
        "--checkpoint",
        str(tmp_path),
        "--connector",
        name,
        "--create",
        "--url",
        daemon.url,
        "--json",
    )
    handed = cli(*args, env={"CONNECT_OFFSETS_TOKEN": files.tokens["writer"]})
    assert handed.returncode == 0, handed.stderr
    assert (
        json.loads(handed.stdout)["written"] == [{"partition": {"spark_source": 0}, "offset": {"offset": 5}}]
        or (json.loads(handed.stdout)["written"])
    )
    refused = cli(*args)
    assert refused.returncode == 1 and "401" in refused.stderr


@pytest.mark.slow
def test_transfers_to_and_from_a_daemon_carry_credentials(
    daemon: DaemonProcess, files: SecurityFiles, tmp_path: Path
) -> None:
    name = orders()
    with OffsetsClient(daemon.url, credentials=writer(files)) as client:
        client.alter(name, BODY, create=True)
    exported = tmp_path / "out.json"
    token = {"CONNECT_OFFSETS_TOKEN": files.tokens["writer"]}
    one = cli("export", "--from", daemon.url, "--to", f"kip875:{exported}", "--connector", name, "--quiet", env=token)
    assert one.returncode == 0, one.stderr
    assert name in exported.read_text()
    everything = cli("export", "--from", daemon.url, "--to", f"kip875:{tmp_path / 'all.json'}", "--quiet", env=token)
    assert everything.returncode != 0 and "admin" in everything.stderr, "an unfiltered export needs admin"
    admin_url = daemon.url.replace("://", f"://alice:{PASSWORDS['alice'].replace(' ', '%20')}@")
    migrated = cli("migrate", "--from", f"kip875:{exported}", "--to", admin_url, "--write-all", "--json", "--quiet")
    assert migrated.returncode == 0, migrated.stderr
    report = json.loads(migrated.stdout)
    assert PASSWORDS["alice"].split(":")[0] not in migrated.stdout, "the password is never printed back"
    assert report["to"].startswith("http://alice:***@") and report["written"] >= 1
