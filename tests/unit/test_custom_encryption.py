"""The handlers of a `langgraph_sdk.Encryption` object as Runyard calls them (encryption.path)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import DecryptResult, Encryption, EncryptionContext

from runyard.domain.encryption_context import CONTEXT_KEY, use_context
from runyard.domain.errors import ConfigError, DecryptionError
from runyard.encryption.custom import CustomEncryption, EncryptionHandlerError
from runyard.project.config import load_config
from runyard.project.encryption_loading import load_encryption

pytestmark = [
    pytest.mark.timeout(30),
    # The SDK warns that its Encryption API is in beta each time one is built.
    pytest.mark.filterwarnings("ignore::langgraph_sdk.encryption.LangGraphBetaWarning"),
]

seen: list[EncryptionContext] = []


def reversing() -> Encryption:
    """Blobs reversed, JSON values' text reversed: visible, reversible, keys kept."""
    encryption = Encryption()

    @encryption.encrypt.blob
    async def seal(ctx: EncryptionContext, data: bytes) -> bytes:
        seen.append(ctx)
        return data[::-1]

    @encryption.decrypt.blob
    async def unseal(ctx: EncryptionContext, data: bytes) -> bytes:
        seen.append(ctx)
        return data[::-1]

    @encryption.encrypt.json
    async def seal_json(ctx: EncryptionContext, data: dict[str, Any]) -> dict[str, Any]:
        seen.append(ctx)
        return {k: json.dumps(v)[::-1] for k, v in data.items()}

    @encryption.decrypt.json
    async def unseal_json(
        ctx: EncryptionContext, data: dict[str, Any]
    ) -> DecryptResult[dict[str, Any]]:
        seen.append(ctx)
        return DecryptResult({k: json.loads(v[::-1]) for k, v in data.items()})

    @encryption.context
    async def tenant(user: Any, ctx: EncryptionContext) -> dict[str, Any]:
        return {**ctx.metadata, "key_id": f"key-{user.identity}"}

    return encryption


@pytest.fixture
def custom() -> Iterator[CustomEncryption]:
    seen.clear()
    encryption = CustomEncryption(reversing(), "./encryption.py:encryption")
    encryption.handlers.start()
    try:
        yield encryption
    finally:
        encryption.handlers.stop()


def test_every_registered_handler_is_found() -> None:
    # The JSON handlers through the SDK's public getters, the blob and context handlers
    # through runyard.sdk_handlers (the SDK has no public getter for them).
    encryption = reversing()
    custom = CustomEncryption(encryption, "x.py:e")
    assert custom.describe() == (
        "blob_encryptor,blob_decryptor,json_encryptor,json_decryptor,context_handler"
    )
    assert custom.json_encryptor is encryption.get_json_encryptor()
    assert custom.json_decryptor is encryption.get_json_decryptor()


def test_json_values_are_encrypted_with_the_context_stored_beside_them(
    custom: CustomEncryption,
) -> None:
    async def scenario() -> None:
        use_context({"key_id": "key-a"})
        sealed = await custom.encrypt_json("thread", "metadata", {"secret": 1, "owner": "a"})
        assert sealed == {"secret": "1", "owner": "a", CONTEXT_KEY: {"key_id": "key-a"}}
        # Read by anyone, it is decrypted under the context it was written with.
        use_context({"key_id": "key-b"})
        assert await custom.decrypt_json("thread", "metadata", sealed) == {
            "secret": 1,
            "owner": "a",
        }
        # Plain JSON (written before encryption was on) reads as it is.
        assert await custom.decrypt_json("thread", "metadata", {"x": 1}) == {"x": 1}

    asyncio.run(scenario())
    assert [(c.model, c.field, c.metadata) for c in seen] == [
        ("thread", "metadata", {"key_id": "key-a"}),
        ("thread", "metadata", {"key_id": "key-a"}),
    ]


def test_a_json_encryptor_that_changes_the_keys_is_refused_by_name() -> None:
    encryption = Encryption()

    @encryption.encrypt.json
    async def envelope(ctx: EncryptionContext, data: dict[str, Any]) -> dict[str, Any]:
        return {"ciphertext": "..."}

    custom = CustomEncryption(encryption, "x.py:e")
    with pytest.raises(EncryptionHandlerError) as caught:
        asyncio.run(custom.encrypt_json("run", "metadata", {"a": 1}))
    assert "envelope" in caught.value.message
    assert "added: 'ciphertext'" in caught.value.message
    assert "removed: 'a'" in caught.value.message


def test_blobs_carry_their_context_and_decrypt_under_it(custom: CustomEncryption) -> None:
    serde = custom.serde()
    assert serde is not None
    use_context({"key_id": "key-a"})
    kind, blob = serde.dumps_typed({"messages": ["hello"]})
    assert kind.endswith("+custom")
    assert b"hello" not in blob and b'"key_id":"key-a"' in blob
    use_context({})
    assert serde.loads_typed((kind, blob)) == {"messages": ["hello"]}
    assert [c.metadata for c in seen] == [{"key_id": "key-a"}, {"key_id": "key-a"}]
    assert all(c.model == "checkpoint" for c in seen)
    # A blob altered at rest is a clear error, not garbage.
    with pytest.raises(DecryptionError):
        serde.loads_typed((kind, b"garbage"))


