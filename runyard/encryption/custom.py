"""Custom encryption at rest: the `langgraph_sdk.Encryption` object `encryption.path` names.

Its blob handlers encrypt checkpoints and pending writes, its JSON handlers the JSON of
threads, runs and the other resources, and its context handler derives, from the
authenticated user, the context (a tenant, a key id) each ciphertext is written under.
That context is stored beside the data, as LangGraph's server stores it: under
`__encryption_context__` in encrypted JSON, in a header of each encrypted blob, so a
decryption gets back the context its encryption had, whoever asks.

Compared against langgraph-api 0.16.7 (`langgraph_api/encryption/custom.py`,
`middleware.py`): the same handler calls (`EncryptionContext(model, field, metadata)`),
the same refusal of a JSON encryptor that adds or removes keys, the same marker.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph_sdk.encryption.types import DecryptResult, EncryptionContext

from runyard.domain.assistant import StoredAssistant
from runyard.domain.cron import CronRecord
from runyard.domain.encrypted_fields import (
    ASSISTANT_FIELDS,
    CRON_FIELDS,
    CRON_PAYLOAD_FIELDS,
    NESTED_FIELDS,
    RUN_FIELDS,
    RUN_KWARGS_FIELDS,
)
from runyard.domain.encryption_context import CONTEXT_KEY, current_context
from runyard.domain.errors import DecryptionError, InvalidInputError, RunyardError
from runyard.domain.run import RunRecord
from runyard.domain.thread import ThreadRecord
from runyard.encryption.custom_checkpoints import (
    BlobHandlerCipher,
    CheckpointMetadataCodec,
    HandlerThread,
)
from runyard.encryption.json_keys import stays_plain
from runyard.sdk_handlers import encryption_handlers

if TYPE_CHECKING:
    from langgraph_sdk import Encryption

log = logging.getLogger("runyard.encryption")

T = TypeVar("T")

# The cipher name checkpoint blobs carry in their type (`msgpack+custom`).
# A blob's header: magic, then the length of the context's JSON, then the context.
_BLOB_MAGIC = b"RYC1"
_LENGTH = struct.Struct(">I")


def never_encrypted(key: str) -> bool:
    """Whether `key` is never handed to a JSON encryptor: what the server reads (ids, owner,
    execution settings, `langgraph_*`; the AES JSON keys skip the same) and the marker."""
    return key == CONTEXT_KEY or stays_plain(key)


class EncryptionHandlerError(RunyardError):
    """A custom encryption handler returned what Runyard cannot store: a server-side fault
    of the project's encryption module, named in the message."""

    status_code = 500


def _name(handler: Callable[..., Any]) -> str:
    module = getattr(handler, "__module__", None) or "?"
    return f"{getattr(handler, '__qualname__', repr(handler))} (module {module})"


def _plaintext(result: Any) -> Any:
    """A decryptor may answer the plaintext or a DecryptResult (with a replacement, which
    Runyard does not write back: `runyard reencrypt` is the built-in AES's)."""
    return result.plaintext if isinstance(result, DecryptResult) else result


