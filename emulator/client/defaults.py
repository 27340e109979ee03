"""The daemon's default URL, in a module of its own: the CLI's settings (``emulator.cli.common``), which
``serve`` imports too, name it without importing the HTTP client (httpx), which the daemon never uses."""

DEFAULT_URL = "http://127.0.0.1:8081"
