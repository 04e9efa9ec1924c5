"""`runyard dev`'s reloader: which files restart the server, and a supervisor that ends when
the first server process dies by itself."""

from __future__ import annotations

import threading
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.supervisors.watchfilesreload import WatchFilesReload

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
