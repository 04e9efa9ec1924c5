"""The `runyard` command: dev, serve, migrate, reencrypt, build-ui, dockerfile, build, up,
down, k8s, base-images, validate, new. Each group of subcommands is a module of this package.

The flags LangGraph's CLI users type out of habit are taken where they mean something here
(or nothing harmful): `-p`, `--no-browser`, `--watch`, `--no-pull`, `--wait`."""

from __future__ import annotations

import argparse
import sys

from runyard.cli import data, deploy, project, servers
from runyard.cli.common import CliError
from runyard.cli.servers import is_loopback
from runyard.domain.errors import RunyardError
from runyard.domain.urls import masked_url

__all__ = ["is_loopback", "main"]


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `runyard` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if not getattr(args, "command", None):
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.print_help()
        raise SystemExit(2)
    if unknown:
        # With the subcommand's own usage, not the list of commands.
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        args.handler(args)
    except (CliError, RunyardError) as exc:
        print(f"runyard: error: {masked_url(str(exc))}", file=sys.stderr)
        raise SystemExit(2) from None


def build_parser() -> argparse.ArgumentParser:
    """The `runyard` command line: every subcommand and its flags."""
    from runyard import __version__

    parser = argparse.ArgumentParser(
        prog="runyard", description="Runyard agent server", allow_abbrev=False
    )
    parser.add_argument("--version", action="version", version=f"runyard {__version__}")
    sub = parser.add_subparsers(dest="command")
    servers.add_commands(sub)
    data.add_commands(sub)
    deploy.add_commands(sub)
    project.add_commands(sub)
    return parser
