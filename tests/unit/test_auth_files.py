"""The scopes grammar and the tokens file, as an operator writes them: what each scope allows, and
a clear refusal (naming the line) for what the daemon cannot use."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from emulator.server.auth.authenticate import Authenticator
from emulator.server.auth.config import Security
from emulator.server.auth.credentials import CredentialFiles, CredentialsError, CredentialStore
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


def test_a_token_name_starting_with_a_hash_is_refused_when_minting() -> None:
    """Its line would start with ``#``, which the tokens file reads as a comment: the daemon would
    answer the token 401 "unknown token" while ``token mint`` had printed it as working (security QA LOW)."""
    with pytest.raises(TokensFileError, match=r"^the token's name '#ci' must not start with '#': .* comment$"):
        token_line("#ci", mint(), ["read"])
    assert parse_tokens_file(token_line("c#i", mint(), ["read"]))[0].name == "c#i", "a '#' further on is no comment"


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


def _store(tmp_path: Path, **lines: list[str]) -> tuple[CredentialStore, dict[str, Path]]:
    paths = {}
    for kind, content in lines.items():
        paths[kind] = tmp_path / kind
        paths[kind].write_text("".join(f"{line}\n" for line in content))
    return CredentialStore(CredentialFiles(**paths)), paths


def test_a_reload_revokes_a_removed_token_even_while_another_line_has_a_typo(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (kept, kept_line), (revoked, revoked_line) = _minted("kept"), _minted("revoked")
    store, paths = _store(tmp_path, tokens=[kept_line, revoked_line])
    assert find(store.current.tokens, revoked) is not None
    paths["tokens"].write_text(f"{kept_line}\ntypo:sha256$not-hex:read\n")
    assert store.reload() is False, "a line was skipped"
    assert find(store.current.tokens, revoked) is None, "the removed line is revoked"
    assert find(store.current.tokens, kept) is not None, "the valid line still applies"
    assert f"tokens file {paths['tokens']}:2: the hash is not hexadecimal; line skipped" in caplog.text
    assert store.skipped == 1 and store.last_error is not None and f"{paths['tokens']}:2" in store.last_error


def test_a_reload_of_an_emptied_or_deleted_file_grants_nothing_until_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token, line = _minted("only")
    store, paths = _store(tmp_path, tokens=[line], credentials=["alice=pw"])
    paths["tokens"].write_text("# every token revoked\n")
    paths["credentials"].write_text("")
    store.reload()
    assert store.current.tokens == () and store.current.users == {}, "an empty file is an empty list"
    assert "lists no token" in caplog.text and "no user and no token is in force" in caplog.text

    paths["tokens"].write_text(line + "\n")
    assert store.reload_if_changed() and find(store.current.tokens, token) is not None
    paths["tokens"].unlink()
    caplog.clear()
    assert store.reload_if_changed() is False
    assert store.current.tokens == (), "a deleted file grants nothing"
    assert any(r.levelname == "ERROR" and "cannot read the tokens file" in r.message for r in caplog.records)
    assert store.reload_if_changed() is False, "nothing changed since: not read again every poll"
    paths["tokens"].write_text(line + "\n")
    assert store.reload_if_changed() is True, "watched for: read once it is back"
    assert find(store.current.tokens, token) is not None and store.last_error is None


def test_a_reload_of_a_broken_or_deleted_scopes_file_grants_no_scope_never_admin(tmp_path: Path) -> None:
    store, paths = _store(
        tmp_path, credentials=["alice=pw", "bob=pw"], scopes=["[scopes]", 'alice = ["admin"]', 'bob = ["read"]']
    )
    paths["scopes"].write_text('[scopes]\nalice = ["admin"]\nbob = ["delete:*"]\n')
    store.reload()
    assert store.current.scopes_of("alice") == ("admin",) and store.current.scopes_of("bob") == ()
    paths["scopes"].write_text("[scopes\n")
    store.reload()
    assert store.current.scopes_of("alice") == ()
    paths["scopes"].unlink()
    store.reload()
    assert store.current.scopes == {} and store.current.scopes_of("alice") == (), "absent would mean admin"


def test_a_reload_skips_a_malformed_credentials_line_and_keeps_the_others(tmp_path: Path) -> None:
    store, paths = _store(tmp_path, credentials=["alice=pw", "bob=pw"])
    paths["credentials"].write_text("alice=pw\nmallory=\\uZZZZ\n")
    store.reload()
    assert store.current.users == {"alice": "pw"} and store.last_error is not None
    assert f"{paths['credentials']}:2: malformed" in store.last_error


def test_users_with_an_empty_password_are_admitted_as_connect_does_and_warned_about_by_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``carol`` alone or ``empty=`` is a user with an empty password to Java's ``Properties``, so
    to Connect: the daemon reads it the same way, and without a scopes file that user is admin, so
    whoever sends the name and no password may rewrite every offset. It said nothing (security QA
    MEDIUM). Now the log at start (``Security.warnings``) and every reload name them; ``/status``,
    which any authenticated principal reads, counts them only: a name is all one needs to log in."""
    store, paths = _store(tmp_path, credentials=["carol", "empty=", "alice=s3cret"])
    assert store.current.users == {"carol": "", "empty": "", "alice": "s3cret"}, "read as Java reads it"
    assert Authenticator(store).principal(_basic("carol", ""), None, None).scopes == ("admin",)
    security = Security(Authenticator(store))
    logged = [w for w in security.warnings() if "empty password" in w]
    assert len(logged) == 1 and "'carol', 'empty'" in logged[0] and "as admin" in logged[0], logged
    assert "alice" not in logged[0] and "s3cret" not in logged[0]
    in_status = security.describe()["warnings"]
    assert isinstance(in_status, list)
    shown = [w for w in in_status if "empty password" in w]
    assert len(shown) == 1 and "2 user(s)" in shown[0] and "carol" not in shown[0], shown

    paths["credentials"].write_text("alice=s3cret\ncarol\n")
    store.reload()
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "empty password" in r.message]
    assert len(warned) == 1 and "'carol'" in warned[0].message and "'empty'" not in warned[0].message
    assert "s3cret" not in caplog.text
    paths["credentials"].write_text("alice=s3cret\ncarol=pw\n")
    store.reload()
    assert not any("empty password" in w for w in security.warnings()), "once each has a password, nothing to say"


def test_an_empty_password_warning_says_which_scopes_the_user_has(tmp_path: Path) -> None:
    """With a scopes file the user has only what it lists, so the warning does not say admin."""
    store, _ = _store(tmp_path, credentials=["carol"], scopes=["[scopes]", 'carol = ["read"]'])
    warned = [w for w in Security(Authenticator(store)).warnings() if "empty password" in w]
    assert len(warned) == 1 and "scopes file gives them" in warned[0] and "admin" not in warned[0], warned


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("kind", "content", "why"),
    [("tokens", "", "lists no token"), ("tokens", "x:sha256$00:read\n", "line 1"), ("credentials", "\n", "no user")],
)
def test_at_start_an_unusable_file_is_still_refused(tmp_path: Path, kind: str, content: str, why: str) -> None:
    (tmp_path / kind).write_text(content)
    with pytest.raises(CredentialsError, match=why):
        CredentialStore(CredentialFiles(**{kind: tmp_path / kind}))


def _minted(name: str) -> tuple[str, str]:
    token = mint()
    return token, token_line(name, token, ["read"])
