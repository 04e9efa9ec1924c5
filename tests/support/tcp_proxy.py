"""A TCP proxy of a test's own between one process and a shared server, to cut the network
between them without touching the server (which other tests use)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from tests.support.server import free_port


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target_host`:`target_port`, on a thread of its own.

    `cut` closes every connection it carries, on both sides, and refuses new ones: the
    server sees its sessions end, as when a network path is reset. `restore` accepts again
    on the same port.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.port = free_port()
        self._target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.carried = 0

    def start(self) -> TcpProxy:
        """Start its thread and listen."""
        self._thread.start()
        self._call(self._listen())
        return self

    def cut(self) -> None:
        """Close every connection, both sides, and stop listening."""
        self._call(self._cut())

    def restore(self) -> None:
        """Listen again (after `cut`)."""
        self._call(self._listen())

    def stop(self) -> None:
        """Cut, then end its thread."""
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout=10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._carry, "127.0.0.1", self.port)

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self.carried += 1
        self._writers.update((writer, up_writer))
        await asyncio.gather(
            _pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True
        )
        self._writers.difference_update((writer, up_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.transport.abort()
