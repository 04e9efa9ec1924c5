"""Generative UI: building the `ui` entries of langgraph.json and holding what was built.

The bundles are built as LangGraph's server builds them, by `@langchain/langgraph-ui`
(esbuild), run through npx with the project folder as its working directory: each entry
becomes `public/<graph_id>/entrypoint.js` (and `entrypoint.css` when it imports styles),
listed in `schemas.json`. Runyard builds each entry on its own, so a failure names it, into
a private folder, reads the assets into memory, then publishes the folder: instances that
share a data folder never serve one another's half-written files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from runyard.domain.errors import ConfigError
from runyard.project.config import ProjectConfig

log = logging.getLogger("runyard.ui")

BUILDER_PACKAGE = "@langchain/langgraph-ui"
# Pinned, so that an image and a dev machine build the same bundles; LangGraph's dev server
# takes the latest.
BUILDER_VERSION = "1.5.1"
SCHEMAS_FILE = "schemas.json"
PUBLIC_DIR = "public"
BUILD_TIMEOUT_SECONDS = 300.0
# As browsers and Starlette's StaticFiles name them, whatever the machine's mime.types says.
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".map": "application/json",
}


@dataclass(frozen=True)
class UiAsset:
    """One built file, as served: its bytes, content type and a content-derived ETag."""

    body: bytes
    content_type: str
    etag: str


@dataclass(frozen=True)
class UiBundles:
    """What was built for each graph: its asset names in build order, and the assets."""

    assets: dict[str, list[str]]
    files: dict[tuple[str, str], UiAsset]

    @classmethod
    def empty(cls) -> UiBundles:
        """No generative UI (the project has no `ui` key)."""
        return cls({}, {})

    @classmethod
    def load(cls, folder: Path) -> UiBundles:
        """Read a build's `schemas.json` and every file it lists."""
        raw = json.loads((folder / SCHEMAS_FILE).read_text())
        assets: dict[str, list[str]] = {}
        files: dict[tuple[str, str], UiAsset] = {}
        for graph_id, schema in raw.items():
            assets[graph_id] = [str(name) for name in schema["assets"]]
            for name in assets[graph_id]:
                body = (folder / PUBLIC_DIR / graph_id / name).read_bytes()
                files[(graph_id, os.path.basename(name))] = UiAsset(
                    body, content_type(name), f'"{hashlib.sha256(body).hexdigest()[:32]}"'
                )
        return cls(assets, files)


def content_type(name: str) -> str:
    """The Content-Type an asset is served with."""
    ext = os.path.splitext(name)[1].lower()
    return CONTENT_TYPES.get(ext) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def builder_command(output: str) -> list[str]:
    """The npx command that builds the entries named in LANGGRAPH_UI into `output`."""
    return ["npx", "--yes", f"{BUILDER_PACKAGE}@{BUILDER_VERSION}", "build", "-o", output]


def builder_env(ui: dict[str, str], shared: list[str]) -> dict[str, str]:
    """The variables the builder reads, as LangGraph's CLI sets them."""
    env = {"LANGGRAPH_UI": json.dumps(ui)}
    if shared:
        env["LANGGRAPH_UI_CONFIG"] = json.dumps({"shared": shared})
    return env


# The sources `runyard dev` reloads on when the project has a UI (besides its Python files).
SOURCE_PATTERNS = ("*.tsx", "*.ts", "*.jsx", "*.css")


def reload_patterns(project_dir: Path, ui_dir: Path, data_dir: Path) -> tuple[list[str], list[str]]:
    """(patterns to include, folders to exclude) for dev's reloader when the project has a
    UI: a change to its sources rebuilds it; the build's output and installed packages never
    set off a reload."""
    folders = [data_dir.resolve(), ui_dir, project_dir / "node_modules"]
    for folder in folders[:2]:
        folder.mkdir(parents=True, exist_ok=True)  # the reloader excludes existing folders only
    return list(SOURCE_PATTERNS), [str(folder) for folder in folders if folder.is_dir()]


