"""Builds the image of a project with Docker."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from runyard.deploy.dockerfile import DOCKERIGNORE, WHEEL_DIR, default_base_image, render_dockerfile
from runyard.deploy.project import BuildConfig
from runyard.deploy.wheel import wheel_name, write_runyard_wheel
from runyard.domain.errors import ConfigError

# Never part of an image: environments, caches, VCS data, the dev store.
IGNORED = (
    ".git",
    ".hg",
    ".venv",
    "venv",
    "__pycache__",
    "*.pyc",
    ".runyard",
    ".langgraph_api",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "node_modules",
    WHEEL_DIR,
)


class DeployError(ConfigError):
    """Docker is missing or a docker command failed; the message says which and what to do."""


def default_tag(build: BuildConfig) -> str:
    """The image tag used when none is given: `runyard-<project>:latest`."""
    return f"runyard-{build.project_name.lower()}:latest"


def write_dockerfile(build: BuildConfig, save_path: Path) -> tuple[Path, Path]:
    """Write the Dockerfile and, in the project's `.runyard-dist/`, the wheel it installs."""
    wheel = write_runyard_wheel(build.project_dir / WHEEL_DIR)
    save_path.write_text(render_dockerfile(build, wheel.name))
    return save_path, wheel


def write_dockerignore(build: BuildConfig) -> Path | None:
    """Write the project's `.dockerignore` unless it has one; the path written, or None."""
    path = build.project_dir / ".dockerignore"
    try:
        with path.open("x") as out:
            out.write(DOCKERIGNORE)
    except FileExistsError:
        return None
    return path


def stage_context(build: BuildConfig, folder: Path) -> tuple[Path, Path]:
    """Copy the project into `folder` with the wheel and the Dockerfile: (context, Dockerfile).

    The project gets its `.dockerignore` first (if it has none), and the copy carries it:
    Docker applies it to the copy as it would to the project.
    """
    if write_dockerignore(build) is not None:
        print(f"runyard: wrote {build.project_dir / '.dockerignore'}", flush=True)
    context = folder / "context"
    shutil.copytree(
        build.project_dir, context, ignore=shutil.ignore_patterns(*IGNORED), symlinks=True
    )
    write_runyard_wheel(context / WHEEL_DIR)
    dockerfile = context / WHEEL_DIR / "Dockerfile"
    dockerfile.write_text(render_dockerfile(build, wheel_name()))
    return context, dockerfile


def docker_binary() -> str:
    """The docker CLI, or DeployError saying how to get it."""
    found = shutil.which("docker")
    if found is None:
        raise DeployError(
            "docker is not installed; install Docker (on Debian: apt-get install docker.io)"
        )
    return found


def build_image(
    build: BuildConfig,
    tag: str,
    base_image: str | None = None,
    docker: list[str] | None = None,
    pull: bool = False,
) -> None:
    """`docker build --network host` of the project; raises DeployError when it fails."""
    command = docker or [docker_binary()]
    base = base_image or build.base_image or default_base_image(build.python_version)
    with tempfile.TemporaryDirectory(prefix="runyard-build-") as scratch:
        context, dockerfile = stage_context(build, Path(scratch))
        args = [*command, "build", "--network", "host", "-t", tag, "-f", str(dockerfile)]
        args += ["--build-arg", f"BASE_IMAGE={base}"]
        if pull:
            args.append("--pull")
        print("runyard: " + " ".join(args[len(command) :]) + " <project>", flush=True)
        result = subprocess.run([*args, str(context)], check=False)
    if result.returncode != 0:
        raise DeployError(f"docker build failed with exit code {result.returncode} (output above)")
