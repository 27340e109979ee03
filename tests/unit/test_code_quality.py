"""The team's static checks are part of the suite: ruff (lint and format) and mypy --strict must stay clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = run(str(Path(sys.executable).parent / "ruff"), "check", "emulator", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_changes_nothing() -> None:
    result = run(str(Path(sys.executable).parent / "ruff"), "format", "--check", "emulator", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr + "\n(run: ruff format emulator tests benchmarks)"


def test_mypy_strict_finds_nothing() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
