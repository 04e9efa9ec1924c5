"""`runyard reencrypt`: every stored ciphertext moved under the current key, in batches.

Safe while servers run: each row is rewritten by one statement conditional on the row still
holding what was read, so a row a server changed meanwhile is left to the next pass (the
server wrote it under the current key anyway, once it runs with that key). Resumable: a
row already under the current key is skipped without decrypting it, so a run that was
killed, started again, quickly walks past what the first one finished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from runyard.db import reencryption as sql
from runyard.db.engine import create_engine, json_dumps, json_loads
from runyard.domain.errors import DecryptionError
from runyard.encryption.at_rest import CIPHER_NAME, AtRest

log = logging.getLogger("runyard.reencrypt")
PASSES = 5


@dataclass
class Tally:
    """What a re-encryption did."""

    rows: int = 0
    rewritten: int = 0
    changed_meanwhile: int = 0
    by_table: dict[str, int] = field(default_factory=dict)


class Reencryption:
    """Moves the ciphertexts of one deployment's databases under the current key."""

    def __init__(
        self,
        at_rest: AtRest,
        database_url: str,
        data_dir: Path,
        batch_size: int = 500,
        pause: float = 0.0,
        report: Callable[[str], None] = print,
    ) -> None:
        self.at_rest = at_rest
        self.database_url = database_url
        self.data_dir = data_dir
        self.batch_size = batch_size
        self.pause = pause
        self.report = report

    async def run(self) -> Tally:
        """Every pass until one finds no row changed meanwhile (at most PASSES)."""
        engines = self._engines()
        try:
            tally = Tally()
            for number in range(1, PASSES + 1):
                tally = Tally()
                for target in self._targets():
                    await self._table(engines[target.database], target, tally)
                self.report(
                    f"reencrypt_pass pass={number} rows={tally.rows} "
                    f"rewritten={tally.rewritten} changed_meanwhile={tally.changed_meanwhile}"
                )
                if not tally.changed_meanwhile:
                    break
            return tally
        finally:
            for engine in engines.values():
                await engine.dispose()

    def _postgres(self) -> bool:
        return self.database_url.startswith("postgresql")

    def _targets(self) -> list[sql.Target]:
        return sql.POSTGRES_TARGETS if self._postgres() else sql.SQLITE_TARGETS

    def _engines(self) -> dict[str, AsyncEngine]:
        if self._postgres():
            return {"runyard": create_engine(self.database_url, pool_size=1)}
        runyard = self.database_url.split(":///", 1)[1]
        files = {
            "runyard": Path(runyard),
            "checkpoints": self.data_dir / "checkpoints.sqlite",
            "store": self.data_dir / "store.sqlite",
        }
        return {
            name: create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 30})
            for name, path in files.items()
            if path.exists()
        }

    async def _table(self, engine: AsyncEngine | None, target: sql.Target, tally: Tally) -> None:
        if engine is None:
            return
        dialect = engine.dialect.name
        async with engine.connect() as session:
            if not await sql.table_exists(session, dialect, target.table):
                return
        after: tuple[Any, ...] | None = None
        while True:
            # One transaction per batch: its conditional updates lock only their rows.
            async with engine.begin() as session:
                rows = await sql.read_batch(session, dialect, target, after, self.batch_size)
                for row in rows:
                    tally.rows += 1
                    new = self._renewed(target, row)
                    if not new:
                        continue
                    if await sql.replace_if_unchanged(session, dialect, target, row, new):
                        tally.rewritten += 1
                        tally.by_table[target.table] = tally.by_table.get(target.table, 0) + 1
                    else:
                        tally.changed_meanwhile += 1
            if rows:
                after = tuple(rows[-1][key] for key in target.keys)
                self.report(
                    f"reencrypt_batch table={target.table} rows={len(rows)} "
                    f"rewritten={tally.by_table.get(target.table, 0)}"
                )
            if len(rows) < self.batch_size:
                return
            if self.pause:
                await asyncio.sleep(self.pause)

    def _renewed(self, target: sql.Target, row: dict[str, Any]) -> dict[str, Any]:
        """The columns of `row` to rewrite (none when all is under the current key)."""
        where = f"{target.table} {dict((k, row[k]) for k in target.keys)}"
        try:
            if target.kind == "blob":
                return self._renewed_blob(target, row, where)
            return self._renewed_json(target, row)
        except DecryptionError as exc:
            raise DecryptionError(f"{where}: {exc.message}") from None

    def _renewed_json(self, target: sql.Target, row: dict[str, Any]) -> dict[str, Any]:
        cipher = self.at_rest.json
        new: dict[str, Any] = {}
        for column in target.columns:
            raw = row[column]
            if raw is None:
                continue
            document = json_loads(raw)
            if cipher.stale(document):
                renewed = json_dumps(cipher.reencrypt(document))
                new[column] = renewed.encode() if isinstance(raw, bytes) else renewed
        return new

    def _renewed_blob(self, target: sql.Target, row: dict[str, Any], where: str) -> dict[str, Any]:
        kind_column, blob_column = target.columns
        kind, blob = row[kind_column], row[blob_column]
        if blob is None or kind == "empty" or self.at_rest.blob_is_current(kind, blob):
            return {}
        ring = self.at_rest.ring
        if "+" in kind:
            kind, cipher_name = kind.split("+", 1)
            if cipher_name != CIPHER_NAME:
                raise DecryptionError(f"cipher {cipher_name!r} is not one Runyard reads")
            blob = ring.decrypt(blob, "the stored value")
        return {kind_column: f"{kind}+{CIPHER_NAME}", blob_column: ring.encrypt(bytes(blob))}
