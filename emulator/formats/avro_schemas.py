"""The project's Avro schemas, found the same way in a checkout and in an installed wheel.

Every Avro schema's home is ``schemas/`` at the repository root (the contract, for readers in other
languages); the wheel ships the same files inside the package (``emulator/schemas/``, see
pyproject.toml) because an installed package cannot reach the repository. Looking in the package
first and the checkout second keeps one file as the truth for the history archive and snapshots.
"""

from __future__ import annotations

import contextlib
from importlib import resources
from pathlib import Path


def schema_text(name: str) -> str:
    """The text of a schema file from ``schemas/``: the packaged copy first, then the checkout."""
    with contextlib.suppress(ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        packaged = resources.files("emulator").joinpath("schemas", name)
        if packaged.is_file():
            return packaged.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parents[2] / "schemas" / name
    try:
        return checkout.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(
            f"Avro schema {name} is neither packaged (emulator/schemas/) nor in a checkout ({checkout}): {exc}"
        ) from exc
