"""The uvicorn server the `runyard` command runs."""

from __future__ import annotations

import socket

import uvicorn


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints `runyard: serving on URL` once the app has started and
    its socket listens, never before a start-up that then fails.

    A module-level class: with `--reload`, uvicorn pickles the server into its worker process.
    """

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then say where."""
        await super().startup(sockets=sockets)
        if self.started:
            host = self.config.host
            url = f"http://{f'[{host}]' if ':' in host else host}:{self.config.port}"
            print(f"runyard: serving on {url}", flush=True)
