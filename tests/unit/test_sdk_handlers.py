"""Reading the functions a project registers on langgraph-sdk's `Auth`, `Priority` and
`Encryption` objects, and the error when the SDK no longer keeps them where Runyard reads."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest
from langgraph_sdk import Auth, Encryption, EncryptionContext
from langgraph_sdk.priority import Priority
from langgraph_sdk.priority.types import PriorityContext

from runyard.domain.errors import ConfigError
from runyard.sdk_handlers import (
    SdkChangedError,
    assign_function,
    auth_handlers,
    encryption_handlers,
)

pytestmark = [
    pytest.mark.timeout(30),
    # The SDK warns that these APIs are in beta each time one of their objects is built.
    pytest.mark.filterwarnings("ignore::langgraph_sdk.encryption.LangGraphBetaWarning"),
]


def test_the_auth_handlers_are_read_as_registered() -> None:
    auth = Auth()

    @auth.authenticate
    async def who(authorization: str) -> str:
        return authorization

    @auth.on.threads.create
    async def create_thread(ctx: Any, value: Any) -> None:
        return None

    @auth.on.threads
    async def any_thread(ctx: Any, value: Any) -> None:
        return None

    @auth.on
    async def everything(ctx: Any, value: Any) -> None:
        return None

    handlers = auth_handlers(auth)
    assert handlers.authenticate is who
    assert dict(handlers.by_action) == {
        ("threads", "create"): create_thread,
        ("threads", "*"): any_thread,
    }
    assert handlers.fallback is everything


def test_an_auth_with_nothing_registered_reads_as_empty() -> None:
    handlers = auth_handlers(Auth())
    assert (handlers.authenticate, dict(handlers.by_action), handlers.fallback) == (None, {}, None)


def test_the_assign_function_and_the_encryption_handlers_are_read_as_registered() -> None:
    priority = Priority()
    assert assign_function(priority) is None

    @priority.assign
    async def assign(ctx: PriorityContext) -> None:
        return None

    assert assign_function(priority) is assign

    encryption = Encryption()

    @encryption.encrypt.blob
    async def seal(ctx: EncryptionContext, data: bytes) -> bytes:
        return data

    @encryption.context
    async def tenant(user: Any, ctx: EncryptionContext) -> dict[str, Any]:
        return {}

    registered = encryption_handlers(encryption)
    assert registered.blob_encryptor is seal
    assert registered.blob_decryptor is None
    assert registered.context_handler is tenant


# An object whose class never set the attribute is what an SDK that moved it looks like.
@pytest.mark.parametrize(
    ("read", "kind", "attribute"),
    [
        (auth_handlers, Auth, "Auth._authenticate_handler"),
        (assign_function, Priority, "Priority._assign_handler"),
        (encryption_handlers, Encryption, "Encryption._blob_encryptor"),
    ],
)
def test_an_sdk_that_keeps_the_functions_elsewhere_is_a_config_error_naming_it(
    read: Any, kind: type, attribute: str
) -> None:
    with pytest.raises(SdkChangedError) as caught:
        read(kind.__new__(kind))
    assert isinstance(caught.value, ConfigError)
    message = caught.value.message
    assert attribute in message
    assert f"langgraph-sdk {metadata.version('langgraph-sdk')}" in message
    assert "checked against langgraph-sdk" in message


def test_auth_handlers_of_another_shape_are_a_config_error() -> None:
    auth = Auth.__new__(Auth)
    auth._authenticate_handler = None
    auth._handlers = {("threads", "create"): "not a list"}  # type: ignore[dict-item]
    auth._global_handlers = []
    with pytest.raises(SdkChangedError, match=r"Auth\._handlers"):
        auth_handlers(auth)
