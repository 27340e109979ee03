"""CLI command groups, one module each; every module exposes ``register(subparsers)``.

Each subcommand sets ``handler`` (a function ``(args) -> exit code``) with ``set_defaults``, so
``emulator.cli`` only dispatches and maps errors to exit codes.
"""
