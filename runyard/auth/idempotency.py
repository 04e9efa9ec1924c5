"""Idempotency keys belong to their caller, as Stripe's belong to an account.

With auth configured, a key is stored under its scope: the filter the `create_run` handler
returned (the users it lets see one another's runs share their keys, as an account's API
keys do), else the authenticated identity. Another scope's identical key is another key: a
new, independent request, whose answer says nothing of the first. Without auth every caller
is one anonymous user, so the whole server is one scope and a key is stored as it is sent.
"""

from __future__ import annotations

import hashlib
import json

from runyard.auth.handlers import Caller, Filter

# The stored form of a scoped key: the prefix, then the SHA-256 of the scope and the key.
SCOPED_PREFIX = "caller:"


def stored_idempotency_key(
    caller: Caller, run_filter: Filter | None, key: str | None
) -> str | None:
    """The form `key` is stored and looked up in, for this caller (see the module)."""
    if not key or caller.auth is None or caller.user is None:
        return key
    scope = ["filter", run_filter] if run_filter else ["user", caller.user.identity]
    canonical = json.dumps([scope, key], sort_keys=True, ensure_ascii=False, default=str)
    return SCOPED_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()
