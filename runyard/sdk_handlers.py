"""The functions a project registers on langgraph-sdk's `Auth`, `Priority` and `Encryption`
objects, read once at start-up: the one module of Runyard that reads private attributes of
another package.

The SDK's decorators (`@auth.authenticate`, `@auth.on...`, `@priority.assign`,
`@encryption.encrypt.blob`, `@encryption.context`...) store each function in a private
attribute of the object, and the SDK offers a public accessor only for the JSON encryption
handlers (`Encryption.get_json_encryptor` / `get_json_decryptor`, used by
`runyard.encryption.custom` instead). The decorators run when the project's module is
imported, before Runyard holds the object, so Runyard cannot learn the functions through a
call of its own either. LangGraph's own server reads these same attributes, and the SDK's
`Auth.__init__` says its three are read by the API and renaming them is a breaking change.

Each read below says what it reads and which SDK releases it was checked against. An
attribute that is missing or changed shape is a `SdkChangedError` at start-up naming the
installed release, not an AttributeError on a request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

from runyard.domain.errors import ConfigError

if TYPE_CHECKING:
    from langgraph_sdk import Auth, Encryption
    from langgraph_sdk.auth.types import Authenticator, Handler
    from langgraph_sdk.encryption.types import BlobDecryptor, BlobEncryptor, ContextHandler
    from langgraph_sdk.priority import Priority

# The langgraph-sdk releases whose source the reads below were checked against.
AUTH_CHECKED = "0.1.70, 0.2.0, 0.3.0, 0.4.0 and 0.4.14"
ENCRYPTION_CHECKED = "0.3.0, 0.4.0 and 0.4.14"
PRIORITY_CHECKED = "0.4.14"

AssignFunction = Callable[[Any], Awaitable[Any]]


class SdkChangedError(ConfigError):
    """The installed langgraph-sdk keeps a registered function somewhere Runyard does not
    read: the project's handlers cannot be called."""


def _changed(attribute: str, registers: str, checked: str) -> SdkChangedError:
    try:
        installed = metadata.version("langgraph-sdk")
    except metadata.PackageNotFoundError:
        installed = "(version unknown)"
    return SdkChangedError(
        f"langgraph-sdk {installed} keeps no {attribute} where Runyard reads the function "
        f"{registers} registers (checked against langgraph-sdk {checked}); install one of "
        "those releases, or a Runyard that supports this one"
    )


@dataclass(frozen=True)
class AuthHandlers:
    """The functions registered on a project's `Auth` object."""

    authenticate: Authenticator | None
    # Per (resource, action), "*" standing for any: the handler `@auth.on.<resource>.<action>`
    # (or `@auth.on.<resource>`, `@auth.on(resources=..., actions=...)`) registered.
    by_action: Mapping[tuple[str, str], Handler]
    # The handler `@auth.on` registered for every resource and action.
    fallback: Handler | None


def auth_handlers(auth: Auth) -> AuthHandlers:
    """The functions registered on `auth` (SdkChangedError if the SDK keeps them elsewhere)."""
    try:
        # `Auth._authenticate_handler`: what @auth.authenticate registered; no public getter.
        authenticate = auth._authenticate_handler
    except AttributeError:
        raise _changed("Auth._authenticate_handler", "@auth.authenticate", AUTH_CHECKED) from None
    try:
        # `Auth._handlers`: {(resource, action): [handler]} of @auth.on.*; no public getter.
        handlers = auth._handlers
    except AttributeError:
        raise _changed("Auth._handlers", "@auth.on.<resource>", AUTH_CHECKED) from None
    try:
        # `Auth._global_handlers`: [handler] of a bare @auth.on; no public getter.
        fallback = auth._global_handlers
    except AttributeError:
        raise _changed("Auth._global_handlers", "@auth.on", AUTH_CHECKED) from None
    if not isinstance(handlers, dict) or not all(
        isinstance(registered, list) and registered for registered in handlers.values()
    ):
        raise _changed("dict of handler lists in Auth._handlers", "@auth.on.*", AUTH_CHECKED)
    if not isinstance(fallback, list):
        raise _changed("list in Auth._global_handlers", "@auth.on", AUTH_CHECKED)
    return AuthHandlers(
        authenticate=authenticate,
        by_action={key: registered[-1] for key, registered in handlers.items()},
        fallback=fallback[-1] if fallback else None,
    )


def assign_function(priority: Priority) -> AssignFunction | None:
    """The function `@priority.assign` registered, or None."""
    try:
        # `Priority._assign_handler`: what @priority.assign registered; no public getter.
        handler: AssignFunction | None = priority._assign_handler
    except AttributeError:
        raise _changed("Priority._assign_handler", "@priority.assign", PRIORITY_CHECKED) from None
    return handler


@dataclass(frozen=True)
class EncryptionHandlers:
    """The blob and context functions registered on a project's `Encryption` object (its
    JSON functions have public getters)."""

    blob_encryptor: BlobEncryptor | None
    blob_decryptor: BlobDecryptor | None
    context_handler: ContextHandler | None


def encryption_handlers(encryption: Encryption) -> EncryptionHandlers:
    """The blob and context functions registered on `encryption`."""
    try:
        # `Encryption._blob_encryptor`: what @encryption.encrypt.blob registered; no getter.
        blob_encryptor = encryption._blob_encryptor
    except AttributeError:
        raise _changed(
            "Encryption._blob_encryptor", "@encryption.encrypt.blob", ENCRYPTION_CHECKED
        ) from None
    try:
        # `Encryption._blob_decryptor`: what @encryption.decrypt.blob registered; no getter.
        blob_decryptor = encryption._blob_decryptor
    except AttributeError:
        raise _changed(
            "Encryption._blob_decryptor", "@encryption.decrypt.blob", ENCRYPTION_CHECKED
        ) from None
    try:
        # `Encryption._context_handler`: what @encryption.context registered; no getter.
        context_handler = encryption._context_handler
    except AttributeError:
        raise _changed(
            "Encryption._context_handler", "@encryption.context", ENCRYPTION_CHECKED
        ) from None
    return EncryptionHandlers(blob_encryptor, blob_decryptor, context_handler)
