"""`runyard dockerfile`, `build`, `up`, `down`, `k8s` and `base-images`: images and
deployments."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.cli.common import CliError, add_project_options, command, config_flag

if TYPE_CHECKING:
    from runyard.deploy.compose import Deployment
    from runyard.deploy.project import BuildConfig


def add_commands(sub: Any) -> None:
    """dockerfile, build, up, down, k8s, base-images."""
    dockerfile = command(
        sub, "dockerfile", "write the Dockerfile of the project (and the Runyard wheel it installs)"
    )
    add_project_options(dockerfile)
    dockerfile.add_argument("save_path", type=Path, help="where to write the Dockerfile")
    dockerfile.set_defaults(handler=_dockerfile)

    build = command(sub, "build", "build a Docker image of the project")
    add_project_options(build)
    _add_image_options(build)
    build.add_argument("--pull", action="store_true", help="pull a newer base image first")
    build.set_defaults(handler=_build)

    up = command(
        sub, "up", "build the project's image, start PostgreSQL, Redis, N instances and nginx"
    )
    _add_up_options(up)
    up.set_defaults(handler=_up)

    down = command(sub, "down", "stop what `runyard up` started (volumes kept)")
    add_project_options(down)
    down.add_argument("--dir", type=Path, default=None, help="the folder `up` wrote into")
    down.add_argument(
        "-v", "--volumes", action="store_true", help="also remove the database and Redis data"
    )
    down.set_defaults(handler=_down)

    k8s = command(
        sub,
        "k8s",
        "write Kubernetes manifests of the project's image (a kustomization: the migrations "
        "Job, the instances, their Service, budget, autoscaler and network policy)",
    )
    _add_k8s_options(k8s)
    k8s.set_defaults(handler=_k8s)

    base_images = command(
        sub,
        "base-images",
        "build the base, PostgreSQL, Redis and nginx images from Debian packages "
        "(debootstrap, as root), for `runyard up` with no image registry",
    )
    _add_base_images_options(base_images)
    base_images.set_defaults(handler=_base_images)


def _add_up_options(up: argparse.ArgumentParser) -> None:
    add_project_options(up)
    _add_image_options(up)
    up.add_argument("--instances", type=int, default=3, help="Runyard instances (default 3)")
    up.add_argument(
        "--network",
        choices=("bridge", "host"),
        default="bridge",
        help="bridge: a project network, only nginx published (default); host: every "
        "container on the host network, on loopback",
    )
    up.add_argument(
        "--host", default=None, help="address nginx is published on (all; host network: 127.0.0.1)"
    )
    up.add_argument("--port", type=int, default=8000, help="port nginx listens on (default 8000)")
    up.add_argument(
        "--postgres-port", type=int, default=5433, help="PostgreSQL's port, host network (5433)"
    )
    up.add_argument(
        "--redis-port", type=int, default=6380, help="Redis's port, host network (6380)"
    )
    up.add_argument("--postgres-image", default=None, help="PostgreSQL image (postgres:15)")
    up.add_argument("--redis-image", default=None, help="Redis image (redis:7)")
    up.add_argument("--nginx-image", default=None, help="nginx image (nginx:1.27)")
    up.add_argument("--no-build", action="store_true", help="use the image as it is")
    up.add_argument(
        "--dir", type=Path, default=None, help="where to write the compose file (.runyard/up)"
    )
    up.add_argument(
        "--wait-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for every instance to answer through nginx (300)",
    )


def _add_k8s_options(parser: argparse.ArgumentParser) -> None:
    from runyard.deploy.kubernetes.app import DEFAULT_INGRESS_NAMESPACE

    add_project_options(parser)
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="folder to write (default: k8s/ beside the config file)",
    )
    parser.add_argument(
        "-t",
        "--tag",
        default=None,
        help="the image the pods run, as `runyard build -t` tagged and pushed it "
        "(registry/name:tag or name@sha256:...; default runyard-<project>:latest)",
    )
    parser.add_argument(
        "--ingress-namespace",
        default=DEFAULT_INGRESS_NAMESPACE,
        help="the namespace of the ingress controller, the only pods let in "
        f"(default {DEFAULT_INGRESS_NAMESPACE})",
    )


def _add_base_images_options(parser: argparse.ArgumentParser) -> None:
    from runyard.deploy.debian import DEFAULT_CACHE

    parser.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"where the base's root filesystem is kept between runs (default {DEFAULT_CACHE})",
    )
    parser.add_argument(
        "--mirror", default=None, help="Debian mirror (default: the one apt uses here)"
    )
    parser.add_argument(
        "--ca-certificates",
        type=Path,
        default=None,
        help="a CA bundle for the images and pip to trust (e.g. this machine's "
        "/etc/ssl/certs/ca-certificates.crt, behind a TLS-inspecting proxy)",
    )
    parser.add_argument(
        "--base-only", action="store_true", help="only the base image (for `runyard build`)"
    )


def _add_image_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--tag", default=None, help="image tag (runyard-<project>:latest)")
    parser.add_argument(
        "--base-image", default=None, help="base image (python:<python_version>-slim)"
    )


def _project(args: argparse.Namespace) -> BuildConfig:
    from runyard.deploy.project import load_build_config
    from runyard.project.config import find_config

    return load_build_config(find_config(args.config))


def _dockerfile(args: argparse.Namespace) -> None:
    from runyard.deploy.images import write_dockerfile, write_dockerignore

    build = _project(args)
    dockerfile, wheel = write_dockerfile(build, args.save_path.resolve())
    print(f"runyard: wrote {dockerfile} and {wheel}", flush=True)
    ignore = write_dockerignore(build)
    if ignore is not None:
        print(
            f"runyard: wrote {ignore} (keeps .env, .runyard/, .langgraph_api/, .venv/, .git/ out)",
            flush=True,
        )
    else:
        print(f"runyard: kept the existing {build.project_dir / '.dockerignore'}", flush=True)
    print(
        f"runyard: build it with: docker build --network host -f {dockerfile} {build.project_dir}",
        flush=True,
    )


def _build(args: argparse.Namespace) -> None:
    from runyard.deploy.images import build_image, default_tag

    build = _project(args)
    tag = args.tag or default_tag(build)
    build_image(build, tag, base_image=args.base_image, pull=args.pull)
    print(f"runyard: built image {tag}", flush=True)


def _up(args: argparse.Namespace) -> None:
    from runyard.deploy.images import build_image, default_tag
    from runyard.deploy.stack import Stack, compose_command, project_name, write_deployment

    if args.instances < 1:
        raise CliError("--instances must be at least 1")
    build = _project(args)
    folder = _up_folder(args, build)
    compose = compose_command()  # before a build that would be wasted without it
    tag = args.tag or default_tag(build)
    deployment = _deployment(args, build, tag, folder)
    compose_file = write_deployment(deployment, folder)
    print(f"runyard: wrote {compose_file}, nginx.conf and .env (the database password)", flush=True)
    if not args.no_build:
        build_image(build, tag, base_image=args.base_image)
    stack = Stack(compose, folder, project_name(build.project_name))
    stack.up(deployment)
    stack.wait_ready(deployment, args.wait_timeout)
    print(f"runyard: {args.instances} instance(s) answer through nginx on {deployment.url}")
    if deployment.bind_host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"runyard: nginx is published on {deployment.bind_host} without authentication; "
            "configure `auth` in langgraph.json before exposing it to anyone",
            flush=True,
        )
    print(f"runyard: stop it with: runyard down{config_flag(args)}", flush=True)


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


def _down(args: argparse.Namespace) -> None:
    from runyard.deploy.stack import COMPOSE_FILE, Stack, compose_command, project_name

    build = _project(args)
    folder = (args.dir or build.project_dir / ".runyard" / "up").resolve()
    if not (folder / COMPOSE_FILE).is_file():
        raise CliError(f"nothing to stop: no {COMPOSE_FILE} in {folder} (see --dir)")
    stack = Stack(compose_command(), folder, project_name(build.project_name))
    stack.down(remove_volumes=args.volumes)
    volumes = " and ".join(stack.volumes())
    if args.volumes:
        print(f"runyard: stopped; removed the volumes {volumes}", flush=True)
    else:
        print(
            f"runyard: stopped; kept the volumes {volumes} (the database and Redis data): "
            "the next `runyard up` finds them, `runyard down --volumes` removes them",
            flush=True,
        )


def _k8s(args: argparse.Namespace) -> None:
    from runyard.deploy.images import default_tag
    from runyard.deploy.kubernetes.files import SECRET_EXAMPLE, TRIAL_DIR, write_manifests
    from runyard.deploy.kubernetes.project import project_app

    build = _project(args)
    folder = (args.output or build.project_dir / "k8s").resolve()
    app = project_app(build, args.tag or default_tag(build), args.ingress_namespace)
    write_manifests(app, folder)
    shown = os.path.relpath(folder) if folder.is_relative_to(Path.cwd()) else str(folder)
    print(
        f"runyard: wrote {shown} for the image {app.image}; its pods drain for "
        f"{app.drain_timeout:g} s (WORKER_DRAIN_TIMEOUT) within {app.grace_seconds} s to stop",
        flush=True,
    )
    print(
        f"runyard: create the Secret {app.secret_name} (see {shown}/{SECRET_EXAMPLE}), then:\n"
        f"  kubectl apply -k {shown} -l app.kubernetes.io/component=migrate\n"
        f"  kubectl wait --for=condition=complete --timeout=30m job/{app.migrate_name}\n"
        f"  kubectl apply -k {shown}\n"
        f"runyard: {shown}/{TRIAL_DIR} adds PostgreSQL and Redis in the cluster, for trials only",
        flush=True,
    )


def _base_images(args: argparse.Namespace) -> None:
    from runyard.deploy.debian import build_debian_images

    images = build_debian_images(
        cache=args.cache.resolve(),
        mirror=args.mirror,
        ca_certificates=args.ca_certificates,
        base_only=args.base_only,
    )
    command = "build" if args.base_only else "up"
    print(f"runyard: built; use them with: runyard {command} {' '.join(images.up_flags())}")