def prepare_bundles(
    project: ProjectConfig, folder: Path, build: bool, show_output: bool = False
) -> UiBundles:
    """The project's UI bundles: built now into `folder`, or read from an earlier build.

    `show_output` lets the builder print to this process's terminal instead of keeping its
    output for the error message.
    """
    if not project.ui:
        return UiBundles.empty()
    if not build:
        return _prebuilt(project, folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build_all(project, staging, show_output)
        bundles = UiBundles.load(staging)
        _publish(staging, folder)
        return bundles
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_all(project: ProjectConfig, output: Path, show_output: bool = False) -> None:
    """Build every `ui` entry into `output` (public/<graph_id>/…, schemas.json)."""
    npx = shutil.which("npx")
    first = next(iter(project.ui))
    if npx is None:
        raise ConfigError(
            f"ui.{first} ({project.ui[first]}): Node.js and npm are needed to build the "
            "generative UI and `npx` is not on the PATH; install Node.js 18 or newer "
            "(https://nodejs.org), or build it elsewhere with `runyard build-ui` and start "
            "with RUNYARD_UI_BUILD=false"
        )
    schemas: dict[str, object] = {}
    for graph_id, target in project.ui.items():
        started = time.monotonic()
        single = output / ".entries" / graph_id
        _build_entry(project, npx, graph_id, target, single, show_output)
        built = json.loads((single / SCHEMAS_FILE).read_text())
        schemas.update(built)
        (single / PUBLIC_DIR / graph_id).rename(_mkdir(output / PUBLIC_DIR) / graph_id)
        log.info(
            "ui_built graph_id=%s file=%s seconds=%.1f",
            graph_id,
            target,
            time.monotonic() - started,
        )
    shutil.rmtree(output / ".entries", ignore_errors=True)
    (output / SCHEMAS_FILE).write_text(json.dumps(schemas))


def _build_entry(
    project: ProjectConfig, npx: str, graph_id: str, target: str, out: Path, show_output: bool
) -> None:
    command = [npx, *builder_command(str(out))[1:]]
    env = {**os.environ, **builder_env({graph_id: target}, project.ui_shared)}
    hint = f"run `runyard build-ui --config {project.path}` to see the whole output"
    try:
        done = subprocess.run(
            command,
            cwd=project.project_dir,
            env=env,
            capture_output=not show_output,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"ui.{graph_id} ({target}): the build took over {BUILD_TIMEOUT_SECONDS:.0f} s; {hint}"
        ) from None
    if done.returncode != 0 or not (out / SCHEMAS_FILE).is_file():
        if show_output:
            raise ConfigError(f"ui.{graph_id} ({target}): the build failed, see its output above")
        raise ConfigError(
            f"ui.{graph_id} ({target}): the build failed (exit {done.returncode}): "
            f"{_first_error((done.stderr or '') + (done.stdout or ''))}; {hint}"
        )


def _first_error(output: str) -> str:
    """The line that says what went wrong, from esbuild's or npm's output."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for marker in ("[ERROR]", "error:", "Error:", "npm error"):
        for index, line in enumerate(lines):
            if marker in line:
                # esbuild puts the file and line under its message.
                detail = lines[index + 1] if index + 1 < len(lines) else ""
                return f"{line} {detail}".strip()[:500]
    return (lines[-1] if lines else "no output")[:500]


def _prebuilt(project: ProjectConfig, folder: Path) -> UiBundles:
    missing = "no build found"
    if (folder / SCHEMAS_FILE).is_file():
        bundles = UiBundles.load(folder)
        absent = [graph_id for graph_id in project.ui if graph_id not in bundles.assets]
        if not absent:
            return bundles
        missing = f"ui.{absent[0]} is not in the build"
    raise ConfigError(
        f"RUNYARD_UI_BUILD=false and {missing} in {folder}: run `runyard build-ui` "
        "(with RUNYARD_UI_DIR set the same way), or unset RUNYARD_UI_BUILD"
    )


def _publish(staging: Path, folder: Path) -> None:
    """Replace `folder` by a copy of the build, leaving no half-written folder in its place."""
    fresh = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    fresh.chmod(0o755)  # mkdtemp's 0700 would hide the build from the user an image runs as
    shutil.copytree(staging, fresh, dirs_exist_ok=True)
    old = folder.with_name(f".{folder.name}-old-{os.getpid()}")
    try:
        if folder.exists():
            folder.rename(old)
        fresh.rename(folder)
    except OSError as exc:
        # Another instance sharing the folder published its build at the same moment; this
        # instance serves its own from memory either way.
        log.warning("ui_publish_skipped folder=%s error=%s", folder, exc)
        shutil.rmtree(fresh, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
