"""The `runyard` command: dev, serve, migrate, reencrypt, build-ui, dockerfile, build, up,
down, base-images."""

from __future__ import annotations

import argparse
import asyncio
import errno
import ipaddress
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.domain.errors import RunyardError

if TYPE_CHECKING:
    from runyard.deploy.compose import Deployment
    from runyard.deploy.project import BuildConfig
    from runyard.settings import Settings

DEFAULT_DEV_PORT = 2024
DEFAULT_SERVE_PORT = 8000


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `runyard` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        raise SystemExit(2)
    try:
        args.handler(args)
    except (_CliError, RunyardError) as exc:
        print(f"runyard: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class _CliError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    from runyard import __version__

    parser = argparse.ArgumentParser(prog="runyard", description="Runyard agent server")
    parser.add_argument("--version", action="version", version=f"runyard {__version__}")
    sub = parser.add_subparsers(dest="command")

    dev = _command(sub, "dev", "run on the embedded SQLite store with in-process execution")
    _add_server_options(dev, DEFAULT_DEV_PORT, ", or the next free one")
    dev.add_argument("--no-reload", action="store_true", help="do not restart on code changes")
    dev.set_defaults(handler=_dev)

    serve = _command(
        sub,
        "serve",
        "run in production on DATABASE_URL (PostgreSQL), with Redis if REDIS_URL is set",
    )
    _add_server_options(serve, DEFAULT_SERVE_PORT, "")
    serve.add_argument("--no-migrate", action="store_true", help="skip migrations at start-up")
    serve.add_argument(
        "--sqlite",
        action="store_true",
        help="with no DATABASE_URL, serve on the embedded SQLite file (one instance); "
        "also RUNYARD_SQLITE=true",
    )
    serve.set_defaults(handler=_serve)

    mig = _command(
        sub,
        "migrate",
        "apply database migrations to DATABASE_URL (or DATABASE_URI), then exit",
    )
    mig.set_defaults(handler=_migrate)

    reencrypt = _command(
        sub,
        "reencrypt",
        "re-encrypt stored data under LANGGRAPH_AES_KEY (after a key rotation), then exit",
    )
    reencrypt.add_argument("-c", "--config", default=None, help="the project's langgraph.json")
    reencrypt.add_argument(
        "--batch-size", type=int, default=500, help="rows read and rewritten per transaction"
    )
    reencrypt.add_argument(
        "--pause",
        type=float,
        default=0.0,
        help="seconds to wait between batches, to spare a database that is serving",
    )
    reencrypt.set_defaults(handler=_reencrypt)

    build_ui = _command(
        sub, "build-ui", "build the generative UI (`ui` in langgraph.json) with its output shown"
    )
    _add_project_options(build_ui)
    build_ui.add_argument(
        "-o", "--output", type=Path, default=None, help="folder (RUNYARD_UI_DIR, else .runyard/ui)"
    )
    build_ui.set_defaults(handler=_build_ui)

    dockerfile = _command(
        sub, "dockerfile", "write the Dockerfile of the project (and the Runyard wheel it installs)"
    )
    _add_project_options(dockerfile)
    dockerfile.add_argument("save_path", type=Path, help="where to write the Dockerfile")
    dockerfile.set_defaults(handler=_dockerfile)

    build = _command(sub, "build", "build a Docker image of the project")
    _add_project_options(build)
    _add_image_options(build)
    build.add_argument("--pull", action="store_true", help="pull a newer base image first")
    build.set_defaults(handler=_build)

    up = _command(
        sub, "up", "build the project's image, start PostgreSQL, Redis, N instances and nginx"
    )
    _add_up_options(up)
    up.set_defaults(handler=_up)

    down = _command(sub, "down", "stop what `runyard up` started (volumes kept)")
    _add_project_options(down)
    down.add_argument("--dir", type=Path, default=None, help="the folder `up` wrote into")
    down.add_argument(
        "-v", "--volumes", action="store_true", help="also remove the database and Redis data"
    )
    down.set_defaults(handler=_down)

    base_images = _command(
        sub,
        "base-images",
        "build the base, PostgreSQL, Redis and nginx images from Debian packages "
        "(debootstrap, as root), for `runyard up` with no image registry",
    )
    _add_base_images_options(base_images)
    base_images.set_defaults(handler=_base_images)
    return parser


def _command(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose own --help starts with the summary the command list shows."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=summary)
    return parser


def _add_up_options(up: argparse.ArgumentParser) -> None:
    _add_project_options(up)
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


def _add_project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=None,
        help="langgraph.json / runyard.json (default: runyard.json, else langgraph.json, "
        "in the working directory)",
    )


def _add_image_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--tag", default=None, help="image tag (runyard-<project>:latest)")
    parser.add_argument(
        "--base-image", default=None, help="base image (python:<python_version>-slim)"
    )


def _add_server_options(parser: argparse.ArgumentParser, port: int, fallback: str) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=None, help=f"port to bind (default {port}{fallback})"
    )
    _add_project_options(parser)
    parser.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve a non-loopback --host with no auth configured (behind an authenticating "
        "gateway); also RUNYARD_ALLOW_UNAUTHENTICATED=true",
    )


