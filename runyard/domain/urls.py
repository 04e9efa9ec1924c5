"""Connection URLs as logs and answers may show them: every secret written in them masked."""

from __future__ import annotations

import re

MASK = "***"
# A URL inside any text: scheme://, then up to whitespace, a quote, an angle bracket or a
# backslash (a JSON escape: the log line of a URL quoted in JSON ends there).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>\\]+")
# Query parameters whose value is a secret: password, sslpassword, ssl_password, pwd,
# secret, token, api_key, access_key, auth, credentials, signature...
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|auth|key|credential|signature", re.IGNORECASE)


def masked_url(text: str) -> str:
    """`text` with the secrets of every URL in it replaced by `***`: a URL on its own
    (DATABASE_URL, REDIS_URL) or a message that quotes one.

    Masked: the password of the user part (`redis://user:***@host`, an unencoded `@` in the
    password included: the user part ends at the last `@` before the query) and the value
    of every query parameter that names a secret (`?password=***`). A user name alone is
    left as it is.
    """
    if "://" not in text:
        return text
    return _URL.sub(_masked, text)


def _masked(match: re.Match[str]) -> str:
    scheme, rest = match.group(0).split("://", 1)
    query_at = _first_of(rest, "?#")
    user_end = rest.rfind("@", 0, query_at)
    if user_end >= 0:
        user, colon, _password = rest[:user_end].partition(":")
        if colon:
            masked_user = f"{user}:{MASK}"
            rest = masked_user + rest[user_end:]
            query_at += len(masked_user) - user_end
    if query_at < len(rest) and rest[query_at] == "?":
        rest = rest[: query_at + 1] + _masked_query(rest[query_at + 1 :])
    return f"{scheme}://{rest}"


def _masked_query(query: str) -> str:
    query, hash_sign, fragment = query.partition("#")
    pairs = []
    for pair in re.split(r"([&;])", query):
        name, equals, _value = pair.partition("=")
        pairs.append(f"{name}={MASK}" if equals and _SECRET_NAME.search(name) else pair)
    return "".join(pairs) + hash_sign + fragment


def _first_of(text: str, characters: str) -> int:
    """The index of the first of `characters` in `text`, else its length."""
    found = [index for index in (text.find(c) for c in characters) if index >= 0]
    return min(found, default=len(text))
