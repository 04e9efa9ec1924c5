"""What a connection may hold is bounded: a request head in time and size, a request body in
time, and the connections themselves in number. A client that trickles its headers or its
body, or sends nothing, is closed (408 where an answer is still possible); an oversized head
gets 431; past the connection bound a connection is answered 503 with Retry-After at once,
while /ok and /livez still answer; ordinary clients see no difference.

Driven with raw sockets against real `runyard dev` and `runyard serve` processes, with short
bounds (a 1 s head, a 4 s body, 6 connections) so the tests stay cheap; the defaults are
checked beside them.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import uvicorn
from websockets.sync.client import connect as ws_connect

from runyard.app.server import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEAD_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
    ServerConfig,
)
from runyard.settings import Settings
from tests.support.backends import backend_server
from tests.support.server import ServerProcess, free_port

HEAD_TIMEOUT = 1.0
BODY_TIMEOUT = 4.0
MAX_CONNECTIONS = 6


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def short_head_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server in either mode whose request heads must arrive within HEAD_TIMEOUT, bodies
    within BODY_TIMEOUT, and which holds MAX_CONNECTIONS connections."""
    workdir = tmp_path_factory.mktemp(f"head-{request.param}")
    env = {
        "RUNYARD_HEAD_TIMEOUT_SECONDS": str(HEAD_TIMEOUT),
        "RUNYARD_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
        "RUNYARD_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
    }
    with backend_server(request.param, workdir, env=env) as proc:
        yield proc


def connect(server: ServerProcess) -> socket.socket:
    """A raw TCP connection to the server."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.settimeout(10)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One response with a content-length on a kept-alive connection: status and body."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {received!r}"
        received += chunk
    head, body = received.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a body"
        body += chunk
    return int(lines[0].split()[1]), body


def status_and_detail(response: bytes) -> tuple[int, str]:
    """The status and JSON `detail` of a whole response read until the server closed."""
    head, body = response.split(b"\r\n\r\n", 1)
    assert b"content-type: application/json" in head.lower(), head
    return int(head.split()[1]), str(json.loads(body)["detail"])


def test_defaults_bound_the_head_to_10_seconds_and_64_kib() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.head_timeout_seconds == DEFAULT_HEAD_TIMEOUT_SECONDS == 10.0
    assert settings.max_head_bytes == DEFAULT_MAX_HEAD_BYTES == 64 * 1024


def test_defaults_bound_the_body_to_60_seconds_and_hold_well_over_10000_clients() -> None:
    """Ten thousand mostly idle stream clients on one instance fit under the default bound."""
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.body_timeout_seconds == DEFAULT_BODY_TIMEOUT_SECONDS == 60.0
    assert settings.max_connections == DEFAULT_MAX_CONNECTIONS >= 2 * 10_000


def test_a_client_trickling_header_lines_is_closed_after_the_bound(
    short_head_server: ServerProcess,
) -> None:
    with connect(short_head_server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /ok HTTP/1.1\r\nhost: localhost\r\n")
        sent = 0
        # A header line every 0.2 s until the server answers (or 8 bounds have passed).
        while time.monotonic() - started < 8 * HEAD_TIMEOUT:
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                break
            sock.sendall(b"x-trickle-%d: 1\r\n" % sent)
            sent += 1
        elapsed = time.monotonic() - started
        assert sent >= 3, "the client was cut before it trickled anything"
        assert elapsed < 4 * HEAD_TIMEOUT, f"still open after {elapsed:.1f} s"
        status, detail = status_and_detail(read_until_closed(sock))
        assert status == 408
        assert "RUNYARD_HEAD_TIMEOUT_SECONDS" in detail


def test_input_still_arriving_as_the_server_refuses_does_not_reset_the_connection(
    short_head_server: ServerProcess,
) -> None:
    """A client still sending its (oversized) head when the server answers 431 reads the
    whole answer and then the server's end of the connection, not a reset: the server does
    not close on input it has not read, which would make its kernel reset the connection."""
    line = b"x-more: " + b"a" * 1000 + b"\r\n"
    with connect(short_head_server) as sock:
        # Several of the server's reads and well over the bound, yet within what the kernel
        # buffers: sent in full before the server reads it, so that input the server has not
        # read is waiting when it refuses the head.
        sock.sendall(b"GET /ok HTTP/1.1\r\nhost: localhost\r\n" + line * 512)
        status, detail = status_and_detail(read_until_closed(sock))
    assert status == 431
    assert "RUNYARD_MAX_HEAD_BYTES" in detail


def test_a_connection_that_sends_nothing_is_closed_after_the_bound(
    short_head_server: ServerProcess,
) -> None:
    with connect(short_head_server) as sock:
        started = time.monotonic()
        response = read_until_closed(sock)
        elapsed = time.monotonic() - started
    assert HEAD_TIMEOUT * 0.9 <= elapsed < 4 * HEAD_TIMEOUT
    assert status_and_detail(response)[0] == 408


def test_an_oversized_head_gets_431(short_head_server: ServerProcess) -> None:
    header = b"x-big: " + b"a" * (DEFAULT_MAX_HEAD_BYTES + 1024) + b"\r\n"
    with connect(short_head_server) as sock:
        sock.sendall(b"GET /ok HTTP/1.1\r\nhost: localhost\r\n" + header + b"\r\n")
        status, detail = status_and_detail(read_until_closed(sock))
    assert status == 431
    assert "RUNYARD_MAX_HEAD_BYTES" in detail


def test_ordinary_clients_are_unaffected(short_head_server: ServerProcess) -> None:
    with connect(short_head_server) as sock:
        # A large head under the bound, sent in pieces well within the timeout.
        big = b"x-big: " + b"a" * (DEFAULT_MAX_HEAD_BYTES // 2) + b"\r\n"
        sock.sendall(b"GET /ok HTTP/1.1\r\nhost: localhost\r\n")
        time.sleep(HEAD_TIMEOUT / 4)
        sock.sendall(big + b"\r\n")
        assert read_response(sock)[0] == 200
        # Kept alive past the head timeout (within uvicorn's keep-alive), then a request
        # whose body trickles for longer than the head timeout: only the head is bounded.
        time.sleep(HEAD_TIMEOUT * 1.5)
        body = json.dumps({"metadata": {"note": "slow body"}}).encode()
        sock.sendall(
            b"POST /threads HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        for start in range(0, len(body), len(body) // 4 + 1):
            time.sleep(HEAD_TIMEOUT / 2)
            sock.sendall(body[start : start + len(body) // 4 + 1])
        status, answer = read_response(sock)
        assert status == 200, answer
        assert json.loads(answer)["metadata"]["note"] == "slow body"


# --- bodies --------------------------------------------------------------------------------


def test_a_body_that_trickles_is_answered_408_and_closed_after_the_bound(
    short_head_server: ServerProcess,
) -> None:
    """The issue's client: a large Content-Length, then a byte now and then."""
    with connect(short_head_server) as sock:
        sock.sendall(
            b"POST /threads HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
            b"content-length: 10000000\r\n\r\n{"
        )
        started = time.monotonic()
        sent = 0
        # A byte every 0.2 s until the server answers (or 8 bounds have passed).
        while time.monotonic() - started < 8 * BODY_TIMEOUT:
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                break
            sock.sendall(b" ")
            sent += 1
        assert sent >= 3, "the client was cut before it trickled anything"
        status, detail = status_and_detail(read_until_closed(sock))
    assert status == 408
    assert "RUNYARD_BODY_TIMEOUT_SECONDS" in detail
    # The request the body never completed ends quietly on the server's side too.
    deadline = time.monotonic() + 30
    while "request_abandoned" not in short_head_server.log_path.read_text():
        assert time.monotonic() < deadline, "the abandoned request was never seen to end"
        time.sleep(0.1)
    log = short_head_server.log_path.read_text()
    assert "request_body_timed_out" in log
    assert "Traceback" not in log