def _dev(args: argparse.Namespace) -> None:
    # Dev mode is the embedded default by definition: SQLite, in-process dispatch. Runyard's
    # names win over LangGraph's (DATABASE_URI, REDIS_URI), so emptying them is enough.
    os.environ["DATABASE_URL"] = ""
    os.environ["REDIS_URL"] = ""
    if args.config is not None:
        os.environ["RUNYARD_CONFIG"] = str(args.config.resolve())
    _require_auth_off_loopback(args)
    if args.port is None:
        port = _first_free_port(args.host, DEFAULT_DEV_PORT)
        if port != DEFAULT_DEV_PORT:
            print(f"runyard: port {DEFAULT_DEV_PORT} is in use, using {port} instead", flush=True)
    else:
        port = _require_free_port(args.host, args.port)
    _run_server(args, port, reload=not args.no_reload)


def _serve(args: argparse.Namespace) -> None:
    if args.no_migrate:
        os.environ["RUNYARD_MIGRATE_ON_START"] = "false"
    if args.config is not None:
        os.environ["RUNYARD_CONFIG"] = str(args.config.resolve())
    _require_auth_off_loopback(args)
    port = _require_free_port(args.host, args.port or DEFAULT_SERVE_PORT)
    _require_database(args)
    _run_production_server(args, port)


def _require_database(args: argparse.Namespace) -> None:
    """Refuse to become a one-process SQLite server unless the operator asked for one."""
    from runyard.settings import Settings

    settings = _load_settings(Settings)
    if settings.database_url is None and not (args.sqlite or settings.sqlite):
        raise _CliError(
            "no database configured: set DATABASE_URL (or DATABASE_URI) to a PostgreSQL URL, "
            "or serve on the embedded SQLite file with --sqlite or RUNYARD_SQLITE=true"
        )


