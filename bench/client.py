"""The bench's HTTP client: HTTP/1.1 keep-alive on asyncio streams, one base URL or several.

The client shares the machine with the server it measures, so it must cost little: a general
client (httpx) spent about 1.3 ms of CPU per background run here, a fifth of the machine at
full load. This one writes a request in one call and parses just what an Agent Protocol
server answers: a status line, headers, and a body of known length, chunked, or ended by
closing the connection. With several base URLs, each request goes to the next in turn, as a
load balancer without affinity would: a submit and its join usually reach different instances.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

DEFAULT_TIMEOUT_SECONDS = 60.0
NO_BODY_STATUSES = frozenset({204, 304})


class HTTPError(Exception):
    """A request that got no complete HTTP response (refused, reset, malformed, cut short)."""


@dataclass
class Response:
    """A whole response: status, headers (names in lower case) and body."""

    status_code: int
    headers: dict[str, str]
    content: bytes = b""

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.content)


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    def usable(self) -> bool:
        """Whether an idle connection may carry another request (the peer has not closed it)."""
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


@dataclass
class _Base:
    """One base URL and its idle connections."""

    host: str
    port: int
    prefix: str
    host_header: bytes
    idle: list[_Connection] = field(default_factory=list)

    @classmethod
    def parse(cls, url: str) -> _Base:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the bench speaks plain http:// only, not {url!r}")
        port = parts.port or 80
        return cls(parts.hostname, port, parts.path.rstrip("/"), parts.netloc.encode("ascii"))


class StreamedResponse:
    """A response whose body is read as it arrives (SSE, the streamed /join body)."""

    def __init__(
        self, status_code: int, headers: dict[str, str], body: _Body, timeout: float
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = b""
        self._body = body
        self._timeout = timeout

    @property
    def text(self) -> str:
        """The body read so far by `aread`, as text."""
        return self.content.decode("utf-8", "replace")

    async def aread(self) -> bytes:
        """Read the rest of the body."""
        parts = [self.content]
        async for part in self._parts():
            parts.append(part)
        self.content = b"".join(parts)
        return self.content

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body's lines as they arrive, without their line ends (LF or CRLF)."""
        pending = b""
        async for part in self._parts():
            pending += part
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")

    async def _parts(self) -> AsyncIterator[bytes]:
        while True:
            async with asyncio.timeout(self._timeout):
                part = await self._body.next_part()
            if not part:
                return
            yield part


class _Body:
    """Reads one response body off a connection: by length, by chunks, or until closed."""

    def __init__(self, reader: asyncio.StreamReader, headers: dict[str, str], empty: bool) -> None:
        self._reader = reader
        self.done = empty
        self.keep_alive = headers.get("connection", "").lower() != "close"
        self._chunked = False
        self._left: int | None = None
        if empty:
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in headers:
            self._left = int(headers["content-length"])
            self.done = self._left == 0
        else:
            self.keep_alive = False  # the body ends when the server closes the connection

    async def next_part(self) -> bytes:
        """The next piece of the body, or b"" once it has all been read."""
        if self.done:
            return b""
        try:
            if self._chunked:
                return await self._next_chunk()
            if self._left is not None:
                part = await self._reader.readexactly(self._left)
                self.done = True
                return part
            part = await self._reader.read(65536)
            self.done = not part
            return part
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise HTTPError(f"the response body was cut short: {exc!r}") from exc

    async def _next_chunk(self) -> bytes:
        size_line = await self._reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0], 16)
        except ValueError as exc:
            raise HTTPError(f"malformed chunk size {size_line[:40]!r}") from exc
        if size == 0:
            while await self._reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields: not used
            self.done = True
            return b""
        return (await self._reader.readexactly(size + 2))[:-2]


