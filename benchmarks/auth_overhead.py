"""What authentication costs a request: GET of one connector's offsets on a kept-alive connection,
against an embedded daemon without authentication, with an admin token, a scoped token (the
pattern is matched per request) and Connect's Basic credentials.

    python -m benchmarks.auth_overhead [--requests 2000] [--rounds 2]

Prints p50/p99 per case and round; each case is a fresh daemon process on a free port.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from emulator.server.auth.tokens import mint, token_line
from tests.fixtures.processes import free_port


def measure(args: list[str], workdir: Path, headers: dict[str, str], auth: tuple[str, str] | None, n: int) -> str:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "emulator.cli",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(workdir / str(port)),
    ]
    proc = subprocess.Popen([*command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, auth=auth, timeout=10) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            body = {"offsets": [{"partition": {"a": 1}, "offset": {"b": 1}}]}
            assert client.patch("/connectors/bench/offsets?create=true", json=body).status_code == 200
            for _ in range(200):
                client.get("/connectors/bench/offsets")
            samples = []
            for _ in range(n):
                started = time.perf_counter()
                assert client.get("/connectors/bench/offsets").status_code == 200
                samples.append(time.perf_counter() - started)
        samples.sort()
        return f"p50 {samples[n // 2] * 1000:.2f} ms, p99 {samples[int(n * 0.99)] * 1000:.2f} ms"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        token = mint()
        (workdir / "admin").write_text(token_line("bench", token, ["admin"]) + "\n")
        (workdir / "scoped").write_text(token_line("bench", token, ["write:ben*"]) + "\n")
        (workdir / "users").write_text("alice=pw\n")
        bearer = {"Authorization": f"Bearer {token}"}
        cases = [
            ("no authentication", [], {}, None),
            ("token, admin", ["--tokens-file", str(workdir / "admin")], bearer, None),
            ("token, write:ben*", ["--tokens-file", str(workdir / "scoped")], bearer, None),
            ("Basic (Connect's file)", ["--credentials-file", str(workdir / "users")], {}, ("alice", "pw")),
        ]
        for round_ in range(1, options.rounds + 1):
            for name, args, headers, auth in cases:
                print(
                    f"round {round_}  {name:<24} {measure(args, workdir, headers, auth, options.requests)}", flush=True
                )


if __name__ == "__main__":
    main()
