"""A command loads only its own command group, and ``serve`` never the client side.

Every ``connect-offsets serve`` start imported the HTTP client (httpx, with click and rich behind it),
the transfers and Spark's modules through the CLI's other command groups: 0.15–0.2 s the daemon
never uses, paid by every daemon the suite and users' test kits start (``emulator.cli.main``). On the
embedded log it imported the Kafka client too (confluent_kafka and ``emulator.logs.kafka``, for a
Connect cluster's topics and sinks it has none of).
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.cli.main import COMMAND_GROUPS, COMMAND_NAMES, Parser, build_parser, command_named

ROOT = Path(__file__).resolve().parents[2]

# What ``connect-offsets serve`` imports, in its order: the console script's ``emulator.cli.main``,
# the parser ``main`` builds for it, ``emulator.cli.serve``'s ``run`` and the daemon it starts.
SERVE_PATH = """
import sys
from emulator.cli.main import build_parser, command_named
build_parser(command_named(["serve", "--port", "0"]))
import emulator.server.listen, emulator.model.errors, emulator.server.wiring, emulator.server.app
import emulator.logs.embedded.offsets_log
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] == "httpx" or m.startswith(UNUSED))))
"""
UNUSED = (
    "emulator.client.http",
    "emulator.client.history",
    "emulator.transfer",
    "emulator.spark",
    "confluent_kafka",
    "emulator.logs.kafka",
    "emulator.connect_cluster.cluster",
    "h11",  # uvicorn's h11 protocol: only with --tls-client-ca (emulator.server.auth.peer_certificate)
    "uvicorn.protocols.http.h11_impl",
)


def test_serve_on_the_embedded_log_imports_neither_httpx_kafka_nor_the_other_commands_modules() -> None:
    code = f"UNUSED = {UNUSED!r}\n{SERVE_PATH}"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


def test_each_group_registers_the_commands_it_is_listed_with() -> None:
    for module, names in COMMAND_GROUPS.items():
        sub = Parser(prog="connect-offsets").add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == names, module


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(action.choices)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["serve"], "serve"),
        (["--port", "19800", "serve"], "serve"),
        (["get", "serve"], "get"),  # a connector named serve
        (["--json", "get", "serve"], "get"),
        (["--url", "http://127.0.0.1:1", "token", "mint"], "token"),
        (["--help", "serve"], None),  # the top level's help lists every command
        (["--version", "get"], None),
        (["no-such-command"], None),
        ([], None),
    ],
)
def test_the_command_is_found_as_the_parser_finds_it(argv: list[str], command: str | None) -> None:
    assert command_named(argv) == command
    parser = build_parser(command)
    assert _commands(parser) == (
        COMMAND_NAMES if command is None else set(next(names for names in COMMAND_GROUPS.values() if command in names))
    )
    assert parser.command_names == COMMAND_NAMES
