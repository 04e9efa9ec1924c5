"""The fairness group RUNYARD_FAIRNESS_KEY gives a run when no priority.path is set."""

from __future__ import annotations

import pytest

from runyard.domain.configurable import AUTH_USER_ID_KEY
from runyard.domain.errors import ConfigError, InvalidInputError
from runyard.services.run_priority import keyed_group, require_trusted_fairness_key


def test_the_run_metadata_names_the_group_before_the_thread_metadata() -> None:
    assert keyed_group("org_id", {"org_id": "acme"}, {"org_id": "other"}, {}) == "acme"
    assert keyed_group("org_id", {}, {"org_id": 42}, {}) == "42"


def test_without_the_key_the_identity_then_default() -> None:
    assert keyed_group("org_id", {}, {}, {AUTH_USER_ID_KEY: "user-a"}) == "user-a"
    assert keyed_group("org_id", {"org_id": ""}, {}, {}) == "default"


def test_a_group_over_256_characters_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidInputError, match=r"metadata\.org_id"):
        keyed_group("org_id", {"org_id": "x" * 257}, {}, {})


def test_the_auth_user_key_reads_the_identity_never_the_metadata() -> None:
    key = AUTH_USER_ID_KEY
    forged = {key: "user-b"}
    assert keyed_group(key, forged, forged, {key: "user-a"}) == "user-a"
    assert keyed_group(key, forged, {}, {}) == "default"


def test_a_metadata_key_is_refused_with_auth_and_allowed_without() -> None:
    with pytest.raises(ConfigError, match="RUNYARD_FAIRNESS_KEY=org_id names a run metadata"):
        require_trusted_fairness_key("org_id", auth_configured=True)
    require_trusted_fairness_key("org_id", auth_configured=False)
    require_trusted_fairness_key(AUTH_USER_ID_KEY, auth_configured=True)
    require_trusted_fairness_key(None, auth_configured=True)
