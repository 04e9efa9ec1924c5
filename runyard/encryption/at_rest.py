"""What the settings ask to encrypt at rest, built once at start-up and passed to the parts
that store data: the engine (JSON keys), the checkpoint savers (blobs, metadata), the store."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from runyard.domain.errors import DecryptionError
from runyard.encryption.json_keys import JsonKeyCipher, stays_plain
from runyard.encryption.keys import KeyRing

log = logging.getLogger("runyard.encryption")

# The cipher name checkpoint blobs carry in their type (`msgpack+aes-gcm`), as LangGraph's
# EncryptedSerializer writes it. LangGraph's server writes `+aes` (AES-EAX, pycryptodome).
CIPHER_NAME = "aes-gcm"


class BlobCipher(CipherProtocol):
    """LangGraph's cipher protocol over the key ring, for EncryptedSerializer."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        """`plaintext` under the current key."""
        return CIPHER_NAME, self.ring.encrypt(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        """The plaintext of a blob; DecryptionError when no configured key opens it."""
        if ciphername != CIPHER_NAME:
            raise DecryptionError(
                f"a checkpoint value was encrypted with cipher {ciphername!r}, which Runyard "
                f"does not read (it writes {CIPHER_NAME!r})"
            )
        return self.ring.decrypt(ciphertext, "a checkpoint value")


@dataclass(frozen=True)
class AtRest:
    """The key ring, and the JSON keys whose values are encrypted (none: blobs only)."""

    ring: KeyRing
    json: JsonKeyCipher

    def serde(self) -> SerializerProtocol:
        """The checkpoint serializer: LangGraph's default, its bytes encrypted. Blobs
        written in plain text before encryption was turned on still read."""
        return EncryptedSerializer(BlobCipher(self.ring), JsonPlusSerializer())

    def blob_is_current(self, kind: str, blob: bytes) -> bool:
        """Whether a stored blob of type `kind` is encrypted under the current key."""
        return kind.endswith("+" + CIPHER_NAME) and self.ring.is_current(blob)


def at_rest(
    key: bytes | None,
    previous: Sequence[bytes],
    json_keys: Sequence[str],
    dumps: Callable[[Any], str],
    loads: Callable[[str | bytes], Any],
) -> AtRest | None:
    """The encryption the settings ask for, or None (nothing is encrypted, nothing costs)."""
    if key is None:
        return None
    skipped = sorted({key for key in json_keys if stays_plain(key)})
    if skipped:
        log.warning("aes_json_keys_skipped keys=%s reason=system_fields", ",".join(skipped))
    ring = KeyRing(key, previous)
    log.info(
        "encryption_at_rest key_id=%s decrypt_key_ids=%s json_keys=%s",
        ring.current_hex,
        ",".join(ring.known_hex()),
        ",".join(sorted({key for key in json_keys if not stays_plain(key)})),
    )
    return AtRest(ring, JsonKeyCipher(ring, json_keys, dumps, loads))


def from_settings(
    key: str | None, previous: Sequence[bytes], json_keys: Sequence[str]
) -> AtRest | None:
    """`at_rest` with the JSON functions of Runyard's engine."""
    from runyard.db.engine import json_dumps, json_loads

    return at_rest(key.encode() if key else None, previous, json_keys, json_dumps, json_loads)
