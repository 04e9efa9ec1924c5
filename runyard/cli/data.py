"""`runyard migrate`, `reencrypt` and `build-ui`: work on a project's data, then exit."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runyard.cli.common import (
    CliError,
    add_project_options,
    command,
    keep_data_beside_project,
    load_settings,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


def add_commands(sub: Any) -> None:
    """migrate, reencrypt, build-ui."""
    mig = command(
        sub,
        "migrate",
        "apply database migrations to DATABASE_URL (or DATABASE_URI), then exit",
    )
    moves = mig.add_mutually_exclusive_group()
    moves.add_argument(
        "--to",
        metavar="REVISION",
        default=None,
        help="upgrade or downgrade to this migration (e.g. 0008, or head) instead of the newest",
    )
    moves.add_argument(
        "--status",
        action="store_true",
        help="print the database's migration, this Runyard's newest, and whether this Runyard "
        "can serve on it; change nothing",
    )
    mig.set_defaults(handler=_migrate)

    reencrypt = command(
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

    build_ui = command(
        sub, "build-ui", "build the generative UI (`ui` in langgraph.json) with its output shown"
    )
    add_project_options(build_ui)
    build_ui.add_argument(
        "-o", "--output", type=Path, default=None, help="folder (RUNYARD_UI_DIR, else .runyard/ui)"
    )
    build_ui.set_defaults(handler=_build_ui)


def _migrate(args: argparse.Namespace) -> None:
    from runyard.db.engine import create_engine, require_database
    from runyard.settings import Settings

    settings = load_settings(Settings)

    async def run() -> list[str]:
        engine = create_engine(settings.resolved_database_url())
        try:
            await require_database(engine)
            if args.status:
                return await _status(engine)
            return await _move(engine, args.to)
        finally:
            await engine.dispose()

    for line in asyncio.run(run()):
        print(f"runyard: {line}", flush=True)


async def _move(engine: AsyncEngine, to: str | None) -> list[str]:
    """Migrate (to `to`, else up to the newest): what was done, in words."""
    from runyard.db.engine import SCHEMA_REVISION
    from runyard.db.schema import migrate

    if to == "head":
        to = SCHEMA_REVISION
    move = await migrate(engine, to, on_wait=_say_waiting)
    if move.before == move.after:
        if move.after == SCHEMA_REVISION:
            return [f"database is at the newest migration ({SCHEMA_REVISION})"]
        if to is None:
            return [
                f"database is at migration {move.after}, newer than this Runyard's "
                f"{SCHEMA_REVISION}, which serves on it: nothing to do"
            ]
        return [f"database is already at migration {move.after}"]
    before = move.before or "no Runyard tables"
    if move.after == SCHEMA_REVISION:
        return [f"database is at the newest migration ({SCHEMA_REVISION}; was {before})"]
    return [f"database moved from migration {before} to {move.after}"]


def _say_waiting() -> None:
    print("runyard: another migration is running; waiting for it to finish", flush=True)


async def _status(engine: AsyncEngine) -> list[str]:
    """The database's migration, this Runyard's newest, and whether it serves on it."""
    from runyard.db.schema import SchemaFit, schema_state, where

    state = await schema_state(engine)
    if state.fit is SchemaFit.NEWER:
        serves = f"yes (code from migration {state.serves_code_from} on serves on it)"
    elif state.served:
        serves = "yes"
    else:
        serves = f"no: {state.refusal(where(engine))}"
    return [
        f"database {where(engine)}",
        f"current revision: {state.found or 'none (no Runyard tables)'}",
        f"newest revision: {state.code} (this Runyard's)",
        f"this Runyard can serve on it: {serves}",
    ]


def _reencrypt(args: argparse.Namespace) -> None:
    from runyard.settings import Settings
    from runyard.wiring.storage import encryption_at_rest

    if args.config:
        os.environ["RUNYARD_CONFIG"] = str(args.config)
    settings = load_settings(Settings)
    if settings.is_embedded:
        keep_data_beside_project(settings)
        settings = load_settings(Settings)
    at_rest = encryption_at_rest(settings)
    if at_rest is None:
        raise CliError("reencrypt needs LANGGRAPH_AES_KEY, the key to encrypt under")
    if args.batch_size < 1:
        raise CliError("--batch-size must be at least 1")
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
    from runyard.project.config import find_config, load_config
    from runyard.project.ui_bundles import prepare_bundles
    from runyard.settings import Settings

    settings = load_settings(Settings)
    project = load_config(find_config(args.config or settings.config_path))
    if not project.ui:
        raise CliError(f"{project.path} has no 'ui' key: there is no UI to build")
    folder = (args.output or settings.resolved_ui_dir()).resolve()
    bundles = prepare_bundles(project, folder, build=True, show_output=True)
    print(f"runyard: built the UI of {', '.join(bundles.assets)} into {folder}", flush=True)