def _require_auth_off_loopback(args: argparse.Namespace) -> None:
    """Refuse to serve a non-loopback address with no auth, unless explicitly allowed.

    As Redis's protected mode: an open server reachable from the network is a choice the
    operator states, not a default.
    """
    from runyard.graphs.config import declared_auth_path, find_config
    from runyard.settings import Settings

    if is_loopback(args.host):
        return
    settings = _load_settings(Settings)
    if args.allow_unauthenticated or settings.allow_unauthenticated:
        return
    config = find_config(settings.config_path)
    if declared_auth_path(config):
        return
    raise _CliError(
        f"refusing to serve on {args.host} with no auth configured: anyone who can reach it "
        f"could use every route. Set auth.path in {config.name}, bind a loopback address "
        "(--host 127.0.0.1), or, behind a gateway that authenticates, allow it explicitly "
        "with --allow-unauthenticated or RUNYARD_ALLOW_UNAUTHENTICATED=true"
    )


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); False for the rest,
    including every-interface binds (0.0.0.0, ::) and names that might resolve elsewhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _run_production_server(args: argparse.Namespace, port: int) -> None:
    """One process; SIGTERM starts draining the workers at once, beside HTTP shutdown."""
    from uvicorn.main import STARTUP_FAILURE

    from runyard.main import create_app
    from runyard.server import AnnouncingServer, ServerConfig
    from runyard.settings import Settings

    settings = _load_settings(Settings)
    if settings.database_url is None:
        _keep_data_beside_project(settings)
        settings = _load_settings(Settings)
    app = create_app(settings)
    runtime = app.state.runtime

    class DrainingServer(AnnouncingServer):
        def handle_exit(self, sig: int, frame: object) -> None:
            if runtime.workers_started:
                runtime.begin_drain()
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

    config = ServerConfig(
        app,
        head_timeout_seconds=settings.head_timeout_seconds,
        max_head_bytes=settings.max_head_bytes,
        host=args.host,
        port=port,
        log_level="info",
        access_log=bool(settings.access_log),
        timeout_graceful_shutdown=int(settings.worker_drain_timeout) + 5,
    )
    server = DrainingServer(config)
    server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


def _run_server(args: argparse.Namespace, port: int, reload: bool) -> None:
    from uvicorn.main import STARTUP_FAILURE

    from runyard.server import AnnouncingServer, ServerConfig, reloader
    from runyard.settings import Settings

    if args.config is not None:
        os.environ["RUNYARD_CONFIG"] = str(args.config.resolve())
    settings = _load_settings(Settings)
    folder = _keep_data_beside_project(settings)
    settings = _load_settings(Settings)  # with the data folder the project's
    includes, excludes = _ui_reload(settings) if reload else ([], [])
    config = ServerConfig(
        "runyard.main:create_app",
        head_timeout_seconds=settings.head_timeout_seconds,
        max_head_bytes=settings.max_head_bytes,
        factory=True,
        host=args.host,
        port=port,
        reload=reload,
        reload_dirs=[str(folder)],
        reload_includes=includes or None,
        reload_excludes=excludes or None,
        log_level="info",
        access_log=settings.access_log is not False,
        timeout_graceful_shutdown=None,
    )
    # What uvicorn.run does, with a server that says where it serves once it does.
    server = AnnouncingServer(config)
    if config.should_reload:
        supervisor = reloader(config, server)
        supervisor.run()
        if supervisor.died:
            raise SystemExit(STARTUP_FAILURE)
    else:
        server.run()
        if not server.started:
            raise SystemExit(STARTUP_FAILURE)


def _ui_reload(settings: Settings) -> tuple[list[str], list[str]]:
    """What dev's reloader also watches (and skips) for a project with a generative UI."""
    from runyard.graphs.config import declares_ui, find_config
    from runyard.graphs.ui_bundles import reload_patterns

    try:
        config = find_config(settings.config_path)
        if not declares_ui(config):
            return [], []
    except RunyardError:
        return [], []  # the server's start-up reports it
    return reload_patterns(config.parent, settings.resolved_ui_dir(), settings.data_dir)


def _keep_data_beside_project(settings: Settings) -> Path:
    """The project's folder (that of its config file, else the working directory); the
    embedded store's data goes into its `.runyard/` unless RUNYARD_DATA_DIR says otherwise,
    so two projects started from one working directory never share their data."""
    from runyard.graphs.config import find_config

    try:
        folder = find_config(settings.config_path).parent
    except RunyardError:
        return Path.cwd()  # the server reports the missing config in its start-up line
    if "data_dir" not in settings.model_fields_set:
        os.environ["RUNYARD_DATA_DIR"] = str(folder / ".runyard")
    return folder


def _migrate(_args: argparse.Namespace) -> None:
    from runyard.db.engine import create_engine, migrate, require_database
    from runyard.settings import Settings

    settings = _load_settings(Settings)

    async def run() -> None:
        engine = create_engine(settings.resolved_database_url())
        try:
            await require_database(engine)
            await migrate(engine)
        finally:
            await engine.dispose()

    asyncio.run(run())
    print("runyard: database is at the newest migration", flush=True)


