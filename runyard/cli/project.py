"""`runyard validate` and `runyard new`: a project's config checked, a new project written."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from runyard.cli.common import CliError, add_project_options, command


def add_commands(sub: Any) -> None:
    """validate, new."""
    from runyard.cli.templates import DEFAULT_TEMPLATE, TEMPLATES

    validate = command(
        sub,
        "validate",
        "check langgraph.json and every path it names (graphs, auth, http.app...); exit 0 "
        "when it serves, 1 with the problems",
    )
    add_project_options(validate)
    validate.set_defaults(handler=_validate)

    new = command(sub, "new", "write a new project from a bundled template (no network needed)")
    new.add_argument(
        "path", type=Path, nargs="?", default=Path("."), help="the folder to write (default .)"
    )
    new.add_argument(
        "--template",
        choices=sorted(TEMPLATES),
        default=DEFAULT_TEMPLATE,
        help=f"the template (default {DEFAULT_TEMPLATE}, as LangGraph names it)",
    )
    new.set_defaults(handler=_new)


def _validate(args: argparse.Namespace) -> None:
    from runyard.domain.errors import ConfigError
    from runyard.project.config import find_config
    from runyard.project.config_check import check_config

    try:
        path = find_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    # The check reports a missing env file itself, as a warning line of its own.
    logging.getLogger("runyard.config").setLevel(logging.ERROR)
    found = check_config(path)
    for warning in found.warnings:
        print(f"runyard: warning: {warning}", flush=True)
    if found.problems:
        count = len(found.problems)
        print(f"runyard: {path} has {count} problem{'s' * (count != 1)}:", flush=True)
        for problem in found.problems:
            print(f"  - {problem}", flush=True)
        raise SystemExit(1)
    graphs = ", ".join(found.graphs)
    print(f"runyard: {path} is valid ({len(found.graphs)} graph(s): {graphs})", flush=True)


def _new(args: argparse.Namespace) -> None:
    from runyard.cli.templates import TEMPLATES

    folder: Path = args.path.resolve()
    if folder.exists() and not folder.is_dir():
        raise CliError(f"{folder} is a file; name a folder to write the project into")
    if folder.is_dir() and any(folder.iterdir()):
        raise CliError(f"{folder} is not empty; name a new or empty folder")
    for relative, text in TEMPLATES[args.template].items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    shown = args.path if not args.path.is_absolute() else folder
    print(f"runyard: wrote the {args.template} project into {folder}", flush=True)
    print(
        f"runyard: next: cd {shown}, install it beside Runyard (pip install -e .), "
        "copy .env.example to .env, then runyard dev",
        flush=True,
    )
