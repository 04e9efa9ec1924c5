"""`runyard up`: build the project's image, start PostgreSQL, Redis, N instances and nginx.

It takes `langgraph up`'s habits (`-p`, port 8123, `--wait`, `--watch`, `--no-pull`) and
finds its own way without an image registry (`--offline`) or behind a TLS-inspecting proxy
(`--ca-certificates`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.cli.common import (
    CliError,
    add_image_options,
    add_project_options,
    command,
    config_flag,
    project_of,
)

if TYPE_CHECKING:
    from runyard.deploy.compose import Deployment
    from runyard.deploy.project import BuildConfig

# `langgraph up`'s port, where a LangGraph user's clients already point.
DEFAULT_UP_PORT = 8123
# `--ca-certificates` with no path: this machine's bundle.
HOST_BUNDLE = "host"


def add_command(sub: Any) -> None:
    """up."""
    up = command(
        sub, "up", "build the project's image, start PostgreSQL, Redis, N instances and nginx"
    )
    add_project_options(up)
    add_image_options(up)
    add_ca_option(up)
    up.add_argument("--instances", type=int, default=3, help="Runyard instances (default 3)")
    up.add_argument(
        "--network",
        choices=("bridge", "host"),
        default="bridge",
        help="bridge: a project network, only nginx published (default); host: every "
        "container on the host network, on loopback",
    )
    up.add_argument(
        "--host",
        default=None,
        help="address nginx is published on (default 127.0.0.1; 0.0.0.0 for every address)",
    )
    up.add_argument(
        "-p",
        "--port",
        type=int,
        default=DEFAULT_UP_PORT,
        help=f"port nginx listens on (default {DEFAULT_UP_PORT}, as `langgraph up`)",
    )
    _add_service_options(up)
    up.add_argument("--no-build", action="store_true", help="use the image as it is")
    up.add_argument(
        "--offline",
        action="store_true",
        help="no image registry: build the base, PostgreSQL, Redis and nginx images from "
        "Debian packages first (as `runyard base-images`, as root) and use them",
    )
    up.add_argument(
        "--dir", type=Path, default=None, help="where to write the compose file (.runyard/up)"
    )
    _add_wait_options(up)
    up.set_defaults(handler=_up)


def add_ca_option(parser: argparse.ArgumentParser) -> None:
    """--ca-certificates [PATH], as `build` and `up` take it."""
    parser.add_argument(
        "--ca-certificates",
        nargs="?",
        const=HOST_BUNDLE,
        default=None,
        metavar="PATH",
        help="a CA bundle the image's downloads trust (behind a TLS-inspecting proxy); "
        "without PATH, this machine's own bundle",
    )


def ca_bundle(args: argparse.Namespace) -> Path | None:
    """The CA bundle `--ca-certificates` names (this machine's without a path), or None."""
    from runyard.deploy.images import host_ca_bundle

    if args.ca_certificates is None:
        return None
    if args.ca_certificates == HOST_BUNDLE:
        return host_ca_bundle()
    path = Path(args.ca_certificates)
    if not path.is_file():
        raise CliError(f"--ca-certificates {path}: no such file")
    return path


def _add_service_options(up: argparse.ArgumentParser) -> None:
    up.add_argument(
        "--postgres-port", type=int, default=5433, help="PostgreSQL's port, host network (5433)"
    )
    up.add_argument(
        "--redis-port", type=int, default=6380, help="Redis's port, host network (6380)"
    )
    up.add_argument("--postgres-image", default=None, help="PostgreSQL image (postgres:15)")
    up.add_argument("--redis-image", default=None, help="Redis image (redis:7)")
    up.add_argument("--nginx-image", default=None, help="nginx image (nginx:1.27)")


def _add_wait_options(up: argparse.ArgumentParser) -> None:
    up.add_argument(
        "--wait-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for every instance to answer through nginx (300)",
    )
    up.add_argument(
        "--wait",
        action="store_true",
        help="as `langgraph up` takes it: runyard up always waits for every instance, then "
        "returns with the deployment running",
    )
    up.add_argument(
        "--watch",
        action="store_true",
        help="then rebuild the image and restart the instances when the project's files "
        "change (Ctrl-C stops watching; the deployment keeps running)",
    )


def _up(args: argparse.Namespace) -> None:
    from runyard.deploy.images import default_tag
    from runyard.deploy.stack import Stack, compose_command, project_name, write_deployment

    if args.instances < 1:
        raise CliError("--instances must be at least 1")
    build = project_of(args)
    folder = _up_folder(args, build)
    ca = ca_bundle(args)
    compose = compose_command()  # before a build that would be wasted without it
    if args.offline:
        _use_debian_images(args, ca)
    tag = args.tag or default_tag(build)
    deployment = _deployment(args, build, tag, folder)
    compose_file = write_deployment(deployment, folder)
    print(f"runyard: wrote {compose_file}, nginx.conf and .env (the database password)", flush=True)
    stack = Stack(compose, folder, project_name(build.project_name))
    _build_and_start(args, build, stack, deployment, ca)
    print(f"runyard: {args.instances} instance(s) answer through nginx on {deployment.url}")
    if deployment.bind_host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"runyard: nginx is published on {deployment.bind_host} without authentication; "
            "configure `auth` in langgraph.json before exposing it to anyone",
            flush=True,
        )
    print(f"runyard: stop it with: runyard down{config_flag(args)}", flush=True)
    if args.watch:
        _watch(args, build, stack, deployment, ca)