def test_the_context_handler_derives_the_tenant(custom: CustomEncryption) -> None:
    class User:
        identity = "user-a"

    derived = asyncio.run(custom.derive_context(User(), {"region": "eu"}))
    assert derived == {"region": "eu", "key_id": "key-user-a"}


def test_encryption_path_must_name_an_encryption_object(tmp_path: Path) -> None:
    (tmp_path / "graph.py").write_text("graph = None\n")
    (tmp_path / "enc.py").write_text("from langgraph_sdk import Auth\nencryption = Auth()\n")
    config = {"graphs": {"g": "./graph.py:graph"}, "encryption": {"path": "./enc.py:encryption"}}
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as caught:
        load_encryption(load_config(tmp_path / "langgraph.json"))
    assert "langgraph_sdk.Encryption" in caught.value.message


def test_a_webhook_payload_is_sent_decrypted(custom: CustomEncryption) -> None:
    async def scenario() -> dict[str, Any]:
        use_context({"key_id": "key-a"})
        metadata = await custom.encrypt_json("run", "metadata", {"secret": "s"})
        values = await custom.encrypt_json("thread", "values", {"messages": ["hi"]})
        stored = {"run_id": "r", "metadata": metadata, "values": values}
        return await custom.open_webhook_payload(stored)

    assert asyncio.run(scenario()) == {
        "run_id": "r",
        "metadata": {"secret": "s"},
        "values": {"messages": ["hi"]},
    }
    # Fields a payload does not carry (webhooks.allowed_fields) are not added.
    assert asyncio.run(custom.open_webhook_payload({"run_id": "r"})) == {"run_id": "r"}


def test_run_kwargs_are_encrypted_field_by_field_as_langgraph_does(
    custom: CustomEncryption,
) -> None:
    # The caller's data in a run's kwargs: input, config (its configurable and metadata on
    # their own), context and command, each with the (model, field) LangGraph's server uses.
    kwargs = {
        "input": {"messages": ["secret-input"]},
        "config": {
            "tags": ["secret-tag"],
            "recursion_limit": 7,
            "configurable": {
                "thread_id": "t-1",
                "checkpoint_ns": "",
                "langgraph_auth_user_id": "user-a",
                "api_key": "secret-conf",
            },
            "metadata": {"note": "secret-meta"},
        },
        "context": {"tenant_hint": "secret-ctx"},
        "command": {"resume": "secret-resume"},
        "stream_mode": ["values"],
        "graph_id": "agent",
        CONTEXT_KEY: {"key_id": "key-a"},
    }
    fields = ("input", "config", "context", "command")
    use_context({"key_id": "key-a"})
    stored = asyncio.run(custom.encrypt_fields("run", kwargs, fields))
    text = json.dumps(stored)
    assert "secret" not in text, text
    # What the server reads stays plain, and never reaches the encryptor.
    assert stored["stream_mode"] == ["values"] and stored["graph_id"] == "agent"
    assert stored["config"]["recursion_limit"] == 7
    configurable = stored["config"]["configurable"]
    assert configurable["thread_id"] == "t-1" and configurable["checkpoint_ns"] == ""
    assert configurable["langgraph_auth_user_id"] == "user-a"
    assert configurable[CONTEXT_KEY] == {"key_id": "key-a"}
    given = {(ctx.model, ctx.field) for ctx in seen}
    assert given == {
        ("run", "input"),
        ("run", "config"),
        ("run", "configurable"),
        ("run", "metadata"),
        ("run", "context"),
        ("run", "command"),
    }
    assert all(ctx.metadata == {"key_id": "key-a"} for ctx in seen)
    seen.clear()
    assert asyncio.run(custom.decrypt_fields("run", stored, fields)) == {
        **kwargs,
        "config": {**kwargs["config"]},
    }
    assert {ctx.field for ctx in seen} == {
        "input",
        "config",
        "configurable",
        "metadata",
        "context",
        "command",
    }
    # Sealing what is already sealed changes nothing (a cron's payload patched in part).
    assert asyncio.run(custom.encrypt_fields("run", stored, fields)) == stored


def test_a_run_input_that_is_not_an_object_is_a_422_naming_it(custom: CustomEncryption) -> None:
    from runyard.domain.errors import InvalidInputError

    with pytest.raises(InvalidInputError) as caught:
        asyncio.run(custom.encrypt_fields("run", {"input": ["a", "b"]}, ("input",)))
    assert "input must be a JSON object" in caught.value.message
    # Null stays null.
    assert asyncio.run(custom.encrypt_fields("run", {"input": None}, ("input",))) == {"input": None}
