"""The uvicorn server the `runyard` command runs, and the HTTP protocol it speaks."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors.watchfilesreload import WatchFilesReload

from runyard.streaming.closing import STREAMS_CLOSING, StreamsClosing
from runyard.streaming.departures import CrowdDepartures

logger = logging.getLogger(__name__)

# What a client gets to send its request head (request line and headers) in, and how large
# the head may be; the settings RUNYARD_HEAD_TIMEOUT_SECONDS and RUNYARD_MAX_HEAD_BYTES.
DEFAULT_HEAD_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_HEAD_BYTES = 64 * 1024


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints `runyard: serving on URL` once the app has started and
    its socket listens, never before a start-up that then fails.

    A module-level class: with `--reload`, uvicorn pickles the server into its worker process.
    """

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then say where."""
        # Every request's scope["state"] is a copy of the lifespan's: its streams find this.
        self.streams_closing = StreamsClosing(CrowdDepartures())
        self.lifespan.state[STREAMS_CLOSING] = self.streams_closing
        await super().startup(sockets=sockets)
        if self.started:
            host = self.config.host
            url = f"http://{f'[{host}]' if ':' in host else host}:{self.config.port}"
            print(f"runyard: serving on {url}", flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End the open event streams, then shut down as uvicorn does (which waits for
        every request in flight, and a stream has no end of its own)."""
        self.streams_closing.close()
        await super().shutdown(sockets=sockets)


class ServerConfig(uvicorn.Config):
    """uvicorn's configuration plus the request-head bounds `HeadBoundedProtocol` applies."""

    def __init__(
        self,
        app: Any,
        *,
        head_timeout_seconds: float = DEFAULT_HEAD_TIMEOUT_SECONDS,
        max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, http=HeadBoundedProtocol, **kwargs)
        self.head_timeout_seconds = head_timeout_seconds
        self.max_head_bytes = max_head_bytes


class HeadBoundedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with a deadline and a size bound on each request head.

    uvicorn closes an idle keep-alive connection, but a client that opens a connection and
    sends nothing, or trickles one header line at a time, holds it forever, and httptools
    accepts a head of any size. Here a head must be complete within the timeout of its first
    byte (of the connection, for the first request) or the connection gets 408 and is
    closed; a head larger than the bound gets 431 and never reaches the app. Bodies are the
    app's business (RUNYARD_MAX_BODY_BYTES); idle time between requests is uvicorn's
    keep-alive timeout.
    """

    # In slots, not the instance dict: uvicorn's protocol sets as many attributes as an
    # instance dict shares keys for, and seven more made each connection's dict a dict of its
    # own, 1.3 KiB more per connection (idle stream clients hold theirs for hours).
    __slots__ = (
        "_head_deadline",
        "_head_parsed",
        "_head_received",
        "_head_timeout",
        "_in_head",
        "_max_head_bytes",
        "_refused",
    )

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._head_timeout = float(
            getattr(config, "head_timeout_seconds", DEFAULT_HEAD_TIMEOUT_SECONDS)
        )
        self._max_head_bytes = int(getattr(config, "max_head_bytes", DEFAULT_MAX_HEAD_BYTES))
        self._head_deadline: asyncio.TimerHandle | None = None
        self._in_head = False
        # Bytes received while the head is incomplete (what httptools holds for an unfinished
        # header), and the size of what it has parsed of the head so far.
        self._head_received = 0
        self._head_parsed = 0
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the first head's clock when the connection opens."""
        super().connection_made(transport)
        self._begin_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clock with the connection."""
        self._end_head()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse as uvicorn does, then refuse a head that has outgrown the bound."""
        if self._refused:
            return
        counted = self._in_head
        super().data_received(data)
        if counted and self._in_head and not self._refused:
            self._head_received += len(data)
            self._check_head_size(self._head_received)

    def on_message_begin(self) -> None:
        """A pipelined or keep-alive request starts its own clock at its first byte."""
        if self._refused:
            return
        super().on_message_begin()
        self._head_parsed = 0
        if not self._in_head:
            self._begin_head()

    def on_url(self, url: bytes) -> None:
        """Count the request target toward the head's size."""
        if self._refused:
            return
        super().on_url(url)
        self._head_parsed += len(url)
        self._check_head_size(self._head_parsed)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count each header line toward the head's size."""
        if self._refused:
            return
        super().on_header(name, value)
        self._head_parsed += len(name) + len(value) + 4
        self._check_head_size(self._head_parsed)

    def on_headers_complete(self) -> None:
        """The head is in: stop its clock before the app runs."""
        self._end_head()
        if not self._refused:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        """Nothing of a refused request reaches the app."""
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """Nothing of a refused request reaches the app."""
        if not self._refused:
            super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        """A refused request is not upgraded either."""
        if not self._refused:
            super().handle_websocket_upgrade()

    def _check_head_size(self, size: int) -> None:
        if size > self._max_head_bytes:
            logger.warning("request_head_too_large bytes=%d", size)
            self._refuse(
                431,
                f"the request head (request line and headers) is larger than "
                f"{self._max_head_bytes} bytes (RUNYARD_MAX_HEAD_BYTES); send fewer or "
                "smaller headers",
            )

    def _begin_head(self) -> None:
        self._in_head = True
        self._head_received = 0
        self._head_deadline = self.loop.call_later(self._head_timeout, self._head_timed_out)

    def _end_head(self) -> None:
        self._in_head = False
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self._refused or self.transport.is_closing():
            return
        if self._responding():
            # A pipelined head waits while uvicorn, answering the request before it, does not
            # read: not the client's delay.
            self._head_deadline = self.loop.call_later(self._head_timeout, self._head_timed_out)
            return
        logger.info("request_head_timed_out received_bytes=%d", self._head_received)
        self._refuse(
            408,
            f"the request head (request line and headers) was not complete within "
            f"{self._head_timeout:g} s (RUNYARD_HEAD_TIMEOUT_SECONDS)",
        )

    def _responding(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _refuse(self, status: int, detail: str) -> None:
        """Answer `status` with a JSON `detail` and close; the rest of the input is dropped."""
        self._refused = True
        self._end_head()
        if self._responding():
            self.transport.close()  # an answer is being written: no second one inside it
            return
        body = json.dumps({"detail": detail}).encode()
        phrase = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        head = [b"HTTP/1.1 %d %s\r\n" % (status, phrase)]
        for name, value in self.server_state.default_headers:
            head.append(b"%s: %s\r\n" % (name, value))
        head.append(b"content-type: application/json\r\n")
        head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        self.transport.close()


# Folders whose files never restart `runyard dev`: environments, caches, data, VCS.
IGNORED_FOLDERS = frozenset(
    {
        ".venv",
        "venv",
        ".env",
        "site-packages",
        "__pycache__",
        ".git",
        ".hg",
        "node_modules",
        ".runyard",
        ".langgraph_api",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".eggs",
        "build",
        "dist",
    }
)


class ProjectFiles:
    """uvicorn's filter (Python files), minus what lives in IGNORED_FOLDERS, `*.egg-info`
    and any virtual environment (a folder holding `pyvenv.cfg`): a `pip install` during
    `runyard dev` restarts nothing."""

    def __init__(self, inner: Callable[[Path], bool]) -> None:
        self._inner = inner
        self._venvs: dict[Path, bool] = {}

    def __call__(self, path: Path) -> bool:
        """True when a change to `path` should restart the server."""
        folders = path.parts[:-1]
        if any(part in IGNORED_FOLDERS or part.endswith(".egg-info") for part in folders):
            return False
        if any(self._is_venv(parent) for parent in path.parents):
            return False
        return self._inner(path)

    def _is_venv(self, folder: Path) -> bool:
        known = self._venvs.get(folder)
        if known is None:
            known = self._venvs[folder] = (folder / "pyvenv.cfg").is_file()
        return known


def reloader(config: uvicorn.Config, server: uvicorn.Server) -> StoppingReload:
    """The reloading supervisor of `runyard dev`, its socket bound."""
    return StoppingReload(config, target=server.run, sockets=[config.bind_socket()])


class StoppingReload(WatchFilesReload):
    """uvicorn's reloader, except that it ends when the first server process dies by itself.

    uvicorn's waits for a file change after its server process exits, bound port and all:
    a start-up failure (a missing config, an embedder without credentials) would leave
    `runyard dev` hanging. A server that a reload started and that then fails is still
    waited on, so that fixing the file starts it again.
    """

    reloaded = False
    died = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watch_filter = ProjectFiles(self.watch_filter)  # type: ignore[assignment]

    def startup(self) -> None:
        """Start as uvicorn does, and watch the first server process's exit."""
        super().startup()
        threading.Thread(
            target=self._end_when_first_server_exits,
            args=(self.process.sentinel,),
            name="first-server-exit",
            daemon=True,
        ).start()

    def restart(self) -> None:
        """Restart as uvicorn does, remembering that the first server is gone on purpose."""
        self.reloaded = True
        super().restart()

    def _end_when_first_server_exits(self, sentinel: int) -> None:
        # The sentinel turns readable at the exit, without reaping the process (uvicorn's
        # shutdown still joins it).
        wait([sentinel])
        if not self.reloaded and not self.should_exit.is_set():
            self.died = True
            self.should_exit.set()
