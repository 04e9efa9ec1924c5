"""How CORS options come from CORS_ALLOW_ORIGINS and `http.cors` (Starlette's keywords)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runyard.api.cors import EXPOSED_HEADERS, allowed_origins, cors_options, private_network_allowed
from runyard.domain.errors import ConfigError
from runyard.settings import Settings


def test_defaults_are_langgraphs_every_origin_without_credentials() -> None:
    options = cors_options(None)
    assert options["allow_origins"] == ["*"]
    assert options["allow_methods"] == ["*"] and options["allow_headers"] == ["*"]
    assert set(options["expose_headers"]) == set(EXPOSED_HEADERS)
    assert options["allow_credentials"] is False


def test_the_environment_lists_origins_that_may_send_credentials() -> None:
    settings = Settings(CORS_ALLOW_ORIGINS=" https://a.example , https://b.example,")
    assert allowed_origins(settings) == ["https://a.example", "https://b.example"]
    options = cors_options(allowed_origins(settings))
    assert options["allow_origins"] == ["https://a.example", "https://b.example"]
    assert options["allow_credentials"] is True
    assert allowed_origins(Settings(CORS_ALLOW_ORIGINS="")) is None


def test_http_cors_overrides_key_by_key() -> None:
    http = {"cors": {"allow_origins": ["https://c.example"], "max_age": 30}}
    options = cors_options(["https://a.example"], False, http)
    assert options["allow_origins"] == ["https://c.example"]
    assert options["max_age"] == 30
    assert options["allow_methods"] == ["*"]


def test_a_regex_alone_restricts_origins_unless_the_environment_lists_some() -> None:
    http = {"cors": {"allow_origin_regex": r"https://.*\.example"}}
    assert cors_options(None, False, http)["allow_origins"] == []
    assert cors_options(["https://x.test"], False, http)["allow_origins"] == ["https://x.test"]


def test_private_network_follows_dev_mode_unless_set() -> None:
    """`runyard dev` alone allows it by default: `serve` on the embedded store is production."""
    assert private_network_allowed(Settings(DATABASE_URL="").enable_dev_mode()) is True
    assert private_network_allowed(Settings(DATABASE_URL="")) is False
    production = Settings(DATABASE_URL="postgresql://u@h/db")
    assert private_network_allowed(production) is False
    dev = Settings(ALLOW_PRIVATE_NETWORK="false").enable_dev_mode()
    assert private_network_allowed(dev) is False


@pytest.mark.parametrize(
    ("cors", "message"),
    [
        ("*", "http.cors must be an object"),
        ({"origins": ["*"]}, "http.cors.origins is not supported by Runyard"),
        ({"allow_origins": "https://a.example"}, "http.cors.allow_origins must be a list"),
        ({"allow_credentials": "yes"}, "http.cors.allow_credentials must be a boolean"),
        ({"max_age": True}, "http.cors.max_age must be an integer"),
    ],
)
def test_bad_sections_name_the_file_and_key(cors: object, message: str) -> None:
    with pytest.raises(ConfigError) as failed:
        cors_options(None, False, {"cors": cors}, Path("/srv/langgraph.json"))
    assert "/srv/langgraph.json: " in str(failed.value)
    assert message in str(failed.value)
