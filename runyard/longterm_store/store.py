"""LangGraph's long-term store per backend: PostgreSQL (opened on first use) or a SQLite file."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.store.base import BaseStore, TTLConfig

from runyard.db.conninfo import libpq_url
from runyard.domain.errors import ConfigError
from runyard.longterm_store.pg_store import DeferredPostgresStore
from runyard.loops import every
from runyard.project.config import ProjectConfig
from runyard.project.modules import import_attribute

if TYPE_CHECKING:
    from runyard.db.driver import StatementPool
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.store")

DEFAULT_SWEEP_MINUTES = 5.0
INDEX_EXAMPLE = (
    '{"store": {"index": {"embed": "./embeddings.py:embed", "dims": 1536, "fields": ["$"]}}}'
)


@dataclass(frozen=True)
class StoreOptions:
    """What `langgraph.json` asks of the store: semantic index and TTL behaviour."""

    index: dict[str, Any] | None
    ttl: TTLConfig
    sweep_interval_seconds: float

    @property
    def semantic(self) -> bool:
        """True when an embedding function is configured (search accepts `query`)."""
        return self.index is not None


def store_options(project: ProjectConfig) -> StoreOptions:
    """Read the `store` section of the project config; errors name the key."""
    raw = project.store or {}
    where = f"{project.path or 'config'}: store"
    if raw.get("path"):
        raise ConfigError(
            f"{where}.path (a custom store) is not supported; remove it to use Runyard's "
            "PostgreSQL / SQLite store"
        )
    ttl_raw = raw.get("ttl") or {}
    if not isinstance(ttl_raw, dict):
        raise ConfigError(f"{where}.ttl must be an object")
    sweep = ttl_raw.get("sweep_interval_minutes")
    sweep_minutes = DEFAULT_SWEEP_MINUTES if sweep is None else _positive(where, "sweep", sweep)
    default_ttl = ttl_raw.get("default_ttl")
    ttl: TTLConfig = {
        "refresh_on_read": bool(ttl_raw.get("refresh_on_read", True)),
        # PostgreSQL hides expired items at once; SQLite drops them at the next sweep.
        "omit_expired": True,
        "default_ttl": None if default_ttl is None else _positive(where, "default", default_ttl),
    }
    base = project.path.parent if project.path else Path.cwd()
    index = _index(where, base, raw.get("index"))
    return StoreOptions(index=index, ttl=ttl, sweep_interval_seconds=sweep_minutes * 60)


def _positive(where: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        key = "sweep_interval_minutes" if name == "sweep" else "default_ttl"
        raise ConfigError(f"{where}.ttl.{key} must be a positive number of minutes")
    return float(value)


def _index(where: str, base: Path, raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or "embed" not in raw or "dims" not in raw:
        raise ConfigError(f"{where}.index needs 'embed' and 'dims', e.g. {INDEX_EXAMPLE}")
    dims = raw["dims"]
    if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
        raise ConfigError(f"{where}.index.dims must be a positive integer")
    fields = raw.get("fields")
    if fields is not None and (
        not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)
    ):
        raise ConfigError(f"{where}.index.fields must be a list of JSON paths such as ['$']")
    return {
        "dims": dims,
        "embed": _load_embed(where, base, raw["embed"]),
        **({"fields": fields} if fields is not None else {}),
    }


def _load_embed(where: str, base: Path, spec: Any) -> Any:
    """An embedding function from `path/to/file.py:name`, or a `provider:model` string."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"{where}.index.embed must be 'path/to/file.py:function' or 'provider:model'"
        )
    file_part, attribute = spec.rsplit(":", 1)
    if not file_part.endswith(".py"):
        return spec  # `provider:model`: LangGraph resolves it through langchain
    path = (base / file_part).resolve()
    return import_attribute(path, attribute, "runyard_embed", f"{where}.index.embed")


@asynccontextmanager
async def open_store(
    database_url: str,
    data_dir: Path,
    options: StoreOptions,
    pool_size: int = 10,
    statements: StatementPool | None = None,
    at_rest: AtRest | None = None,
    encryption: CustomEncryption | None = None,
) -> AsyncIterator[BaseStore]:
    """The store matching the database, ready for use (values' configured JSON keys
    encrypted when `at_rest` says so, or every value through `encryption`'s JSON handlers).

    On PostgreSQL its pool (at most `pool_size` connections) and tables are made on the first
    store operation, or at once when a semantic index is configured, so that a server lacking
    pgvector stops at start-up. Given Runyard's statement pool, TTL sweeps go through it.
    On SQLite the store is opened and set up at once.
    """
    async with _plain_store(database_url, data_dir, options, pool_size, statements) as store:
        if encryption is not None and encryption.json_encryptor is not None:
            from runyard.longterm_store.encrypted_store import CustomEncryptedStore

            yield CustomEncryptedStore(store, encryption)
        elif at_rest is None:
            yield store
        else:
            from runyard.longterm_store.encrypted_store import EncryptedStore

            yield EncryptedStore(store, at_rest.json)


@asynccontextmanager
async def _plain_store(
    database_url: str,
    data_dir: Path,
    options: StoreOptions,
    pool_size: int,
    statements: StatementPool | None,
) -> AsyncIterator[BaseStore]:
    if database_url.startswith("postgresql"):
        conninfo = libpq_url(database_url)
        pg_store = DeferredPostgresStore(
            conninfo, options.index, options.ttl, pool_size, statements
        )
        try:
            if options.index is not None:
                await pg_store.open()
            yield pg_store
        finally:
            await pg_store.close()
    else:
        async with _sqlite_store(data_dir, options) as sqlite_store:
            yield sqlite_store


@asynccontextmanager
async def _sqlite_store(data_dir: Path, options: StoreOptions) -> AsyncIterator[BaseStore]:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    from runyard.db.sqlite_checkpoints import open_sqlite
    from runyard.longterm_store.cosine_store import CosineSqliteStore

    reason = vector_extension_missing() if options.index is not None else None
    data_dir.mkdir(parents=True, exist_ok=True)
    # A file of its own: the store's connection serializes its writes behind one lock.
    conn = await open_sqlite(data_dir / "store.sqlite", isolation_level=None)
    try:
        store: AsyncSqliteStore | CosineSqliteStore
        if reason is not None and options.index is not None:
            # Same results as LangGraph's in-memory store, computed over the stored vectors.
            log.info("store_exact_cosine_search reason=%s", reason)
            store = CosineSqliteStore(AsyncSqliteStore(conn, ttl=options.ttl), options.index)
        else:
            store = AsyncSqliteStore(
                conn,
                index=options.index,  # type: ignore[arg-type]
                ttl=options.ttl,
            )
        await store.setup()
        yield store
    finally:
        await conn.close()


def vector_extension_missing() -> str | None:
    """Why sqlite-vec cannot be used by this Python's sqlite3, or None when it loads."""
    import sqlite3

    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        return "this_python_sqlite3_cannot_load_extensions"
    try:
        import sqlite_vec

        probe = sqlite3.connect(":memory:")
        try:
            probe.enable_load_extension(True)
            sqlite_vec.load(probe)
        finally:
            probe.close()
    except Exception as exc:
        return f"sqlite_vec_not_loadable:{type(exc).__name__}"
    return None


class TtlSweeper:
    """Deletes expired store items every sweep interval (every instance; DELETE is idempotent)."""

    def __init__(self, store: BaseStore, interval_seconds: float) -> None:
        self._store = store
        self._interval = interval_seconds

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Sweep until `stop` is set; a failed sweep is logged and retried next time."""
        # Both LangGraph stores built here have sweep_ttl; BaseStore does not declare it.
        sweep: Any = getattr(self._store, "sweep_ttl")  # noqa: B009

        async def step() -> None:
            swept = await sweep()
            if swept:
                log.info("store_items_expired count=%s", swept)

        await every(self._interval, stop, step, log, "store_sweep_failed")
