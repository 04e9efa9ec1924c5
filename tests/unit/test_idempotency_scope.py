"""The form an Idempotency-Key is stored in: as sent without auth, scoped to its caller with."""

from __future__ import annotations

from runyard.auth.handlers import Caller
from runyard.auth.idempotency import SCOPED_PREFIX, stored_idempotency_key
from runyard.domain.user import AuthUser
from runyard.sdk_handlers import AuthHandlers

HANDLERS = AuthHandlers(authenticate=None, by_action={}, fallback=None)


def caller(identity: str) -> Caller:
    """An authenticated caller of a server with auth configured."""
    return Caller(AuthUser(identity=identity, display_name=identity), HANDLERS)


def test_without_auth_a_key_is_stored_as_sent() -> None:
    assert stored_idempotency_key(Caller(None, None), None, "order-42") == "order-42"
    assert stored_idempotency_key(Caller(None, None), None, None) is None


def test_with_auth_each_identity_has_keys_of_its_own() -> None:
    ann, bob = caller("ann"), caller("bob")
    mine = stored_idempotency_key(ann, None, "order-42")
    assert mine == stored_idempotency_key(ann, None, "order-42")
    assert mine != stored_idempotency_key(bob, None, "order-42")
    assert mine != stored_idempotency_key(ann, None, "order-43")
    assert mine is not None and mine.startswith(SCOPED_PREFIX) and "ann" not in mine


def test_with_a_filter_its_members_share_keys_and_the_longest_key_fits() -> None:
    org = {"org": "acme"}
    shared = stored_idempotency_key(caller("ann"), org, "k" * 255)
    assert shared == stored_idempotency_key(caller("amy"), {"org": "acme"}, "k" * 255)
    assert shared != stored_idempotency_key(caller("ann"), {"org": "other"}, "k" * 255)
    assert shared is not None and len(shared) <= 255
