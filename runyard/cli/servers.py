"""`runyard dev` and `runyard serve`: the ports, the address checks and the server."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.cli.common import (
    CliError,
    add_project_options,
    command,
    keep_data_beside_project,
    load_settings,
)
from runyard.domain.errors import RunyardError

if TYPE_CHECKING:
    from runyard.settings import Settings

DEFAULT_DEV_PORT = 2024
DEFAULT_SERVE_PORT = 8000


def add_commands(sub: Any) -> None:
    """dev, serve."""
    dev = command(sub, "dev", "run on the embedded SQLite store with in-process execution")
    _add_server_options(dev, DEFAULT_DEV_PORT, ", or the next free one")
    dev.add_argument("--no-reload", action="store_true", help="do not restart on code changes")
    dev.add_argument(
        "--no-browser",
        action="store_true",
        help="as `langgraph dev` takes it; runyard dev opens no browser anyway",
    )
    dev.set_defaults(handler=_dev)

    serve = command(
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


def _add_server_options(parser: argparse.ArgumentParser, port: int, fallback: str) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "-p", "--port", type=int, default=None, help=f"port to bind (default {port}{fallback})"
    )
    add_project_options(parser)
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
    _run_dev_server(args, port, reload=not args.no_reload)


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

    settings = load_settings(Settings)
    if settings.database_url is None and not (args.sqlite or settings.sqlite):
        raise CliError(
            "no database configured: set DATABASE_URL (or DATABASE_URI) to a PostgreSQL URL, "
            "or serve on the embedded SQLite file with --sqlite or RUNYARD_SQLITE=true"
        )


def _require_auth_off_loopback(args: argparse.Namespace) -> None:
    """Refuse to serve a non-loopback address with no auth, unless explicitly allowed.

    As Redis's protected mode: an open server reachable from the network is a choice the
    operator states, not a default.
    """
    from runyard.project.config_env import declared_auth
    from runyard.settings import Settings

    if is_loopback(args.host):
        return
    settings = load_settings(Settings)
    if args.allow_unauthenticated or settings.allow_unauthenticated:
        return
    path = declared_auth(settings.config_path)
    if path and _authenticates(settings.config_path):
        return
    unless = (
        "bind a loopback address (--host 127.0.0.1), or, behind a gateway that "
        "authenticates, allow it explicitly with --allow-unauthenticated or "
        "RUNYARD_ALLOW_UNAUTHENTICATED=true"
    )
    if path:
        raise CliError(
            f"refusing to serve on {args.host}: the auth object of auth.path ({path}) registers "
            "no @auth.authenticate handler, so every request is anonymous and anyone who can "
            f"reach it could use every route. Add an @auth.authenticate handler, {unless}"
        )
    raise CliError(
        f"refusing to serve on {args.host} with no auth configured: anyone who can reach it "
        f"could use every route. Set auth.path in langgraph.json, {unless}"
    )


def _authenticates(config_path: Path | None) -> bool:
    """Whether the project's auth object (its config file's, or an image's LANGGRAPH_AUTH)
    registers an authenticate handler (its module is imported here, as the server imports
    it; a broken one is refused with its error)."""
    from runyard.auth.handlers import declared_handlers
    from runyard.project.config import apply_environment
    from runyard.project.config_env import load_project

    try:
        project = load_project(config_path)
        apply_environment(project)
        handlers = declared_handlers(project)
    except RunyardError as exc:
        raise CliError(exc.message) from None
    return handlers is not None and handlers.authenticate is not None


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

    from runyard.app.factory import create_app
    from runyard.app.server import DrainingServer, ServerConfig
    from runyard.settings import Settings

    settings = load_settings(Settings)
    if settings.database_url is None:
        keep_data_beside_project(settings)
        settings = load_settings(Settings)
    app = create_app(settings)

    config = ServerConfig(
        app,
        head_timeout_seconds=settings.head_timeout_seconds,
        max_head_bytes=settings.max_head_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
        max_connections=settings.max_connections,
        host=args.host,
        port=port,
        log_level="info",
        access_log=bool(settings.access_log),
        timeout_graceful_shutdown=int(settings.worker_drain_timeout) + 5,
    )
    server = DrainingServer(config, app.state.runtime.begin_drain)
    server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


def _run_dev_server(args: argparse.Namespace, port: int, reload: bool) -> None:
    from uvicorn.main import STARTUP_FAILURE

    from runyard.app.reloading import reloader
    from runyard.app.server import AnnouncingServer, ServerConfig
    from runyard.settings import Settings

    if args.config is not None:
        os.environ["RUNYARD_CONFIG"] = str(args.config.resolve())
    settings = load_settings(Settings)
    folder = keep_data_beside_project(settings)
    settings = load_settings(Settings)  # with the data folder the project's
    includes, excludes = _ui_reload(settings) if reload else ([], [])
    config = ServerConfig(
        "runyard.app.factory:create_dev_app",
        head_timeout_seconds=settings.head_timeout_seconds,
        max_head_bytes=settings.max_head_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
        max_connections=settings.max_connections,
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
    from runyard.project.config import declares_ui, find_config
    from runyard.project.ui_bundles import reload_patterns

    try:
        config = find_config(settings.config_path)
        if not declares_ui(config):
            return [], []
    except RunyardError:
        return [], []  # the server's start-up reports it
    return reload_patterns(config.parent, settings.resolved_ui_dir(), settings.data_dir)


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
    raise CliError(f"no free port between {start} and {start + 99} on {host}")


def _require_free_port(host: str, port: int) -> int:
    if not _port_is_free(host, port):
        raise CliError(f"port {port} on {host} is already in use; choose another with --port")
    return port
