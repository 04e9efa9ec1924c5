"""What the `runyard` subcommands share: their errors, options and settings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.domain.errors import RunyardError

if TYPE_CHECKING:
    from runyard.deploy.project import BuildConfig
    from runyard.settings import Settings


class CliError(Exception):
    """A command refused, with the reason printed as `runyard: error: ...`."""


def command(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose own --help starts with the summary the command list shows; it
    takes no abbreviated flag (`--wait` is not `--wait-timeout`) and reports an unknown one
    with its own usage."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=summary, allow_abbrev=False
    )
    parser.set_defaults(parser=parser)
    return parser


def add_project_options(parser: argparse.ArgumentParser) -> None:
    """-c/--config, as every command that reads the project's config spells it."""
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=None,
        help="langgraph.json / runyard.json (default: runyard.json, else langgraph.json, "
        "in the working directory)",
    )


def add_image_options(parser: argparse.ArgumentParser) -> None:
    """-t/--tag, --base-image and --pull/--no-pull, as `build` and `up` take them."""
    parser.add_argument("-t", "--tag", default=None, help="image tag (runyard-<project>:latest)")
    parser.add_argument(
        "--base-image", default=None, help="base image (python:<python_version>-slim)"
    )
    parser.add_argument(
        "--pull",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pull a newer base image first (default --no-pull: use the local one, as the "
        "images of `runyard base-images` need)",
    )


def config_flag(args: argparse.Namespace) -> str:
    flags = f" -c {args.config}" if args.config else ""
    return flags + (f" --dir {args.dir}" if args.dir else "")


def load_settings(settings_cls: type[Settings]) -> Settings:
    from pydantic import ValidationError

    try:
        return settings_cls()
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()]
        raise CliError("invalid settings:\n  " + "\n  ".join(lines)) from None


def keep_data_beside_project(settings: Settings) -> Path:
    """The project's folder (that of its config file, else the working directory); the
    embedded store's data goes into its `.runyard/` unless RUNYARD_DATA_DIR says otherwise,
    so two projects started from one working directory never share their data."""
    from runyard.project.config import find_config

    try:
        folder = find_config(settings.config_path).parent
    except RunyardError:
        return Path.cwd()  # the server reports the missing config in its start-up line
    if "data_dir" not in settings.model_fields_set:
        os.environ["RUNYARD_DATA_DIR"] = str(folder / ".runyard")
    return folder


def project_of(args: argparse.Namespace) -> BuildConfig:
    """The build keys of the project `-c/--config` names (else the working directory's)."""
    from runyard.deploy.project import load_build_config
    from runyard.project.config import find_config

    return load_build_config(find_config(args.config))
