"""The daemon's listening socket: connections accepted on it send answers without Nagle's delay."""

from __future__ import annotations

import asyncio
import socket

import pytest

from emulator.server.listen import listen


@pytest.mark.slow
def test_connections_accepted_on_the_daemons_socket_have_nagle_off() -> None:
    # asyncio sets TCP_NODELAY only on sockets whose protocol says TCP; a socket made with protocol 0
    # left Nagle on, and each answer on a kept-alive connection waited ~40 ms for a delayed ACK.
    async def accepted_nodelay() -> int:
        found: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            found.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        sock = listen("127.0.0.1", 0)
        server = await asyncio.start_server(connected, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname())
            value = await asyncio.wait_for(found, 10)
            writer.close()
        return value

    assert asyncio.run(accepted_nodelay()) != 0