def _reencrypt(args: argparse.Namespace) -> None:
    from runyard.runtime import encryption_at_rest
    from runyard.settings import Settings

    if args.config:
        os.environ["RUNYARD_CONFIG"] = str(args.config)
    settings = _load_settings(Settings)
    if settings.is_embedded:
        _keep_data_beside_project(settings)
        settings = _load_settings(Settings)
    at_rest = encryption_at_rest(settings)
    if at_rest is None:
        raise _CliError("reencrypt needs LANGGRAPH_AES_KEY, the key to encrypt under")
    if args.batch_size < 1:
        raise _CliError("--batch-size must be at least 1")
    from runyard.encryption.rotation import Reencryption

    job = Reencryption(
        at_rest,
        settings.resolved_database_url(),
        settings.data_dir,
        args.batch_size,
        args.pause,
        lambda line: print(line, flush=True),
    )
    tally = asyncio.run(job.run())
    print(
        f"runyard: {tally.rewritten} rows re-encrypted under key id {at_rest.ring.current_hex}",
        flush=True,
    )


def _build_ui(args: argparse.Namespace) -> None:
    from runyard.graphs.config import find_config, load_config
    from runyard.graphs.ui_bundles import prepare_bundles
    from runyard.settings import Settings

    settings = _load_settings(Settings)
    project = load_config(find_config(args.config or settings.config_path))
    if not project.ui:
        raise _CliError(f"{project.path} has no 'ui' key: there is no UI to build")
    folder = (args.output or settings.resolved_ui_dir()).resolve()
    bundles = prepare_bundles(project, folder, build=True, show_output=True)
    print(f"runyard: built the UI of {', '.join(bundles.assets)} into {folder}", flush=True)


def _project(args: argparse.Namespace) -> BuildConfig:
    from runyard.deploy.project import load_build_config
    from runyard.graphs.config import find_config

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
        raise _CliError("--instances must be at least 1")
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
    print(f"runyard: stop it with: runyard down{_config_flag(args)}", flush=True)


def _up_folder(args: argparse.Namespace, build: BuildConfig) -> Path:
    folder = (args.dir or build.project_dir / ".runyard" / "up").resolve()
    if folder.is_relative_to(build.project_dir) and not folder.is_relative_to(
        build.project_dir / ".runyard"
    ):
        # The project folder is the image's build context: the password would be baked in.
        raise _CliError(
            f"--dir {folder} is inside the project folder, which goes into the image with "
            "the deployment's .env (its database password); choose a folder outside it or "
            "under .runyard/"
        )
    return folder


def _deployment(args: argparse.Namespace, build: BuildConfig, tag: str, folder: Path) -> Deployment:
    from runyard.deploy import compose as defaults

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
    )


def _down(args: argparse.Namespace) -> None:
    from runyard.deploy.stack import COMPOSE_FILE, Stack, compose_command, project_name

    build = _project(args)
    folder = (args.dir or build.project_dir / ".runyard" / "up").resolve()
    if not (folder / COMPOSE_FILE).is_file():
        raise _CliError(f"nothing to stop: no {COMPOSE_FILE} in {folder} (see --dir)")
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


def _config_flag(args: argparse.Namespace) -> str:
    flags = f" -c {args.config}" if args.config else ""
    return flags + (f" --dir {args.dir}" if args.dir else "")


def _load_settings(settings_cls: type[Settings]) -> Settings:
    from pydantic import ValidationError

    try:
        return settings_cls()
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()]
        raise _CliError("invalid settings:\n  " + "\n  ".join(lines)) from None


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _first_free_port(host: str, start: int) -> int:
    for port in range(start, start + 100):
        if _port_is_free(host, port):
            return port
    raise _CliError(f"no free port between {start} and {start + 99} on {host}")


def _require_free_port(host: str, port: int) -> int:
    if not _port_is_free(host, port):
        raise _CliError(f"port {port} on {host} is already in use; choose another with --port")
    return port


if __name__ == "__main__":
    main()
