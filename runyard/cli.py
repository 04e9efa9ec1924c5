"""The `runyard` command: dev, serve, migrate."""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    except _CliError as exc:
        print(f"runyard: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class _CliError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runyard", description="Runyard agent server")
    sub = parser.add_subparsers(dest="command")

    dev = sub.add_parser("dev", help="run on the embedded SQLite store with in-process execution")
    _add_server_options(dev)
    dev.add_argument("--no-reload", action="store_true", help="do not restart on code changes")
    dev.set_defaults(handler=_dev)

    serve = sub.add_parser("serve", help="run in production on PostgreSQL (and Redis if set)")
    _add_server_options(serve)
    serve.add_argument("--no-migrate", action="store_true", help="skip migrations at start-up")
    serve.set_defaults(handler=_serve)

    mig = sub.add_parser("migrate", help="apply database migrations to DATABASE_URL")
    mig.set_defaults(handler=_migrate)

    up = sub.add_parser(
        "up", help="start PostgreSQL, Redis, N instances and nginx with Docker Compose"
    )
    up.add_argument("--instances", type=int, default=3, help="Runyard instances (default 3)")
    up.add_argument("--file", type=Path, default=None, help="compose file (default: the repo's)")
    up.set_defaults(handler=_up)
    return parser


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port to bind")
    parser.add_argument("--config", type=Path, default=None, help="langgraph.json / runyard.json")


def _dev(args: argparse.Namespace) -> None:
    # Dev mode is the embedded default by definition: SQLite, in-process dispatch.
    os.environ["DATABASE_URL"] = ""
    os.environ["REDIS_URL"] = ""
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
    port = _require_free_port(args.host, args.port or DEFAULT_SERVE_PORT)
    _run_production_server(args, port)


def _run_production_server(args: argparse.Namespace, port: int) -> None:
    """One process; SIGTERM starts draining the workers at once, beside HTTP shutdown."""
    import uvicorn

    from runyard.main import create_app
    from runyard.settings import Settings

    if args.config is not None:
        os.environ["RUNYARD_CONFIG"] = str(args.config.resolve())
    settings = _load_settings(Settings)
    app = create_app(settings)
    runtime = app.state.runtime

    class DrainingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            if runtime.workers_started:
                runtime.begin_drain()
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

    config = uvicorn.Config(
        app,
        host=args.host,
        port=port,
        log_level="info",
        access_log=bool(settings.access_log),
        timeout_graceful_shutdown=int(settings.worker_drain_timeout) + 5,
    )
    print(f"runyard: serving on http://{args.host}:{port}", flush=True)
    DrainingServer(config).run()


def _run_server(args: argparse.Namespace, port: int, reload: bool, workers: int = 1) -> None:
    import uvicorn

    from runyard.settings import Settings

    if args.config is not None:
        os.environ["RUNYARD_CONFIG"] = str(args.config.resolve())
    settings = _load_settings(Settings)
    print(f"runyard: serving on http://{args.host}:{port}", flush=True)
    uvicorn.run(
        "runyard.main:create_app",
        factory=True,
        host=args.host,
        port=port,
        reload=reload,
        workers=None if reload else workers,
        log_level="info",
        access_log=settings.access_log is not False,
        timeout_graceful_shutdown=None,
    )


def _migrate(_args: argparse.Namespace) -> None:
    from runyard.db.engine import create_engine, migrate
    from runyard.settings import Settings

    settings = _load_settings(Settings)

    async def run() -> None:
        engine = create_engine(settings.resolved_database_url())
        try:
            await migrate(engine)
        finally:
            await engine.dispose()

    asyncio.run(run())
    print("runyard: database is at the newest migration", flush=True)


def _up(args: argparse.Namespace) -> None:
    import shutil
    import subprocess

    compose_file = args.file or Path(__file__).resolve().parents[1] / "docker-compose.yml"
    if not compose_file.is_file():
        raise _CliError(f"compose file {compose_file} not found; pass --file PATH")
    if args.instances < 1:
        raise _CliError("--instances must be at least 1")
    if shutil.which("docker") and _docker_compose_v2():
        command = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        command = ["docker-compose"]
    else:
        raise _CliError(
            "Docker Compose is not installed; install Docker, or start instances without it "
            "with scripts/cluster (see the README's production section)"
        )
    command += ["-f", str(compose_file), "up", "--build", "-d"]
    command += ["--scale", f"runyard={args.instances}"]
    print("runyard: " + " ".join(command), flush=True)
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise _CliError(f"docker compose failed with exit code {result.returncode}")
    print("runyard: load balancer on http://127.0.0.1:8000", flush=True)


def _docker_compose_v2() -> bool:
    import subprocess

    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return probe.returncode == 0


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
