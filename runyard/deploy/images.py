"""Builds the image of a project with Docker."""

from __future__ import annotations

import shutil
import ssl
import tempfile
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from runyard.deploy.docker_output import failure_hint, run_showing_output
from runyard.deploy.dockerfile import (
    CA_BUNDLE,
    DOCKERIGNORE,
    WHEEL_DIR,
    default_base_image,
    render_dockerfile,
)
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


def watched_change(_change: Any, path: str) -> bool:
    """Whether a changed file is part of the image (`runyard up --watch` rebuilds on it)."""
    return not any(fnmatch(part, pattern) for part in Path(path).parts for pattern in IGNORED)


def ignores_env_files(project_dir: Path) -> bool:
    """Whether the project's .dockerignore keeps `.env` files out of its image."""
    path = project_dir / ".dockerignore"
    lines = path.read_text().splitlines() if path.is_file() else []
    return any(line.strip().rstrip("/") in (".env", "**/.env", "*.env") for line in lines)


def write_dockerignore(build: BuildConfig) -> Path | None:
    """Write the project's `.dockerignore` unless it has one; the path written, or None."""
    path = build.project_dir / ".dockerignore"
    try:
        with path.open("x") as out:
            out.write(DOCKERIGNORE)
    except FileExistsError:
        return None
    return path


def stage_context(
    build: BuildConfig, folder: Path, ca_certificates: Path | None = None
) -> tuple[Path, Path]:
    """Copy the project into `folder` with the wheel and the Dockerfile: (context, Dockerfile).

    The project gets its `.dockerignore` first (if it has none), and the copy carries it:
    Docker applies it to the copy as it would to the project. `ca_certificates`, a CA
    bundle, goes beside the wheel, and the image's downloads trust it.
    """
    if write_dockerignore(build) is not None:
        print(f"runyard: wrote {build.project_dir / '.dockerignore'}", flush=True)
    context = folder / "context"
    shutil.copytree(
        build.project_dir, context, ignore=shutil.ignore_patterns(*IGNORED), symlinks=True
    )
    write_runyard_wheel(context / WHEEL_DIR)
    if ca_certificates is not None:
        shutil.copyfile(ca_certificates, context / WHEEL_DIR / CA_BUNDLE)
    dockerfile = context / WHEEL_DIR / "Dockerfile"
    dockerfile.write_text(
        render_dockerfile(build, wheel_name(), ca_bundle=ca_certificates is not None)
    )
    return context, dockerfile


def host_ca_bundle() -> Path:
    """This machine's CA bundle (what its OpenSSL trusts), or DeployError saying so."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise DeployError(
        "this machine has no CA bundle file to read (OpenSSL's is "
        f"{paths.openssl_cafile}); pass one with --ca-certificates PATH"
    )


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
    ca_certificates: Path | None = None,
) -> None:
    """`docker build --network host` of the project; raises DeployError when it fails,
    saying what to do when Docker's output shows a known cause."""
    command = docker or [docker_binary()]
    base = base_image or build.base_image or default_base_image(build.python_version)
    with tempfile.TemporaryDirectory(prefix="runyard-build-") as scratch:
        context, dockerfile = stage_context(build, Path(scratch), ca_certificates)
        args = [*command, "build", "--network", "host", "-t", tag, "-f", str(dockerfile)]
        args += ["--build-arg", f"BASE_IMAGE={base}"]
        if pull:
            args.append("--pull")
        print("runyard: " + " ".join(args[len(command) :]) + " <project>", flush=True)
        result = run_showing_output([*args, str(context)])
    if result.returncode != 0:
        hint = failure_hint(result.tail)
        raise DeployError(
            f"docker build failed with exit code {result.returncode}: "
            + (hint or "see its output above")
        )
