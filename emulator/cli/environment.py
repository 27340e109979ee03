"""``CONNECT_OFFSETS_*`` variables that name no setting: warned about, never silently ignored.

A flag with a typo is refused by the parser (``--bootstrap-server``), but a variable with one was
simply not read: ``CONNECT_OFFSETS_TOKEN_FILE`` (for ``…_TOKENS_FILE``) started the daemon without
authentication, ``CONNECT_OFFSETS_BOOTSTRAP_SERVER`` on the embedded log instead of Kafka, and
nothing said so. Every command names such a variable, with the setting it most likely meant. A
warning, not a refusal: a container's environment is shared by every process in it, and a
variable some other tool of ours may read one day must not stop the daemon from starting.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from emulator.cli.common import ClientSettings
from emulator.server.options import ENV_PREFIX, options
from emulator.server.settings import Settings

PASSWORD_VARIABLE = "CONNECT_OFFSETS_PASSWORD"
"""Read by the clients for ``--user`` (``emulator.client.credentials``); it has no flag of its own."""
TEST_KIT_PREFIX = "CONNECT_OFFSETS_TEST_"
"""The test kit's pytest plugin reads these (``emulator.testing.options``), not the command line."""


def known_variables() -> frozenset[str]:
    """Every variable a command of ``connect-offsets`` reads: ``serve``'s and the clients' settings."""
    declared = {opt.env for settings_type in (Settings, ClientSettings) for opt in options(settings_type)}
    return frozenset(declared | {PASSWORD_VARIABLE})


def unknown_variable_warnings(environ: Mapping[str, str]) -> list[str]:
    """One warning per set ``CONNECT_OFFSETS_*`` variable that no setting reads, naming the closest
    one that does when there is one."""
    known = known_variables()
    # Compared without the prefix every name shares, or any name would be "close" to any other.
    suffixes = {k.removeprefix(ENV_PREFIX): k for k in known}
    warnings = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name.startswith(TEST_KIT_PREFIX) or name in known:
            continue
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1, cutoff=0.7)
        hint = f" (did you mean {suffixes[close[0]]}?)" if close else ""
        warnings.append(f"{name} is set but is not a connect-offsets setting: ignored{hint}")
    return warnings
