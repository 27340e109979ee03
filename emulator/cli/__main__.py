"""``python -m emulator.cli``: the same as the ``connect-offsets`` console script."""

from emulator.cli import main

raise SystemExit(main())
