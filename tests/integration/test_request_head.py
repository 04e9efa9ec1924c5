"""The request head is bounded in time and size: a client that trickles its headers, or
sends none, is closed; an oversized head gets 431; ordinary clients see no difference.

Driven with raw sockets against real `runyard dev` and `runyard serve` processes, with a
short head timeout (1 s) so the tests stay cheap; the default is checked beside them.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

from runyard.app.server import DEFAULT_HEAD_TIMEOUT_SECONDS, DEFAULT_MAX_HEAD_BYTES
from runyard.settings import Settings
from tests.support.backends import backend_server
from tests.support.server import ServerProcess

HEAD_TIMEOUT = 1.0


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def short_head_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server in either mode whose request heads must arrive within HEAD_TIMEOUT."""
    workdir = tmp_path_factory.mktemp(f"head-{request.param}")
    env = {"RUNYARD_HEAD_TIMEOUT_SECONDS": str(HEAD_TIMEOUT)}
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
