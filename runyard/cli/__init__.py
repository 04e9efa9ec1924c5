"""The `runyard` command: dev, serve, migrate, reencrypt, build-ui, dockerfile, build, up,
down, k8s, base-images. Each group of subcommands is a module of this package."""

from __future__ import annotations

import argparse
import sys

from runyard.cli import data, deploy, servers
from runyard.cli.common import CliError
from runyard.cli.servers import is_loopback
from runyard.domain.errors import RunyardError
from runyard.domain.urls import masked_url

__all__ = ["is_loopback", "main"]


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `runyard` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        raise SystemExit(2)
    try:
        args.handler(args)
    except (CliError, RunyardError) as exc:
        print(f"runyard: error: {masked_url(str(exc))}", file=sys.stderr)
        raise SystemExit(2) from None


def _parser() -> argparse.ArgumentParser:
    from runyard import __version__

    parser = argparse.ArgumentParser(prog="runyard", description="Runyard agent server")
    parser.add_argument("--version", action="version", version=f"runyard {__version__}")
    sub = parser.add_subparsers(dest="command")
    servers.add_commands(sub)
    data.add_commands(sub)
    deploy.add_commands(sub)
    return parser
