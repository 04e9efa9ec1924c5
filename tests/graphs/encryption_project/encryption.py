"""Custom encryption written for LangGraph's server, using only `langgraph_sdk.Encryption`:
each tenant (the authenticated user) has a key of its own, named by a key id the context
handler derives; blobs and JSON values are Fernet tokens under that key."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from cryptography.fernet import Fernet
from langgraph_sdk import Encryption, EncryptionContext

encryption = Encryption()

# A key per key id, derived for the test; a deployment would ask its key store.
MASTER = b"test master secret, never a real one"
PREFIX = "enc:"


def fernet(key_id: str) -> Fernet:
    """The tenant key a key id names."""
    digest = hashlib.sha256(MASTER + key_id.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def key_id_of(ctx: EncryptionContext) -> str:
    return str(ctx.metadata.get("key_id") or "key-shared")


@encryption.context
async def tenant_context(user: Any, ctx: EncryptionContext) -> dict[str, Any]:
    """Every tenant's data is written under its own key id."""
    return {**ctx.metadata, "tenant_id": user.identity, "key_id": f"key-{user.identity}"}


@encryption.encrypt.blob
async def encrypt_blob(ctx: EncryptionContext, data: bytes) -> bytes:
    return fernet(key_id_of(ctx)).encrypt(data)


@encryption.decrypt.blob
async def decrypt_blob(ctx: EncryptionContext, data: bytes) -> bytes:
    return fernet(key_id_of(ctx)).decrypt(data)


@encryption.encrypt.json
async def encrypt_json(ctx: EncryptionContext, data: dict[str, Any]) -> dict[str, Any]:
    key = fernet(key_id_of(ctx))
    return {k: PREFIX + key.encrypt(json.dumps(v).encode()).decode() for k, v in data.items()}


@encryption.decrypt.json
async def decrypt_json(ctx: EncryptionContext, data: dict[str, Any]) -> dict[str, Any]:
    key = fernet(key_id_of(ctx))
    return {
        k: json.loads(key.decrypt(v[len(PREFIX) :].encode()))
        if isinstance(v, str) and v.startswith(PREFIX)
        else v
        for k, v in data.items()
    }


# A JSON encryptor that wraps the values in an envelope: it adds a key, which the server
# refuses (partial updates merge stored JSON key by key).
adds_a_key = Encryption()


@adds_a_key.encrypt.json
async def envelope(ctx: EncryptionContext, data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "__signature__": "sig"}


@adds_a_key.decrypt.json
async def open_envelope(ctx: EncryptionContext, data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "__signature__"}