def test_a_body_too_large_and_trickled_is_cut_at_the_bound_too(
    short_head_server: ServerProcess,
) -> None:
    """Declared larger than RUNYARD_MAX_BODY_BYTES, the body is read (and dropped) before
    the 413 so that the client sees it: a client trickling it holds the connection no longer
    than the bound, and gets one answer."""
    with connect(short_head_server) as sock:
        sock.sendall(
            b"POST /threads HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
            b"content-length: 900000000\r\n\r\n{"
        )
        started = time.monotonic()
        while time.monotonic() - started < 8 * BODY_TIMEOUT:
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                break
            sock.sendall(b" ")
        response = read_until_closed(sock)
    assert response.count(b"HTTP/1.1 ") == 1, response
    assert status_and_detail(response)[0] in (408, 413)


# --- connections ---------------------------------------------------------------------------


def test_past_the_connection_bound_a_connection_gets_503_at_once_and_probes_still_answer(
    short_head_server: ServerProcess,
) -> None:
    ws_url = short_head_server.url.replace("http://", "ws://")
    with ExitStack() as held:
        # Stream clients holding every connection the server takes.
        for _ in range(MAX_CONNECTIONS):
            held.enter_context(ws_connect(f"{ws_url}/threads/{uuid.uuid4()}/stream/events"))
        with connect(short_head_server) as sock:
            sock.sendall(
                b"POST /threads HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\n\r\n{}"
            )
            response = read_until_closed(sock)
        status, detail = status_and_detail(response)
        assert status == 503
        assert b"\r\nretry-after: " in response.split(b"\r\n\r\n", 1)[0].lower()
        assert "RUNYARD_MAX_CONNECTIONS" in detail
        for probe in (b"/ok", b"/livez"):
            with connect(short_head_server) as sock:
                sock.sendall(b"GET %s HTTP/1.1\r\nhost: localhost\r\n\r\n" % probe)
                assert read_response(sock)[0] == 200, probe
        # One that says nothing is answered too, not left in silence.
        with connect(short_head_server) as sock:
            assert status_and_detail(read_until_closed(sock))[0] == 503
    # The held connections closed: ordinary requests are served again.
    deadline = time.monotonic() + 30
    while True:
        with connect(short_head_server) as sock:
            sock.sendall(
                b"POST /threads HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\n\r\n{}"
            )
            status = read_response(sock)[0]
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200


async def answers_without_reading(scope: Any, receive: Any, send: Any) -> None:
    """An app that answers before the body arrives (as a custom route may)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"early"})


async def test_a_body_trickled_after_its_answer_is_cut_without_a_second_answer() -> None:
    """Where the request was answered already, the bound only ends the connection."""
    port = free_port()
    config = ServerConfig(
        answers_without_reading,
        host="127.0.0.1",
        port=port,
        body_timeout_seconds=0.5,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(600):
            if server.started:
                break
            await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /hook HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1000\r\n\r\n{")
        answer = await asyncio.wait_for(reader.readuntil(b"early"), 10)
        assert answer.startswith(b"HTTP/1.1 200 ")
        rest = b"unanswered"
        for _ in range(100):  # a byte every 0.1 s, for at most 20 bounds
            try:
                rest = await asyncio.wait_for(reader.read(65536), 0.1)
                break
            except TimeoutError:
                writer.write(b" ")
        assert rest == b"", f"not closed, or a second answer: {rest!r}"
        writer.close()
    finally:
        server.should_exit = True
        await serving