def _build_and_start(
    args: argparse.Namespace,
    build: BuildConfig,
    stack: Any,
    deployment: Deployment,
    ca: Path | None,
) -> None:
    from runyard.deploy.images import build_image

    if not args.no_build:
        build_image(
            build, deployment.image, base_image=args.base_image, pull=args.pull, ca_certificates=ca
        )
    stack.up(deployment)
    stack.wait_ready(deployment, args.wait_timeout)


def _use_debian_images(args: argparse.Namespace, ca: Path | None) -> None:
    """--offline: the images `runyard base-images` makes, unless others were named."""
    from runyard.deploy.debian import DEFAULT_CACHE, build_debian_images

    images = build_debian_images(cache=DEFAULT_CACHE, ca_certificates=ca)
    args.base_image = args.base_image or images.base
    args.postgres_image = args.postgres_image or images.services["postgres"]
    args.redis_image = args.redis_image or images.services["redis"]
    args.nginx_image = args.nginx_image or images.services["nginx"]


def _watch(
    args: argparse.Namespace,
    build: BuildConfig,
    stack: Any,
    deployment: Deployment,
    ca: Path | None,
) -> None:
    """Rebuild and restart on every change of the project's files, until Ctrl-C."""
    from watchfiles import watch

    from runyard.deploy.images import DeployError, watched_change

    print(f"runyard: watching {build.project_dir} (Ctrl-C stops watching)", flush=True)
    try:
        for changes in watch(build.project_dir, watch_filter=watched_change):
            names = sorted({Path(path).name for _, path in changes})
            print(f"runyard: {', '.join(names[:5])} changed; rebuilding", flush=True)
            try:
                _build_and_start(args, build, stack, deployment, ca)
            except DeployError as exc:
                print(f"runyard: error: {exc}; still watching", flush=True)
                continue
            print(f"runyard: restarted; it answers on {deployment.url}", flush=True)
    except KeyboardInterrupt:
        pass
    print(f"runyard: stopped watching; the deployment keeps running ({deployment.url})")


def _up_folder(args: argparse.Namespace, build: BuildConfig) -> Path:
    folder = (args.dir or build.project_dir / ".runyard" / "up").resolve()
    if folder.is_relative_to(build.project_dir) and not folder.is_relative_to(
        build.project_dir / ".runyard"
    ):
        # The project folder is the image's build context: the password would be baked in.
        raise CliError(
            f"--dir {folder} is inside the project folder, which goes into the image with "
            "the deployment's .env (its database password); choose a folder outside it or "
            "under .runyard/"
        )
    return folder


def _deployment(args: argparse.Namespace, build: BuildConfig, tag: str, folder: Path) -> Deployment:
    from runyard.deploy import compose as defaults
    from runyard.deploy.instance import project_drain_timeout

    env_files = build.env_files_for(folder)
    if build.env_file is not None and not env_files:
        print(
            f'runyard: {build.env_file} ("env" in {build.config_file.name}) does not exist; '
            "the instances get no variables from it",
            flush=True,
        )
    return defaults.Deployment(
        image=tag,
        instances=args.instances,
        network=args.network,
        host=args.host,
        port=args.port,
        postgres_port=args.postgres_port,
        redis_port=args.redis_port,
        postgres_image=args.postgres_image or defaults.POSTGRES_IMAGE,
        redis_image=args.redis_image or defaults.REDIS_IMAGE,
        nginx_image=args.nginx_image or defaults.NGINX_IMAGE,
        env_files=env_files,
        drain_timeout=project_drain_timeout(build.env, build.env_source),
    )