class CustomEncryption:
    """The handlers of one `Encryption` object, called where LangGraph's server calls them."""

    def __init__(self, encryption: Encryption, path: str) -> None:
        self.path = path
        # The SDK has public getters for the JSON handlers only; the others are read in
        # runyard.sdk_handlers, the one module that reads the SDK's private attributes.
        registered = encryption_handlers(encryption)
        self.blob_encryptor = registered.blob_encryptor
        self.blob_decryptor = registered.blob_decryptor
        self.json_encryptor = encryption.get_json_encryptor()
        self.json_decryptor = encryption.get_json_decryptor()
        self.context_handler = registered.context_handler
        self.handlers = HandlerThread()

    def describe(self) -> str:
        """The handlers registered, for the start-up log."""
        names = {
            "blob_encryptor": self.blob_encryptor,
            "blob_decryptor": self.blob_decryptor,
            "json_encryptor": self.json_encryptor,
            "json_decryptor": self.json_decryptor,
            "context_handler": self.context_handler,
        }
        return ",".join(name for name, handler in names.items() if handler is not None)

    # --- context --------------------------------------------------------------------------

    async def derive_context(self, user: Any, initial: dict[str, Any]) -> dict[str, Any]:
        """The context handler's answer for `user` (`initial` without a handler)."""
        if self.context_handler is None or user is None:
            return initial
        answer = await self.context_handler(user, EncryptionContext(metadata=dict(initial)))
        if not isinstance(answer, dict):
            raise EncryptionHandlerError(
                f"the encryption context handler {_name(self.context_handler)} returned "
                f"{type(answer).__name__}; it must return a dict"
            )
        try:
            orjson.dumps(answer)
        except TypeError as exc:
            raise EncryptionHandlerError(
                f"the encryption context handler {_name(self.context_handler)} returned a "
                f"context that is not JSON ({exc}); it is stored beside the data"
            ) from None
        return answer

    # --- JSON -----------------------------------------------------------------------------

    async def encrypt_json(
        self,
        model: str,
        field: str,
        data: dict[str, Any] | None,
        context: dict[str, Any] | None = None,
    ) -> Any:
        """`data` with its values encrypted by the JSON encryptor and `context` (by default
        the current one) stored beside them; unchanged without a JSON encryptor (or data)."""
        if self.json_encryptor is None or not data:
            return data
        if CONTEXT_KEY in data:
            # Already encrypted (a row read back without decrypting): never twice.
            return data
        kept = {k: v for k, v in data.items() if never_encrypted(k)}
        given = {k: v for k, v in data.items() if not never_encrypted(k)}
        if context is None:
            context = current_context()
        if given:
            sealed = await self.json_encryptor(
                EncryptionContext(model=model, field=field, metadata=context), given
            )
            self._check_keys(model, field, given, sealed)
        else:
            sealed = {}
        return {**sealed, **kept, CONTEXT_KEY: context}

    def _check_keys(self, model: str, field: str, given: dict[str, Any], sealed: Any) -> None:
        """Refuse an answer whose keys differ from the data's: partial updates of stored
        JSON merge by key, so the keys must stay as they were (LangGraph's rule too)."""
        handler = _name(self.json_encryptor) if self.json_encryptor else "?"
        if not isinstance(sealed, dict):
            raise EncryptionHandlerError(
                f"the JSON encryptor {handler} returned {type(sealed).__name__} for "
                f"{model}.{field}; it must return a dict with the same keys, values encrypted"
            )
        added = sorted(set(sealed) - set(given))
        removed = sorted(set(given) - set(sealed))
        if added or removed:
            raise EncryptionHandlerError(
                f"the JSON encryptor {handler} changed the keys of {model}.{field} (added: "
                f"{', '.join(map(repr, added)) or 'none'}; removed: "
                f"{', '.join(map(repr, removed)) or 'none'}); it must keep every key and "
                "encrypt only the values, because stored JSON is merged key by key"
            )

    async def decrypt_json(self, model: str, field: str, data: Any) -> Any:
        """`data` decrypted with the context stored beside it; plain data unchanged."""
        if not isinstance(data, dict) or CONTEXT_KEY not in data:
            return data
        context = data[CONTEXT_KEY] or {}
        kept = {k: v for k, v in data.items() if never_encrypted(k) and k != CONTEXT_KEY}
        given = {k: v for k, v in data.items() if not never_encrypted(k)}
        if not given:
            return kept
        if self.json_decryptor is None:
            raise DecryptionError(
                f"{model}.{field} was encrypted with a JSON encryptor, and the Encryption "
                f"object of {self.path} registers no JSON decryptor"
            )
        opened = _plaintext(
            await self.json_decryptor(
                EncryptionContext(model=model, field=field, metadata=context), given
            )
        )
        if not isinstance(opened, dict):
            raise EncryptionHandlerError(
                f"the JSON decryptor {_name(self.json_decryptor)} returned "
                f"{type(opened).__name__} for {model}.{field}; it must return a dict"
            )
        return {**opened, **kept}

    def refuse_filter(self, what: str, spec: dict[str, Any] | None) -> None:
        """A 422 when a filter names a key the JSON encryptor encrypts: its stored value is
        ciphertext, so the filter could never match."""
        if self.json_encryptor is None or not spec:
            return
        named = sorted(k for k in spec if not never_encrypted(k) and not k.startswith("$"))
        if named:
            raise InvalidInputError(
                f"{what} on {', '.join(map(repr, named))}: encrypted at rest by the JSON "
                f"encryptor of encryption.path ({self.path}), so it cannot be searched or "
                "filtered on; filter on an identifier or on owner"
            )

    async def open_webhook_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A run's webhook payload as sent: the run's metadata, kwargs and error and the
        thread's values decrypted (stored with the delivery as the run and thread store
        them)."""
        out = await self.decrypt_run(payload)
        return await self.decrypt_fields("thread", out, ("values",))

    async def encrypt_fields(
        self,
        model: str,
        row: dict[str, Any],
        fields: Iterable[str],
        context: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A copy of `row` with these JSON fields encrypted (see `NESTED_FIELDS`); None
        and empty fields stay as they are, any other value that is not an object is a 422."""
        out = dict(row)
        if self.json_encryptor is None:
            return out
        for field in fields:
            value = out.get(field)
            if value is None:
                continue
            if not isinstance(value, dict):
                raise InvalidInputError(
                    f"{field} must be a JSON object (or null), got {type(value).__name__}: "
                    f"the JSON encryptor of encryption.path ({self.path}) encrypts it, "
                    "and it encrypts the values of an object"
                )
            out[field] = await self._encrypt_nested(model, field, value, context)
        return out

    async def _encrypt_nested(
        self, model: str, field: str, value: dict[str, Any], context: dict[str, Any] | None
    ) -> Any:
        inner = NESTED_FIELDS.get((model, field), ())
        own = [k for k in inner if isinstance(value.get(k), dict)]
        rest = {k: v for k, v in value.items() if k not in own}
        sealed = await self.encrypt_json(model, field, rest, context)
        if not own:
            return sealed
        parts = await self.encrypt_fields(model, {k: value[k] for k in own}, own, context)
        return {**sealed, **parts}

    async def decrypt_fields(
        self, model: str, row: dict[str, Any], fields: Iterable[str]
    ) -> dict[str, Any]:
        """A copy of `row` with these JSON fields decrypted (and the entries of them
        `NESTED_FIELDS` names)."""
        out = dict(row)
        for field in fields:
            if field in out:
                out[field] = await self._decrypt_nested(model, field, out[field])
        return out

    async def open_assistant(self, assistant: StoredAssistant) -> StoredAssistant:
        """A stored assistant (or one of its versions) with its JSON decrypted."""
        columns = assistant.json_columns()
        return assistant.with_json(
            await self.decrypt_fields("assistant", columns, ASSISTANT_FIELDS)
        )

    async def open_thread(self, thread: ThreadRecord, fields: Iterable[str]) -> ThreadRecord:
        """The stored thread with these JSON columns decrypted (`decrypt_fields`)."""
        return thread.with_json(await self.decrypt_fields("thread", thread.json_columns(), fields))

    async def decrypt_run(self, row: dict[str, Any]) -> dict[str, Any]:
        """A copy of a stored run with its JSON decrypted, the caller's data in its kwargs
        too."""
        return await self._decrypt_with_inner(row, "run", RUN_FIELDS, "kwargs", RUN_KWARGS_FIELDS)

    async def open_run(self, run: RunRecord) -> RunRecord:
        """The stored run with its JSON decrypted (`decrypt_run`)."""
        return run.with_json(await self.decrypt_run(run.json_columns()))

    async def decrypt_cron(self, row: dict[str, Any]) -> dict[str, Any]:
        """A copy of a stored cron with its metadata and the caller's data in its payload
        decrypted."""
        return await self._decrypt_with_inner(
            row, "cron", CRON_FIELDS, "payload", CRON_PAYLOAD_FIELDS
        )

    async def open_cron(self, cron: CronRecord) -> CronRecord:
        """The stored cron with its JSON decrypted (`decrypt_cron`)."""
        return cron.with_json(await self.decrypt_cron(cron.json_columns()))

    async def _decrypt_with_inner(
        self,
        row: dict[str, Any],
        model: str,
        fields: Iterable[str],
        holder: str,
        inner: Iterable[str],
    ) -> dict[str, Any]:
        out = await self.decrypt_fields(model, row, fields)
        if isinstance(out.get(holder), dict):
            out[holder] = await self.decrypt_fields(model, out[holder], inner)
        return out

    async def _decrypt_nested(self, model: str, field: str, value: Any) -> Any:
        inner = NESTED_FIELDS.get((model, field), ())
        own = [k for k in inner if isinstance(value, dict) and _apart(value.get(k))]
        if not own:
            return await self.decrypt_json(model, field, value)
        rest = {k: v for k, v in value.items() if k not in own}
        opened = await self.decrypt_json(model, field, rest)
        parts = await self.decrypt_fields(model, {k: value[k] for k in own}, own)
        return {**opened, **parts}

    def metadata_codec(self) -> CheckpointMetadataCodec | None:
        """What the checkpoint savers pass checkpoint metadata through (None without a
        JSON encryptor)."""
        return CheckpointMetadataCodec(self) if self.json_encryptor is not None else None

    # --- blobs ----------------------------------------------------------------------------

    def serde(self) -> SerializerProtocol | None:
        """The checkpoint serializer: LangGraph's default, its bytes passed through the blob
        handlers. None without a blob encryptor (checkpoints stay LangGraph's own)."""
        if self.blob_encryptor is None:
            return None
        return EncryptedSerializer(BlobHandlerCipher(self), JsonPlusSerializer())

    def seal_blob(self, plaintext: bytes) -> bytes:
        """`plaintext` through the blob encryptor, the current context in a header."""
        assert self.blob_encryptor is not None
        context = current_context()
        call = self.blob_encryptor(
            EncryptionContext(model="checkpoint", metadata=context), plaintext
        )
        sealed = self.handlers.run(_awaited(call))
        if not isinstance(sealed, bytes):
            raise EncryptionHandlerError(
                f"the blob encryptor {_name(self.blob_encryptor)} returned "
                f"{type(sealed).__name__}; it must return bytes"
            )
        header = orjson.dumps(context)
        return _BLOB_MAGIC + _LENGTH.pack(len(header)) + header + sealed

    def open_blob(self, blob: bytes) -> bytes:
        """The plaintext of a blob `seal_blob` wrote, decrypted under its stored context."""
        if not blob.startswith(_BLOB_MAGIC) or len(blob) < len(_BLOB_MAGIC) + _LENGTH.size:
            raise DecryptionError("a checkpoint value has no custom encryption header")
        start = len(_BLOB_MAGIC) + _LENGTH.size
        (length,) = _LENGTH.unpack(blob[len(_BLOB_MAGIC) : start])
        context = orjson.loads(blob[start : start + length])
        if self.blob_decryptor is None:
            raise DecryptionError(
                f"a checkpoint value was encrypted with a blob encryptor, and the "
                f"Encryption object of {self.path} registers no blob decryptor"
            )
        call = self.blob_decryptor(
            EncryptionContext(model="checkpoint", metadata=context), blob[start + length :]
        )
        opened = _plaintext(self.handlers.run(_awaited(call)))
        if not isinstance(opened, bytes):
            raise EncryptionHandlerError(
                f"the blob decryptor {_name(self.blob_decryptor)} returned "
                f"{type(opened).__name__}; it must return bytes"
            )
        return opened


def _apart(entry: Any) -> bool:
    """Whether an entry `NESTED_FIELDS` names was stored encrypted on its own (or empty)."""
    return isinstance(entry, dict) and (not entry or CONTEXT_KEY in entry)


async def _awaited(call: Awaitable[T]) -> T:
    return await call
