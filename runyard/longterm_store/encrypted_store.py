"""The long-term store with LANGGRAPH_AES_JSON_KEYS, or the JSON handlers of
`encryption.path`, applied to item values."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from langgraph.store.base import BaseStore, Item, Op, PutOp, Result, SearchOp

from runyard.domain.errors import InvalidInputError
from runyard.encryption.json_keys import JsonKeyCipher

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption


class EncryptedStore(BaseStore):
    """Puts encrypt the configured keys of a value; reads decrypt them; a search filter
    naming one is refused (its ciphertext cannot match)."""

    def __init__(self, inner: BaseStore, cipher: JsonKeyCipher) -> None:
        self.inner = inner
        self.cipher = cipher
        self.supports_ttl = inner.supports_ttl
        self.ttl_config = inner.ttl_config
        self._loop = asyncio.get_running_loop()

    def __getattr__(self, name: str) -> Any:
        # sweep_ttl, setup, index_config...: the inner store's.
        return getattr(self.inner, name)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """`abatch` from a thread other than the event loop's (a sync graph node)."""
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The inner store's results, values encrypted on the way in, decrypted on the way out."""
        results = await self.inner.abatch([self._sealed(op) for op in ops])
        return [self._opened(result) for result in results]

    def _sealed(self, op: Op) -> Op:
        if isinstance(op, PutOp) and op.value is not None:
            return op._replace(value=self.cipher.encrypt(op.value))
        if isinstance(op, SearchOp) and op.filter:
            named = self.cipher.encrypted_keys_in(op.filter)
            if named:
                raise InvalidInputError(
                    f"store search filter: {', '.join(repr(k) for k in named)} "
                    f"{'is' if len(named) == 1 else 'are'} encrypted (LANGGRAPH_AES_JSON_KEYS) "
                    "and cannot be searched or filtered on"
                )
        return op

    def _opened(self, result: Any) -> Any:
        if isinstance(result, Item):
            opened = copy.copy(result)
            opened.value = self.cipher.decrypt(result.value)
            return opened
        if isinstance(result, list):
            return [self._opened(item) for item in result]
        return result


class CustomEncryptedStore(BaseStore):
    """Item values through the JSON handlers of `encryption.path` (`model="store"`,
    `field="value"`), the context of the request or run that writes them stored beside."""

    def __init__(self, inner: BaseStore, encryption: CustomEncryption) -> None:
        self.inner = inner
        self.encryption = encryption
        self.supports_ttl = inner.supports_ttl
        self.ttl_config = inner.ttl_config
        self._loop = asyncio.get_running_loop()

    def __getattr__(self, name: str) -> Any:
        # sweep_ttl, setup, index_config...: the inner store's.
        return getattr(self.inner, name)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """`abatch` from a thread other than the event loop's (a sync graph node)."""
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The inner store's results, values encrypted on the way in, decrypted on the way out."""
        sealed = [await self._sealed(op) for op in ops]
        results = await self.inner.abatch(sealed)
        return [await self._opened(result) for result in results]

    async def _sealed(self, op: Op) -> Op:
        if isinstance(op, PutOp) and op.value is not None:
            value = await self.encryption.encrypt_json("store", "value", dict(op.value))
            return op._replace(value=value)
        if isinstance(op, SearchOp) and op.filter:
            self.encryption.refuse_filter("store search filter", op.filter)
        return op

    async def _opened(self, result: Any) -> Any:
        if isinstance(result, Item):
            opened = copy.copy(result)
            opened.value = await self.encryption.decrypt_json("store", "value", result.value)
            return opened
        if isinstance(result, list):
            return [await self._opened(item) for item in result]
        return result
