"""The synchronous side of custom encryption: LangGraph's checkpoint serializer calls the
encryptor from synchronous code on the server's event loop, so the (async) handlers run on
a loop of their own (`HandlerThread`), behind the serializer's cipher protocol
(`BlobHandlerCipher`) and the savers' metadata codec (`CheckpointMetadataCodec`)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from langgraph.checkpoint.serde.base import CipherProtocol

from runyard.domain.encryption_context import CONTEXT_KEY, current_context
from runyard.domain.errors import DecryptionError

T = TypeVar("T")

# The cipher name of a blob the blob handlers wrote (its type reads `msgpack+custom`).
CIPHER_NAME = "custom"


class HandlerThread:
    """An event loop on a thread of its own, for the blob handlers.

    LangGraph's checkpoint serializer is synchronous and is called on the server's event
    loop, so an async handler cannot be awaited there; it runs to completion on this loop
    instead, the caller waiting for it (about what the cipher itself costs).
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop on its thread."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="runyard-encryption", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop, wait for its thread and close it. Idempotent."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        """The result of `call`, run to completion on this loop."""
        if self._loop is None:
            call.close()
            raise RuntimeError("the encryption handler loop is not running")
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()


class CheckpointHandlers(Protocol):
    """What the checkpoint side reads of the custom encryption (`CustomEncryption`): its
    handler loop, the JSON handlers and the blob handlers."""

    handlers: HandlerThread

    async def encrypt_json(
        self,
        model: str,
        field: str,
        data: dict[str, Any] | None,
        context: dict[str, Any] | None = None,
    ) -> Any: ...

    async def decrypt_json(self, model: str, field: str, data: Any) -> Any: ...

    def seal_blob(self, plaintext: bytes) -> bytes: ...

    def open_blob(self, blob: bytes) -> bytes: ...


class CheckpointMetadataCodec:
    """Checkpoint metadata through the JSON handlers (`model="checkpoint"`,
    `field="metadata"`), for the savers, which are synchronous where they encode it: the
    handlers run on the handler loop, the caller's context captured before."""

    def __init__(self, encryption: CheckpointHandlers) -> None:
        self.encryption = encryption

    def encrypt(self, metadata: Any) -> Any:
        """`metadata` as stored (the step, source and parents stay plain)."""
        if not isinstance(metadata, dict):
            return metadata
        call = self.encryption.encrypt_json(
            "checkpoint", "metadata", metadata, dict(current_context())
        )
        return self.encryption.handlers.run(call)

    def decrypt(self, metadata: Any) -> Any:
        """Stored metadata decrypted under the context stored beside it."""
        if not isinstance(metadata, dict) or CONTEXT_KEY not in metadata:
            return metadata
        call = self.encryption.decrypt_json("checkpoint", "metadata", metadata)
        return self.encryption.handlers.run(call)

    def dumps(self, metadata: Any) -> str:
        """The JSON text of `metadata` as stored."""
        return json.dumps(self.encrypt(metadata))


class BlobHandlerCipher(CipherProtocol):
    """LangGraph's cipher protocol over the blob handlers, for EncryptedSerializer."""

    def __init__(self, encryption: CheckpointHandlers) -> None:
        self.encryption = encryption

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        """`plaintext` through the blob encryptor."""
        return CIPHER_NAME, self.encryption.seal_blob(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        """The plaintext of a blob the blob encryptor wrote."""
        if ciphername != CIPHER_NAME:
            raise DecryptionError(
                f"a checkpoint value was encrypted with cipher {ciphername!r}; with "
                f"encryption.path configured Runyard reads only {CIPHER_NAME!r}"
            )
        return self.encryption.open_blob(ciphertext)
