"""The key ring and the JSON keys' cipher (runyard/encryption/): what is encrypted, what a
wrong key or altered data answers."""

from __future__ import annotations

import pytest

from runyard.db.engine import json_dumps, json_loads
from runyard.domain.errors import DecryptionError
from runyard.encryption.json_keys import JsonKeyCipher
from runyard.encryption.keys import KeyRing, key_id

OLD, NEW = b"o" * 16, b"n" * 32


def cipher(ring: KeyRing, *keys: str) -> JsonKeyCipher:
    return JsonKeyCipher(ring, keys, json_dumps, json_loads)


def test_configured_keys_are_encrypted_at_any_depth_and_read_back() -> None:
    json = cipher(KeyRing(NEW), "api_key", "thread_id")
    document = {"api_key": "s3cret", "note": "plain", "deep": [{"api_key": {"x": 1}}], "n": None}
    text = json.dumps(document)
    assert "s3cret" not in text and '"x"' not in text and "plain" in text
    assert json.loads(text) == document
    # System fields stay plain even when listed.
    assert json.dumps({"thread_id": "t-1"}) == '{"thread_id":"t-1"}'
    # A document without a configured key is not walked: the same text as orjson's.
    assert json.dumps({"a": 1}) == json_dumps({"a": 1})


def test_langgraph_fields_stay_plain_even_when_listed() -> None:
    # The server sets and reads them (who a run acts for): never ciphertext.
    json = cipher(KeyRing(NEW), "langgraph_auth_user_id", "langgraph_auth_user", "api_key")
    document = {"langgraph_auth_user_id": "user-a", "langgraph_auth_user": {"identity": "a"}}
    assert json.loads(json.dumps(document)) == document
    assert "user-a" in json.dumps(document) and '"identity":"a"' in json.dumps(document)


def test_a_ciphertext_moved_under_another_key_does_not_decrypt() -> None:
    json = cipher(KeyRing(NEW), "api_key", "other")
    sealed = json.encrypt({"api_key": "s3cret"})["api_key"]
    with pytest.raises(DecryptionError, match="authentication failed"):
        json.decrypt({"other": sealed})


def test_an_unknown_key_id_names_the_key_and_the_setting() -> None:
    written = cipher(KeyRing(OLD), "api_key").dumps({"api_key": "s3cret"})
    with pytest.raises(DecryptionError) as raised:
        cipher(KeyRing(NEW), "api_key").loads(written)
    message = raised.value.message
    assert "'api_key'" in message and key_id(OLD).hex() in message
    assert "RUNYARD_AES_DECRYPT_KEYS" in message


def test_altered_ciphertext_fails_authentication() -> None:
    ring = KeyRing(NEW)
    blob = bytearray(ring.encrypt(b"hello"))
    blob[-1] ^= 1
    with pytest.raises(DecryptionError, match="altered"):
        ring.decrypt(bytes(blob), "the test value")


def test_old_keys_decrypt_and_stale_values_are_found() -> None:
    old = cipher(KeyRing(OLD), "api_key")
    both = cipher(KeyRing(NEW, [OLD]), "api_key")
    document = old.encrypt({"api_key": "s3cret", "list": [1]})
    assert both.decrypt(document) == {"api_key": "s3cret", "list": [1]}
    assert both.stale(document) and not old.stale(document)
    assert both.stale({"api_key": "plain"})
    assert not both.stale(both.reencrypt(document))
    assert both.encrypted_keys_in({"$or": [{"api_key": 1}, {"x": {"api_key": 2}}]}) == ["api_key"]


def test_client_text_that_looks_encrypted_reads_back_as_sent() -> None:
    json = cipher(KeyRing(NEW), "api_key")
    forged = "encrypted.aes-gcm:" + key_id(NEW).hex() + ":AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    document = {"api_key": forged, "note": forged}
    stored = json.dumps(document)
    assert json.loads(stored) == document
