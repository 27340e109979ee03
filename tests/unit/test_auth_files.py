"""The scopes grammar and the tokens file, as an operator writes them: what each scope allows, and
a clear refusal (naming the line) for what the daemon cannot use."""

from __future__ import annotations

import pytest

from emulator.server.auth.scopes import ScopeError, grants_of, parse_scopes
from emulator.server.auth.tokens import TokensFileError, digest, find, mint, parse_tokens_file, token_line


def test_scopes_are_actions_on_connector_globs_and_imply_read() -> None:
    grants = grants_of(parse_scopes(["write:orders-*", "claim:billing-?", "read:[ab]x"]))
    assert grants.allows("write", "orders-1") and grants.allows("read", "orders-1")
    assert not grants.allows("claim", "orders-1") and not grants.allows("write", "Orders-1"), "case matters"
    assert grants.allows("claim", "billing-7") and grants.allows("read", "billing-7")
    assert not grants.allows("write", "billing-7"), "claiming is not writing"
    assert grants.allows("read", "ax") and not grants.allows("read", "cx")
    assert grants.allows_any("read") and not grants.admin
    everything = grants_of(parse_scopes(["admin"]))
    assert everything.admin and everything.allows("claim", "anything")
    assert parse_scopes(["write", " read:x "]) == ("write:*", "read:x")


@pytest.mark.parametrize(
    ("scope", "why"), [("delete", "unknown scope"), ("admin:orders-*", "takes no pattern"), ("read:", "empty pattern")]
)
def test_bad_scopes_are_refused_with_the_reason(scope: str, why: str) -> None:
    with pytest.raises(ScopeError, match=why):
        parse_scopes([scope])


def test_a_minted_token_is_found_by_its_hash_only() -> None:
    token = mint()
    assert token.startswith("cot_") and len(token) > 40
    line = token_line("ci", token, ["read:orders-*"])
    assert token not in line and digest(token).hex() in line
    stored = parse_tokens_file(f"# tokens\n\n{line}\n{token_line('other', mint(), ['admin'])}\n")
    found = find(stored, token)
    assert found is not None and found.name == "ci" and found.scopes == ("read:orders-*",)
    assert find(stored, token + "x") is None and find(stored, "") is None


def test_a_scope_with_a_space_is_refused_when_minting_not_as_line_1_of_a_file() -> None:
    with pytest.raises(ScopeError, match=r"^scope 'write:x y' holds a space: give each scope its own --scope$"):
        token_line("ab", mint(), ["write:x y"])


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ci:sha256$00:read", "line 1: the hash is not a SHA-256"),
        ("ci:md5$" + "0" * 32 + ":read", "unknown hash"),
        ("ci:sha256$" + "z" * 64 + ":read", "not hexadecimal"),
        ("\nci:sha256$" + "0" * 64 + ":write:x nope", "line 2: unknown scope 'nope'"),
        ("ci sha256", "expected NAME:sha256"),
        (f"a:sha256${'0' * 64}:read\na:sha256${'1' * 64}:read", "line 2: a second token named 'a'"),
    ],
)
def test_a_bad_tokens_file_line_is_refused_by_number(text: str, why: str) -> None:
    with pytest.raises(TokensFileError, match=why.replace("$", r"\$")):
        parse_tokens_file(text)
