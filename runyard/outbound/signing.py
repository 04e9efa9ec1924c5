"""Signatures of webhook deliveries, as the Standard Webhooks specification defines them:
`webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,` + base64 of the
HMAC-SHA256 of `id.timestamp.body`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from runyard.domain.errors import ConfigError

SECRET_PREFIX = "whsec_"


def signing_key(secret: str) -> bytes:
    """The HMAC key: a `whsec_`-prefixed secret is base64 (as Standard Webhooks libraries
    expect); any other value is used as its UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(
                "RUNYARD_WEBHOOK_SECRET starts with whsec_ but the rest is not base64; "
                'generate one with: python -c "import base64, os; '
                "print('whsec_' + base64.b64encode(os.urandom(32)).decode())\""
            ) from None
    return secret.encode()


def signature_headers(key: bytes, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one signed delivery."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }
