"""LANGGRAPH_AES_JSON_KEYS: the values of configured keys, wherever they appear in stored JSON.

A key's value is replaced by `encrypted.aes-gcm:<key id>:<base64>`, the AES-GCM ciphertext
of its JSON text, with the key's name as associated data (a ciphertext moved under another
key does not decrypt). Keys stay in place, so PostgreSQL's key-wise merges (`||`) of a
metadata update keep working. Decryption looks at every string of that form, whether or not
its key is still configured, so taking a key off the list never strands its data; a
client's text of that form is itself encrypted when stored, so it reads back as sent.

This is the engine's JSON codec (runyard/db/engine.py): every JSON column of every table
goes through it, on the SQLAlchemy path and the statement pool alike.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from runyard.encryption.keys import KEY_ID_BYTES, KeyRing

PREFIX = "encrypted.aes-gcm:"
_PREFIX_BYTES = PREFIX.encode()
# Identifiers and execution settings the server itself reads (LangGraph's server never
# encrypts them either): configured, they are left in plain text.
SYSTEM_KEYS = frozenset(
    {
        "thread_id",
        "run_id",
        "assistant_id",
        "graph_id",
        "checkpoint_id",
        "checkpoint_ns",
        "task_id",
        "cron_id",
        "user_id",
        "owner",
        "source",
        "step",
        "parents",
        "recursion_limit",
        "max_concurrency",
        "temporary",
        "ttl",
    }
)
# LangGraph's own fields (`langgraph_auth_user_id`, `langgraph_version`, ...) are the
# server's too, whatever follows the prefix.
SYSTEM_PREFIX = "langgraph_"


def stays_plain(key: str) -> bool:
    """Whether `key`'s value is never encrypted: the server reads it (an id, the owner, an
    execution setting, a `langgraph_*` field). Both the AES JSON keys and the JSON handlers
    of `encryption.path` leave these keys alone."""
    return key in SYSTEM_KEYS or key.startswith(SYSTEM_PREFIX)


def is_encrypted(value: Any) -> bool:
    """Whether `value` is an encrypted JSON value."""
    return isinstance(value, str) and value.startswith(PREFIX)


def key_id_of(value: str) -> str:
    """The key id (text) an encrypted JSON value names."""
    return value[len(PREFIX) : len(PREFIX) + 2 * KEY_ID_BYTES]


class JsonKeyCipher:
    """Encrypts the configured keys' values in JSON documents and decrypts any it finds."""

    def __init__(
        self,
        ring: KeyRing,
        keys: Iterable[str],
        dumps: Callable[[Any], str],
        loads: Callable[[str | bytes], Any],
    ) -> None:
        self.ring = ring
        self.keys = frozenset(key for key in keys if not stays_plain(key))
        self._dumps = dumps
        self._loads = loads
        # How each key looks in JSON text: a document without any of them (and without text
        # that looks encrypted) is left alone.
        self._needles = [dumps(key) + ":" for key in self.keys] + ['"' + PREFIX]

    # --- one value ------------------------------------------------------------------------

    def encrypt_value(self, key: str, value: Any) -> str:
        """`value` encrypted under the current key, bound to `key`."""
        blob = self.ring.encrypt(orjson.dumps(value), key.encode())
        sealed = base64.b64encode(blob[KEY_ID_BYTES:]).decode("ascii")
        return f"{PREFIX}{blob[:KEY_ID_BYTES].hex()}:{sealed}"

    def decrypt_value(self, key: str, value: str) -> Any:
        """The value an encrypted JSON value holds."""
        head, _, sealed = value[len(PREFIX) :].partition(":")
        try:
            blob = bytes.fromhex(head) + base64.b64decode(sealed, validate=True)
        except ValueError:
            blob = b""
        what = f"the stored value of JSON key {key!r}" if key else "a stored JSON value"
        return orjson.loads(self.ring.decrypt(blob, what, key.encode()))

    # --- documents ------------------------------------------------------------------------

    def encrypt(self, document: Any, key: str = "") -> Any:
        """A copy of `document` with every configured key's value encrypted.

        Text that merely looks encrypted (a client can send anything) is encrypted too,
        wherever it is, so it reads back as sent instead of failing to decrypt.
        """
        if isinstance(document, dict):
            return {
                k: self.encrypt_value(k, v)
                if k in self.keys and v is not None
                else self.encrypt(v, k)
                for k, v in document.items()
            }
        if isinstance(document, list):
            return [self.encrypt(v) for v in document]
        if is_encrypted(document):
            return self.encrypt_value(key, document)
        return document

    def decrypt(self, document: Any, key: str = "") -> Any:
        """A copy of `document` with every encrypted value decrypted."""
        if isinstance(document, dict):
            return {k: self.decrypt(v, str(k)) for k, v in document.items()}
        if isinstance(document, list):
            return [self.decrypt(v) for v in document]
        if is_encrypted(document):
            return self.decrypt_value(key, document)
        return document

    def stale(self, document: Any) -> bool:
        """Whether `document` holds a value to (re-)encrypt: one under another key, or a
        configured key's value in plain text."""
        if isinstance(document, dict):
            return any(
                (k in self.keys and v is not None and not is_encrypted(v)) or self.stale(v)
                for k, v in document.items()
            )
        if isinstance(document, list):
            return any(self.stale(v) for v in document)
        return is_encrypted(document) and key_id_of(document) != self.ring.current_hex

    def reencrypt(self, document: Any) -> Any:
        """`document` with every value under the current key (plain ones encrypted too)."""
        return self.encrypt(self.decrypt(document))

    # --- the engine's JSON codec ----------------------------------------------------------

    def dumps(self, document: Any) -> str:
        """JSON text of a column value, configured keys encrypted."""
        text = self._dumps(document)
        if any(needle in text for needle in self._needles):
            return self._dumps(self.encrypt(document))
        return text

    def loads(self, text: str | bytes) -> Any:
        """A column value from its JSON text, decrypted."""
        document = self._loads(text)
        marked = _PREFIX_BYTES in text if isinstance(text, bytes) else PREFIX in text
        return self.decrypt(document) if marked else document

    def encrypted_keys_in(self, spec: Any) -> list[str]:
        """The configured keys a filter or search names (they cannot match)."""
        found: list[str] = []
        if isinstance(spec, dict):
            for k, v in spec.items():
                if k in self.keys:
                    found.append(k)
                found += self.encrypted_keys_in(v)
        elif isinstance(spec, list):
            for v in spec:
                found += self.encrypted_keys_in(v)
        return sorted(set(found))
