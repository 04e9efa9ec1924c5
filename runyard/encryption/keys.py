"""AES-GCM under a ring of keys: one encrypts, every one decrypts, each ciphertext names its key.

A ciphertext is `key id (8 bytes) | nonce (12 bytes) | ciphertext and tag`, the key id
authenticated as associated data. The key id is derived from the key (a SHA-256 of it
under a label), so it says which key to use without saying anything about the key, and
re-encryption can tell which rows still need it without decrypting them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runyard.domain.errors import DecryptionError

KEY_ID_BYTES = 8
NONCE_BYTES = 12


def key_id(key: bytes) -> bytes:
    """The id a ciphertext carries for `key`."""
    return hashlib.sha256(b"runyard aes key id\x00" + key).digest()[:KEY_ID_BYTES]


class KeyRing:
    """AES-GCM keys: `current` encrypts, it and `previous` decrypt."""

    def __init__(self, current: bytes, previous: Sequence[bytes] = ()) -> None:
        self.current_id = key_id(current)
        self._current = AESGCM(current)
        self._by_id = {key_id(key): AESGCM(key) for key in (*previous, current)}

    @property
    def current_hex(self) -> str:
        """The current key's id, as text."""
        return self.current_id.hex()

    def known_hex(self) -> list[str]:
        """Every configured key's id, as text."""
        return sorted(kid.hex() for kid in self._by_id)

    def encrypt(self, plaintext: bytes, context: bytes = b"") -> bytes:
        """`plaintext` under the current key; `context` must be given again to decrypt."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._current.encrypt(nonce, plaintext, self.current_id + context)
        return self.current_id + nonce + sealed

    def decrypt(self, blob: bytes, what: str, context: bytes = b"") -> bytes:
        """The plaintext of `blob`; DecryptionError naming `what` when no key opens it."""
        kid = bytes(blob[:KEY_ID_BYTES])
        aes = self._by_id.get(kid)
        if aes is None or len(blob) < KEY_ID_BYTES + NONCE_BYTES + 16:
            raise DecryptionError(
                f"{what} cannot be decrypted: it was encrypted under key id {kid.hex()}, "
                f"which is not configured (configured: {', '.join(self.known_hex())}); add "
                "that key to RUNYARD_AES_DECRYPT_KEYS"
            )
        nonce = blob[KEY_ID_BYTES : KEY_ID_BYTES + NONCE_BYTES]
        try:
            return aes.decrypt(nonce, bytes(blob[KEY_ID_BYTES + NONCE_BYTES :]), kid + context)
        except InvalidTag:
            raise DecryptionError(
                f"{what} cannot be decrypted under key id {kid.hex()}: authentication "
                "failed, so the stored data was altered or that key is not the one it was "
                "written with"
            ) from None

    def is_current(self, blob: bytes) -> bool:
        """Whether `blob` was encrypted under the current key."""
        return bytes(blob[:KEY_ID_BYTES]) == self.current_id
