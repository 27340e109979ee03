"""docs/configuration.md is generated from the settings tables and must be committed up to date."""

from __future__ import annotations

from pathlib import Path

from emulator.cli.config_docs import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_configuration_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: regenerate it with "
        "`.venv/bin/python -m emulator.cli.config_docs > docs/configuration.md` and commit it"
    )


def test_the_page_lists_every_serve_flag_and_the_client_url() -> None:
    page = render()
    for flag, env in [
        ("--bootstrap-servers", "CONNECT_OFFSETS_BOOTSTRAP_SERVERS"),
        ("--no-history", "CONNECT_OFFSETS_NO_HISTORY"),
        ("--claims-topic", "CONNECT_OFFSETS_CLAIMS_TOPIC"),
        ("--url", "CONNECT_OFFSETS_URL"),
    ]:
        assert f"| `{flag}` | `{env}` |" in page