class Client:
    """Requests against one base URL, or round-robin over several; paths are relative."""

    def __init__(
        self, urls: list[str], connections: int, timeout: float = DEFAULT_TIMEOUT_SECONDS
    ) -> None:
        if not urls:
            raise ValueError("the client needs at least one base URL")
        self._bases = [_Base.parse(url) for url in urls]
        self._turns = itertools.cycle(self._bases)
        self._slots = asyncio.Semaphore(connections)
        self._timeout = timeout

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every idle connection."""
        for base in self._bases:
            while base.idle:
                base.idle.pop().close()

    async def get(self, path: str, headers: dict[str, str] | None = None) -> Response:
        """GET `path` of the next base URL; the whole response."""
        return await self.request("GET", path, headers=headers)

    async def post(
        self, path: str, json: Any = None, headers: dict[str, str] | None = None
    ) -> Response:
        """POST `json` to `path` of the next base URL; the whole response."""
        return await self.request("POST", path, json=json, headers=headers)

    async def request(
        self, method: str, path: str, json: Any = None, headers: dict[str, str] | None = None
    ) -> Response:
        """Send a request to the next base URL and read the whole response."""
        async with self.stream(method, path, json=json, headers=headers) as response:
            content = await response.aread()
        return Response(response.status_code, response.headers, content)

    @asynccontextmanager
    async def stream(
        self, method: str, path: str, json: Any = None, headers: dict[str, str] | None = None
    ) -> AsyncIterator[StreamedResponse]:
        """Send a request to the next base URL; its body is read as the caller iterates.

        The connection goes back to the pool if the body was read to its end, and is closed
        otherwise.
        """
        base = next(self._turns)
        request = _encode(method, base, path, json, headers)
        async with self._slots:
            connection, status, response_headers = await self._send(base, request, method)
            body = _Body(
                connection.reader,
                response_headers,
                empty=method == "HEAD" or status in NO_BODY_STATUSES or 100 <= status < 200,
            )
            try:
                yield StreamedResponse(status, response_headers, body, self._timeout)
            except BaseException:
                connection.close()
                raise
            if body.done and body.keep_alive:
                connection.reused = True
                base.idle.append(connection)
            else:
                connection.close()

    async def _send(
        self, base: _Base, request: bytes, method: str
    ) -> tuple[_Connection, int, dict[str, str]]:
        """Write the request and read the response head, on an idle connection if any.

        A reused connection the server closed meanwhile (its keep-alive timeout) fails before
        any byte of a response: the request is then sent once more, on a new connection.
        """
        while True:
            connection = await self._connection(base)
            try:
                async with asyncio.timeout(self._timeout):
                    connection.writer.write(request)
                    head = await connection.reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                connection.close()
                nothing = not isinstance(exc, asyncio.IncompleteReadError) or not exc.partial
                if connection.reused and nothing:
                    continue
                raise HTTPError(f"{method} to {base.host}:{base.port} failed: {exc!r}") from exc
            except BaseException:
                connection.close()
                raise
            status, headers = _parse_head(head)
            return connection, status, headers

    async def _connection(self, base: _Base) -> _Connection:
        while base.idle:
            connection = base.idle.pop()
            if connection.usable():
                return connection
            connection.close()
        try:
            async with asyncio.timeout(self._timeout):
                reader, writer = await asyncio.open_connection(base.host, base.port)
        except OSError as exc:
            raise HTTPError(f"cannot connect to {base.host}:{base.port}: {exc!r}") from exc
        return _Connection(reader, writer)


def open_client(urls: list[str], connections: int) -> Client:
    """A client for one base URL, or round-robin over several, with at most `connections` open."""
    return Client(urls, connections)


def _encode(
    method: str, base: _Base, path: str, body: Any, headers: dict[str, str] | None
) -> bytes:
    lines = [f"{method} {base.prefix}{path} HTTP/1.1".encode("ascii"), b"Host: " + base.host_header]
    payload = b""
    if body is not None:
        payload = json.dumps(body).encode()
        lines.append(b"Content-Type: application/json")
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: %d" % len(payload))
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}".encode("latin-1"))
    return b"\r\n".join(lines) + b"\r\n\r\n" + payload


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    status_line, *fields = head[:-4].decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError) as exc:
        raise HTTPError(f"malformed status line {status_line[:80]!r}") from exc
    headers: dict[str, str] = {}
    for line in fields:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers
