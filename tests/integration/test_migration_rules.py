"""Each migration from 0009 on keeps the release before it serving (expand, then contract),
and says which code serves on the schema it leaves (`serves_code_from`).

A migration may add tables, nullable columns or columns with a default, and indexes
(CONCURRENTLY on PostgreSQL). One that drops, renames or narrows what older code reads is a
contract migration: it raises `serves_code_from` above the previous migration's and says so
in its docstring, in a line starting "Contract:". Each migration is applied to a real
database and the schema compared before and after, so raw SQL is held to the rule too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from alembic.script import Script, ScriptDirectory
from sqlalchemy import event, select

from runyard.db.engine import create_engine
from runyard.db.schema import SERVES_CODE_FROM, alembic_config, known_revisions, migrate
from runyard.db.tables import schema_compatibility
from tests.support.schemas import BACKENDS, TableShape, empty_database, shape_of

# The first migration under the rule: the one that records which code serves on the schema.
FIRST_RULED = "0009"
UNCONCURRENT_INDEX = re.compile(
    r"^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF NOT EXISTS\s+)?\S+\s+ON\s+"
    r"(?:ONLY\s+)?\"?(\w+)\"?",
    re.IGNORECASE,
)
ADVICE = (
    "a migration keeps the release before it serving: it adds tables, nullable columns or "
    "columns with a server default, and indexes (CONCURRENTLY on PostgreSQL); dropping or "
    "renaming what older code reads waits for a later release (docs/upgrading.md)"
)


def ruled_scripts() -> list[Script]:
    """The migrations under the rule, oldest first."""
    scripts = ScriptDirectory.from_config(alembic_config())
    revisions = known_revisions()
    return [scripts.get_revision(r) for r in revisions[revisions.index(FIRST_RULED) :]]


def contractions(before: dict[str, TableShape], after: dict[str, TableShape]) -> list[str]:
    """What `after` took away from, or tightened in, what code written for `before` uses."""
    found = []
    for table, old in before.items():
        new = after.get(table)
        if new is None:
            found.append(f"drops table {table}")
            continue
        for name, column in old.columns.items():
            now = new.columns.get(name)
            if now is None:
                found.append(f"drops (or renames) column {table}.{name}")
            elif now.type != column.type:
                found.append(f"changes the type of {table}.{name} ({column.type} -> {now.type})")
            elif column.nullable and not now.nullable:
                found.append(f"makes {table}.{name} NOT NULL")
        for name, column in new.columns.items():
            if name not in old.columns and not column.nullable and not column.has_default:
                found.append(f"adds {table}.{name} NOT NULL without a server default")
        found += [f"drops index {name} of {table}" for name in old.indexes.keys() - new.indexes]
        for columns, parent in new.foreign_keys - old.foreign_keys:
            found.append(f"adds a foreign key {table}({', '.join(columns)}) -> {parent}")
    return found


def unconcurrent_indexes(statements: list[str], before: dict[str, TableShape]) -> list[str]:
    """Indexes built on a table that existed before without CONCURRENTLY (PostgreSQL)."""
    found = []
    for statement in statements:
        match = UNCONCURRENT_INDEX.match(statement)
        if match and match.group(1) in before:
            found.append(
                f"builds an index on {match.group(1)} without CONCURRENTLY, which blocks its "
                "writes while it builds: create it with postgresql_concurrently=True inside "
                "`with op.get_context().autocommit_block():`"
            )
    return found


def declaration_problems(script: Script, previous: str | None, contracts: list[str]) -> list[str]:
    """What is wrong with the migration, given what it takes away (`contracts`) and the
    previous migration's `serves_code_from`."""
    declared = getattr(script.module, SERVES_CODE_FROM, None)
    keep = previous or script.revision
    if declared is None:
        return [
            *contracts,
            f"does not say which code serves on the schema it leaves: add "
            f"`{SERVES_CODE_FROM} = {keep!r}` under down_revision if it only adds (code from "
            f"{keep} on still serves), or a newer revision if it drops or renames what that "
            "code reads",
        ]
    known = known_revisions()
    if declared not in known or known.index(declared) > known.index(script.revision):
        return [f"{SERVES_CODE_FROM} = {declared!r} is not this migration or an earlier one"]
    if previous is not None and known.index(declared) < known.index(previous):
        return [
            f"{SERVES_CODE_FROM} = {declared!r} is older than the previous migration's "
            f"{previous!r}: code the schema stopped serving cannot serve on it again"
        ]
    if previous is None or declared == previous:
        if not contracts:
            return []
        return [
            *contracts,
            f"keeps code from {keep} on serving ({SERVES_CODE_FROM} = {declared!r}) while it "
            "takes away what that code may read: leave that to a later release, or make this "
            f"a contract migration ({SERVES_CODE_FROM} = the oldest revision whose code no "
            "longer reads it, and a line starting 'Contract:' in its docstring)",
        ]
    if "Contract:" not in (script.module.__doc__ or ""):
        return [
            f"raises {SERVES_CODE_FROM} from {previous!r} to {declared!r} without saying why: "
            "add a line starting 'Contract:' to its docstring naming what it drops or renames "
            "and since which release nothing reads it"
        ]
    return []  # a contract migration, said so: code before `declared` no longer serves


@pytest.mark.parametrize("backend", BACKENDS)
async def test_each_migration_keeps_the_release_before_it_serving(
    backend: str, tmp_path: Path
) -> None:
    scripts = ruled_scripts()
    statements: list[str] = []

    def sent(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    with empty_database(backend, tmp_path) as url:
        engine = create_engine(url)
        event.listen(engine.sync_engine, "before_cursor_execute", sent)
        try:
            await migrate(engine, scripts[0].down_revision)  # type: ignore[arg-type]
            problems, previous = [], None
            for script in scripts:
                async with engine.connect() as conn:
                    before = await conn.run_sync(shape_of)
                statements.clear()
                await migrate(engine, script.revision)
                async with engine.connect() as conn:
                    after = await conn.run_sync(shape_of)
                    recorded = (
                        await conn.execute(
                            select(schema_compatibility.c.serves_code_from).where(
                                schema_compatibility.c.revision == script.revision
                            )
                        )
                    ).scalar()
                found = declaration_problems(script, previous, contractions(before, after))
                if backend == "postgres":
                    found += unconcurrent_indexes(statements, before)
                problems += [f"{Path(script.path).name} {problem}" for problem in found]
                # What env.py records; a migration that does not say is served by no older code.
                declared = getattr(script.module, SERVES_CODE_FROM, script.revision)
                assert recorded == declared, f"{script.revision} recorded {recorded!r}"
                previous = getattr(script.module, SERVES_CODE_FROM, previous or script.revision)
        finally:
            await engine.dispose()
    assert not problems, ";\n".join(problems) + f".\n{ADVICE}"
