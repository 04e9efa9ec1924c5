"""Semantic search in the dev-mode store without sqlite-vec: exact cosine ranking over the
stored vectors, as LangGraph's InMemoryStore ranks (max over an item's fields, items without
a vector filling the page after the ranked ones).

Items live in langgraph's AsyncSqliteStore (without an index); their vectors in a table
beside it (db/store_vectors.py), written under the store's lock on the store's connection.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import (
    BaseStore,
    Item,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path
from langgraph.store.sqlite.aio import AsyncSqliteStore

from runyard.db.store_vectors import (
    create_vector_table,
    delete_orphan_vectors,
    replace_vectors,
    vectors_under,
)

# Candidates a ranked search reads at most: every item under the prefix that matches the filter.
MAX_CANDIDATES = 100_000


class CosineSqliteStore(BaseStore):
    """AsyncSqliteStore plus semantic search computed in Python."""

    supports_ttl = True

    def __init__(self, inner: AsyncSqliteStore, index: dict[str, Any]) -> None:
        self._inner = inner
        self._embeddings = ensure_embeddings(index.get("embed"))
        self._fields = [
            (path, tokenize_path(path) if path != "$" else path)
            for path in (index.get("fields") or ["$"])
        ]
        self._loop = asyncio.get_running_loop()

    async def setup(self) -> None:
        """Create the store's tables and the vectors table."""
        await self._inner.setup()
        async with self._inner.lock:
            await create_vector_table(self._inner.conn)

    async def sweep_ttl(self) -> int:
        """Delete expired items (and then their vectors)."""
        swept = await self._inner.sweep_ttl()
        async with self._inner.lock:
            await delete_orphan_vectors(self._inner.conn)
        return swept

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """`abatch` from a thread other than the event loop's (a sync graph node)."""
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Puts embed their fields; searches with a query rank by cosine similarity."""
        ops = list(ops)
        plain: list[Op] = []
        for op in ops:
            if isinstance(op, PutOp):
                await self._put_vectors(op)
                plain.append(op._replace(index=False))
            elif isinstance(op, SearchOp) and op.query:
                plain.append(op._replace(query=None, limit=MAX_CANDIDATES, offset=0))
            else:
                plain.append(op)
        results = await self._inner.abatch(plain)
        for position, op in enumerate(ops):
            if isinstance(op, SearchOp) and op.query:
                results[position] = await self._rank(op, results[position])  # type: ignore[arg-type]
        return results

    async def _put_vectors(self, op: PutOp) -> None:
        prefix = ".".join(op.namespace)
        texts: list[tuple[str, str]] = []
        if op.value is not None and op.index is not False:
            paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            for path, field in paths:
                found = get_text_at_path(op.value, field)
                if len(found) > 1:
                    texts.extend((f"{path}.{i}", text) for i, text in enumerate(found))
                elif found:
                    texts.append((path, found[0]))
        vectors = await self._embeddings.aembed_documents([t for _, t in texts]) if texts else []
        async with self._inner.lock:
            await replace_vectors(
                self._inner.conn,
                prefix,
                op.key,
                [(field, vector) for (field, _), vector in zip(texts, vectors, strict=True)],
            )

    async def _rank(self, op: SearchOp, candidates: list[SearchItem]) -> list[SearchItem]:
        assert op.query is not None
        query = await self._embeddings.aembed_query(op.query)
        async with self._inner.lock:
            vectors = await vectors_under(self._inner.conn, ".".join(op.namespace_prefix))
        scored: list[tuple[float, SearchItem]] = []
        scoreless: list[SearchItem] = []
        for item in candidates:
            item_vectors = vectors.get((".".join(item.namespace), item.key))
            if not item_vectors:
                scoreless.append(item)
                continue
            scored.append((max(cosine(query, vector) for vector in item_vectors), item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        kept = [
            _with_score(item, score) for score, item in scored[op.offset : op.offset + op.limit]
        ]
        if scoreless and len(kept) < op.limit:
            kept.extend(scoreless[: op.limit - len(kept)])
        return kept


def cosine(x: Sequence[float], y: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is zero (as LangGraph's in-memory store)."""
    dot = math.fsum(a * b for a, b in zip(x, y, strict=False))
    norm_x = math.sqrt(math.fsum(a * a for a in x))
    norm_y = math.sqrt(math.fsum(b * b for b in y))
    return dot / (norm_x * norm_y) if norm_x > 0 and norm_y > 0 else 0.0


def _with_score(item: Item | SearchItem, score: float) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=float(score),
    )
