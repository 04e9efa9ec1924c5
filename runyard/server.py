"""The uvicorn server the `runyard` command runs."""

from __future__ import annotations

import socket
import threading
from multiprocessing.connection import wait

import uvicorn
from uvicorn.supervisors.watchfilesreload import WatchFilesReload


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
