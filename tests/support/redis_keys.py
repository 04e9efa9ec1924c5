"""Removing a test's keys from a Redis it shares (SCAN + DEL by prefix, never FLUSHDB)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.support.databases import fresh_database

REDIS_URL = "redis://127.0.0.1:6379/0"


def delete_keys(url: str, prefix: str) -> None:
    """Delete every key under `prefix`; a Redis that is already gone is left alone."""
    try:
        with redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2) as client:
            batch = list(client.scan_iter(match=f"{prefix}*", count=500))
            for start in range(0, len(batch), 500):
                client.delete(*batch[start : start + 500])
    except (redis.RedisError, OSError):
        pass  # a throwaway Redis that is already gone


@contextmanager
def postgres_and_redis(name: str, redis_url: str = REDIS_URL) -> Iterator[dict[str, str]]:
    """The settings of a deployment on a fresh PostgreSQL database (a copy of the migrated
    template) and a Redis key prefix of its own (`DATABASE_URL`, `REDIS_URL`,
    `RUNYARD_REDIS_PREFIX`); both removed on exit."""
    with fresh_database(name, migrated=True) as url:
        prefix = f"runyard-test-{uuid.uuid4().hex[:8]}:"
        try:
            yield {"DATABASE_URL": url, "REDIS_URL": redis_url, "RUNYARD_REDIS_PREFIX": prefix}
        finally:
            delete_keys(redis_url, prefix)
