"""`runyard dockerfile`, `build`, `up`, `down`, `k8s` and `base-images`: images and
deployments."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.cli.common import (
    CliError,
    add_image_options,
    add_project_options,
    command,
    project_of,
)
from runyard.cli.up import DEFAULT_UP_PORT, add_ca_option, ca_bundle
from runyard.cli.up import add_command as add_up_command

if TYPE_CHECKING:
    from runyard.deploy.project import BuildConfig


def add_commands(sub: Any) -> None:
    """dockerfile, build, up, down, k8s, base-images."""
    dockerfile = command(
        sub, "dockerfile", "write the Dockerfile of the project (and the Runyard wheel it installs)"
    )
    add_project_options(dockerfile)
    dockerfile.add_argument("save_path", type=Path, help="where to write the Dockerfile")
    dockerfile.add_argument(
        "--add-docker-compose",
        action="store_true",
        help="also write what `runyard up` runs beside it: docker-compose.yml, nginx.conf and "
        "the .env holding the database password",
    )
    dockerfile.set_defaults(handler=_dockerfile)

    build = command(sub, "build", "build a Docker image of the project")
    add_project_options(build)
    add_image_options(build)
    add_ca_option(build)
    build.set_defaults(handler=_build)

    add_up_command(sub)

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


def _dockerfile(args: argparse.Namespace) -> None:
    from runyard.deploy.images import default_tag, write_dockerfile, write_dockerignore

    build = project_of(args)
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
    tag = f" -t {default_tag(build)}" if args.add_docker_compose else ""
    print(
        f"runyard: build it with: docker build --network host{tag} -f {dockerfile} "
        f"{build.project_dir}",
        flush=True,
    )
    if args.add_docker_compose:
        _write_compose(build, dockerfile.parent)


def _write_compose(build: BuildConfig, folder: Path) -> None:
    """`dockerfile --add-docker-compose`: what `runyard up` runs, beside the Dockerfile."""
    from runyard.deploy.compose import Deployment
    from runyard.deploy.images import default_tag, ignores_env_files
    from runyard.deploy.instance import project_drain_timeout
    from runyard.deploy.stack import write_deployment

    if folder.is_relative_to(build.project_dir) and not ignores_env_files(build.project_dir):
        raise CliError(
            f"{build.project_dir / '.dockerignore'} does not keep .env files out of the image, "
            "and the deployment's .env beside the Dockerfile holds its database password; add "
            "`**/.env` to it, or write the Dockerfile outside the project folder"
        )
    deployment = Deployment(
        image=default_tag(build),
        port=DEFAULT_UP_PORT,
        env_files=build.env_files_for(folder),
        drain_timeout=project_drain_timeout(build.env, build.env_source),
    )
    compose_file = write_deployment(deployment, folder)
    print(
        f"runyard: wrote {compose_file}, nginx.conf and .env (the database password); once "
        f"the image is built, start it with: docker compose -f {compose_file} up -d "
        f"(nginx on {deployment.url})",
        flush=True,
    )


def _build(args: argparse.Namespace) -> None:
    from runyard.deploy.images import build_image, default_tag

    build = project_of(args)
    tag = args.tag or default_tag(build)
    build_image(
        build, tag, base_image=args.base_image, pull=args.pull, ca_certificates=ca_bundle(args)
    )
    print(f"runyard: built image {tag}", flush=True)


def _down(args: argparse.Namespace) -> None:
    from runyard.deploy.stack import COMPOSE_FILE, Stack, compose_command, project_name

    build = project_of(args)
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

    build = project_of(args)
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
