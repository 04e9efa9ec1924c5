"""Removing a test's keys from a Redis it shares (SCAN + DEL by prefix, never FLUSHDB)."""

from __future__ import annotations

import redis


def delete_keys(url: str, prefix: str) -> None:
    """Delete every key under `prefix`; a Redis that is already gone is left alone."""
    try:
        with redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2) as client:
            batch = list(client.scan_iter(match=f"{prefix}*", count=500))
            for start in range(0, len(batch), 500):
                client.delete(*batch[start : start + 500])
    except (redis.RedisError, OSError):
        pass  # a throwaway Redis that is already gone
