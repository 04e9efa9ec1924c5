"""The bench's HTTP client against small HTTP servers on 127.0.0.1 that answer as told."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from bench.client import Client, HTTPError

Answer = Callable[[bytes, bytes], bytes]


@dataclass
class Peer:
    """What a test server saw: its connections and each request's head and body."""

    url: str
    connections: int = 0
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)


def _ok(payload: object, *extra: bytes) -> bytes:
    body = json.dumps(payload).encode()
    head = [b"HTTP/1.1 200 OK", b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _chunked(*parts: bytes) -> bytes:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[Peer]:
    """A keep-alive HTTP/1.1 server answering each request with `answer(head, body)`."""
    peer = Peer(url="")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer.connections += 1
        peer.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                peer.requests.append((head, body))
                writer.write(answer(head, body))
                await writer.drain()
                if b"connection: close" in answer(head, body).lower():
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    peer.url = f"http://127.0.0.1:{port}"
    try:
        yield peer
    finally:
        server.close()
        for writer in peer.writers:
            writer.close()
        await server.wait_closed()


async def test_post_sends_json_and_reads_a_sized_body_on_one_kept_connection() -> None:
    async with serving(lambda head, body: _ok({"echo": json.loads(body)})) as peer:
        async with Client([peer.url + "/prefix/"], connections=2) as client:
            first = await client.post("/runs/wait", json={"n": 1})
            second = await client.post("/runs/wait", json={"n": 2})

    assert (first.status_code, first.json()) == (200, {"echo": {"n": 1}})
    assert second.json() == {"echo": {"n": 2}}
    assert peer.connections == 1
    head, body = peer.requests[0]
    assert head.startswith(b"POST /prefix/runs/wait HTTP/1.1\r\n")
    assert b"\r\nHost: " + peer.url.removeprefix("http://").encode() + b"\r\n" in head
    assert b"\r\nContent-Type: application/json\r\n" in head
    assert b"\r\nContent-Length: %d\r\n" % len(body) in head


async def test_chunked_body_is_read_whole_and_line_by_line_across_chunks() -> None:
    stream = (b"event: metadata\r\nda", b"ta: {}\r\n\r\nevent: end\r\n", b"\r\n")
    async with serving(lambda head, body: _chunked(*stream)) as peer:
        async with Client([peer.url], connections=1) as client:
            whole = await client.get("/threads/t/runs/r/join")
            async with client.stream("POST", "/runs/stream", json={}) as response:
                lines = [line async for line in response.aiter_lines()]

    assert whole.content == b"".join(stream)
    assert lines == ["event: metadata", "data: {}", "", "event: end", ""]
    assert peer.connections == 1


async def test_a_stream_left_before_its_end_closes_its_connection() -> None:
    async with serving(lambda head, body: _chunked(b"one\n", b"two\n")) as peer:
        async with Client([peer.url], connections=1) as client:
            async with client.stream("GET", "/stream") as response:
                async for _ in response.aiter_lines():
                    break
            await client.get("/stream")

    assert peer.connections == 2


async def test_connection_close_from_the_server_is_not_reused() -> None:
    async with serving(lambda head, body: _ok({}, b"Connection: close")) as peer:
        async with Client([peer.url], connections=1) as client:
            for _ in range(3):
                assert (await client.get("/ok")).status_code == 200

    assert peer.connections == 3


async def test_a_kept_connection_the_server_closed_is_replaced_transparently() -> None:
    async with serving(lambda head, body: _ok({"n": 1})) as peer:
        async with Client([peer.url], connections=1) as client:
            await client.get("/ok")
            for writer in peer.writers:  # the server's keep-alive timeout
                writer.close()
            await asyncio.sleep(0.05)
            again = await client.get("/ok")

    assert again.json() == {"n": 1}
    assert peer.connections == 2


async def test_several_urls_take_requests_in_turn() -> None:
    async with serving(lambda head, body: _ok("a")) as a, serving(lambda h, b: _ok("b")) as b:
        async with Client([a.url, b.url], connections=2) as client:
            answers = [(await client.get("/ok")).json() for _ in range(4)]

    assert answers == ["a", "b", "a", "b"]


async def test_refused_connection_is_an_http_error() -> None:
    async with serving(lambda head, body: _ok({})) as peer:
        url = peer.url
    async with Client([url], connections=1) as client:
        with pytest.raises(HTTPError, match="cannot connect"):
            await client.get("/ok")


async def test_body_cut_short_is_an_http_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{}"
    async with serving(lambda head, body: cut) as peer:
        async with Client([peer.url], connections=1) as client:
            with pytest.raises(HTTPError, match="cut short"):
                await client.get("/ok")


def test_only_plain_http_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="plain http"):
        Client(["https://example.invalid"], connections=1)
