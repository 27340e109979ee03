"""Settings declared once: every field of a settings dataclass carries its flag, environment
variable, kind, default and help, and everything else is derived from that declaration — the
argparse options, the reading of the environment, and ``docs/configuration.md``.

Why not environment values as argparse defaults: those are parsed while the parser is built, so
a bad ``CONNECT_OFFSETS_PORT`` broke even ``--help``. Here the parser only collects text; values
are parsed when the settings are built (:func:`resolve`), flags win over the environment, an empty
variable counts as unset, and a bad value from either source is one :class:`SettingsError` line
naming the flag or variable and what it expects.

Adding a setting is one field declared with :func:`option`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from emulator.model.times import parse_duration_s, parse_size_bytes

ENV_PREFIX = "CONNECT_OFFSETS_"
_SPEC = "connect_offsets.option"

T = TypeVar("T")
S = TypeVar("S")


class SettingsError(ValueError):
    """A setting cannot be used as given; the message is one line naming the flag or variable."""


@dataclass(frozen=True, slots=True)
class Kind(Generic[T]):
    """How a setting's text becomes its value, and the words that help, docs and errors use."""

    name: str
    """The docs' type column, e.g. ``integer 1..65535``."""
    expected: str
    """Completes "expected …" in an error, e.g. ``an integer within 1..65535``."""
    parse: Callable[[str], T]
    """Raises ``ValueError`` on text it does not accept."""
    metavar: str = "VALUE"
    """What ``--help`` shows after the flag."""


@dataclass(frozen=True, slots=True)
class Option:
    """One setting as a user meets it (derived from a field and its :func:`option` declaration)."""

    field: str
    flag: str
    env: str
    kind: Kind[Any]
    default: str | None
    """The default as a user would type it (``30d``, ``64MiB``); ``None``: unset."""
    help: str
    group: str
    switch: bool
    repeatable: bool

    @property
    def shown_default(self) -> str:
        if self.switch:
            return "off"
        return "unset" if self.default is None else self.default


def env_name(flag: str) -> str:
    """``--offsets-topic`` → ``CONNECT_OFFSETS_OFFSETS_TOPIC``."""
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def option(
    default: str | None,
    kind: Kind[Any],
    help: str,
    *,
    group: str,
    flag: str | None = None,
    switch: bool = False,
    repeatable: bool = False,
) -> Any:
    """Declare a settings field. ``default`` is text the kind parses (so the table states defaults
    the way a user writes them); ``None`` leaves the field ``None``.

    ``flag`` defaults to ``--<field-name>``. A ``switch`` is a flag without a value: given (or its
    variable true) it sets the field to the opposite of its default, so ``--no-history`` can set
    ``history`` to false. A ``repeatable`` option merges the mappings its values parse to; its
    variable holds the values separated by commas.
    """
    declared = Option("", flag or "", "", kind, default, help, group, switch, repeatable)
    return dataclasses.field(default_factory=lambda: _default(declared), metadata={_SPEC: declared})


def shared(settings_type: type[Any], field_name: str) -> Any:
    """Declare a settings field as ``settings_type`` declares its field ``field_name``: the same flag,
    variable, kind, default and help, for a command that reads one of another command's settings
    (``compact`` reads ``serve``'s ``--data-dir``, ``CONNECT_OFFSETS_DATA_DIR``). Declared once, the two
    cannot drift: ``compact`` once had its own ``--data-dir`` that ignored the variable."""
    declared = next(f.metadata[_SPEC] for f in dataclasses.fields(settings_type) if f.name == field_name)
    return dataclasses.field(default_factory=lambda: _default(declared), metadata={_SPEC: declared})


def _default(opt: Option) -> Any:
    if opt.default is None:
        return {} if opt.repeatable else None
    return opt.kind.parse(opt.default)


def options(settings_type: type[Any]) -> list[Option]:
    """The declared options of a settings dataclass, in declaration order, named after their fields."""
    found: list[Option] = []
    for f in dataclasses.fields(settings_type):
        declared: Option | None = f.metadata.get(_SPEC)
        if declared is not None:
            flag = declared.flag or "--" + f.name.replace("_", "-")
            found.append(dataclasses.replace(declared, field=f.name, flag=flag, env=env_name(flag)))
    return found


def grouped(settings_type: type[Any]) -> Iterator[tuple[str, list[Option]]]:
    """Options by group, groups in the order they are first declared."""
    groups: dict[str, list[Option]] = {}
    for opt in options(settings_type):
        groups.setdefault(opt.group, []).append(opt)
    yield from groups.items()


def add_options(parser: argparse.ArgumentParser, settings_type: type[Any]) -> None:
    """Add the options as flags that only collect text (parsed later, by :func:`resolve`), and
    record the settings type so the command line knows what to resolve."""
    for title, opts in grouped(settings_type):
        group = parser.add_argument_group(title)
        for opt in opts:
            no_default = opt.switch or opt.default is None
            tail = f"env {opt.env}" if no_default else f"default {opt.default}; env {opt.env}"
            text = f"{opt.help} ({tail})".replace("%", "%%")
            if opt.switch:
                group.add_argument(opt.flag, dest=opt.field, action="store_true", default=None, help=text)
            else:
                action = "append" if opt.repeatable else "store"
                group.add_argument(
                    opt.flag, dest=opt.field, action=action, default=None, metavar=opt.kind.metavar, help=text
                )
    parser.set_defaults(settings_type=settings_type)


def resolve(settings_type: type[S], args: argparse.Namespace, environ: Mapping[str, str]) -> S:
    """Build the settings: each value from its flag, else its (non-empty) variable, else the default.

    Raises :class:`SettingsError` naming the flag or variable whose value the kind refused, or
    the one the settings' own checks (``__post_init__``) name.
    """
    values = {opt.field: _value(opt, getattr(args, opt.field, None), environ) for opt in options(settings_type)}
    try:
        return settings_type(**values)
    except SettingsError as exc:
        raise SettingsError(sources_named(str(exc), settings_type, args, environ)) from None


def sources_named(message: str, settings_type: type[Any], args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The settings' own checks name flags; a value that came from the environment is named as the
    variable it came from too, or an operator who never typed ``--host`` is sent looking for it.

    Also applied by the command line to a ``SettingsError`` its command raises after the settings
    were built (a ``--tls-cert`` or ``--tokens-file`` that cannot be read is found only when used),
    so those name the variable as the settings' own checks do, in one place."""
    came = [
        f"{opt.flag} came from {opt.env}"
        for opt in options(settings_type)
        if getattr(args, opt.field, None) in (None, False)
        and environ.get(opt.env, "").strip()
        and re.search(rf"(?<![\w-]){re.escape(opt.flag)}(?![\w-])", message)
    ]
    return message if not came else f"{message} ({', '.join(came)})"


def _value(opt: Option, given: Any, environ: Mapping[str, str]) -> Any:
    env_text = environ.get(opt.env, "").strip()
    if opt.switch:
        on = given is True or (given is None and env_text != "" and _parse(BOOLEAN, env_text, opt.env))
        default = bool(_default(opt))
        return (not default) if on else default
    if given is not None:
        texts: Sequence[str] = given if opt.repeatable else [given]
        source = opt.flag
    elif env_text:
        texts = [t for t in env_text.split(",") if t.strip()] if opt.repeatable else [env_text]
        source = opt.env
    else:
        return _default(opt)
    if not opt.repeatable:
        return _parse(opt.kind, texts[0], source)
    merged: dict[str, Any] = {}
    for text in texts:
        merged.update(_parse(opt.kind, text, source))
    return merged


def _parse(kind: Kind[T], text: str, source: str) -> T:
    try:
        return kind.parse(text)
    except ValueError:
        raise SettingsError(f"{source}: expected {kind.expected}, got {text!r}") from None


# ---- kinds ---------------------------------------------------------------------------------------

_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def _boolean(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError(text)


def _optional_text(text: str) -> str | None:
    return text.strip() or None


def integer(low: int | None = None, high: int | None = None) -> Kind[int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(text)
        return value

    if low is not None and high is not None:
        return Kind(f"integer {low}..{high}", f"an integer within {low}..{high}", parse, "N")
    if low is not None:
        return Kind(f"integer >= {low}", f"an integer >= {low}", parse, "N")
    return Kind("integer", "an integer", parse, "N")


def choice(*names: str, metavar: str = "NAME") -> Kind[str]:
    """One of ``names``, case-insensitive, as written in ``names``."""

    def parse(text: str) -> str:
        for name in names:
            if name.lower() == text.strip().lower():
                return name
        raise ValueError(text)

    listed = ", ".join(names)
    return Kind(f"one of {listed}", f"one of {listed}", parse, metavar)


def _positive_duration(text: str) -> float:
    value = parse_duration_s(text)
    if value is None:
        raise ValueError(text)
    return value


def _key_value(text: str) -> dict[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(text)
    return {key.strip(): value.strip()}


def _http_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(text)
    return text.strip()


BOOLEAN = Kind("boolean", "true or false (also 1/0, yes/no, on/off)", _boolean)
TEXT = Kind("text", "text", str, "TEXT")
OPTIONAL_TEXT = Kind("text", "text", _optional_text, "TEXT")


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _topic(text: str) -> str:
    """Kafka's rule for a topic name (``Topic.validate``): checked here so a name a real broker
    refuses (a space, a slash) stops the start-up naming the flag, also on brokers that accept it."""
    if not _TOPIC_NAME.fullmatch(text) or text in (".", ".."):
        raise ValueError(text)
    return text


def _optional_topic(text: str) -> str | None:
    stripped = text.strip()
    return _topic(stripped) if stripped else None


_TOPIC_RULE = "a Kafka topic name (1 to 249 of the letters, digits, '.', '_' and '-'; not '.' or '..')"
TOPIC = Kind("topic name", _TOPIC_RULE, _topic, "TOPIC")
OPTIONAL_TOPIC = Kind("topic name", _TOPIC_RULE, _optional_topic, "TOPIC")
PATH = Kind("path", "a path", Path, "PATH")
DURATION_OR_NEVER = Kind(
    "duration or never", "a duration such as 30d, 12h, 90m, 500ms, or 'never'", parse_duration_s, "DURATION"
)
POSITIVE_DURATION = Kind("duration", "a positive duration such as 10m, 30s, 500ms", _positive_duration, "DURATION")
SIZE = Kind("size", "a size in bytes, optionally with K/M/G (binary), e.g. 64MiB", parse_size_bytes, "SIZE")
KEY_VALUE = Kind("KEY=VALUE", "KEY=VALUE", _key_value, "KEY=VALUE")
HTTP_URL = Kind("URL", "an http:// or https:// URL", _http_url, "URL")
