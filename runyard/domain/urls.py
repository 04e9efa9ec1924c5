"""Connection URLs as logs and answers may show them: every password masked."""

from __future__ import annotations

import re

# scheme://user:password@ (the user may be empty, as in redis://:password@host).
_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):[^@\s]*@")


def masked_url(text: str) -> str:
    """`text` with the password of every URL in it replaced by `***`: a URL on its own
    (DATABASE_URL, REDIS_URL) or a message that quotes one."""
    return _CREDENTIALS.sub(r"\g<scheme>\g<user>:***@", text)
