"""PostgreSQL URLs as libpq reads them: checked once, then spelled for each driver.

LangGraph's documentation writes DATABASE_URI as libpq does: `postgres://` or
`postgresql://`, with parameters such as `sslmode`, `options` or `host=/socket/dir`.
psycopg (LangGraph's saver and store) is libpq, and reads the URL as it is. asyncpg (the
engine, the statement pool, the setup lock) reads the same spelling for everything here
but `connect_timeout`, which it takes as its `timeout` argument (else it would send it to
the server as a setting), and sends `options` and `application_name` in the start-up
packet, as libpq does. Any other parameter is refused, naming it, rather than read by one
driver and not the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

# libpq's parameters Runyard passes on, and what each accepts (None: any text).
PARAMETERS: dict[str, tuple[str, ...] | None] = {
    "host": None,
    "port": None,
    "dbname": None,
    "user": None,
    "password": None,
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslrootcert": None,
    "sslcert": None,
    "sslkey": None,
    "options": None,
    "application_name": None,
    "connect_timeout": None,
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
}
DEFAULT_PORT = "5432"
# libpq: "the minimum allowed timeout is 2 seconds, therefore a value of 1 is interpreted as 2".
_MIN_CONNECT_TIMEOUT = 2
_SCHEME = re.compile(r"^postgres(ql)?(\+\w+)?://", re.I)


def is_postgres_url(url: str) -> bool:
    """`postgres://`, `postgresql://`, or SQLAlchemy's `postgresql+driver://`."""
    return bool(_SCHEME.match(url))


@dataclass(frozen=True)
class PostgresUrl:
    """A checked PostgreSQL URL and what each driver is given of it."""

    netloc: str
    path: str
    parameters: tuple[tuple[str, str], ...]

    @property
    def libpq(self) -> str:
        """The URL in libpq's spelling, every parameter kept (for psycopg)."""
        return self._url(self.parameters)

    @property
    def asyncpg_dsn(self) -> str:
        """The URL asyncpg reads as libpq would, `connect_timeout` left out."""
        return self._url(tuple(p for p in self.parameters if p[0] != "connect_timeout"))

    @property
    def connect_timeout(self) -> float | None:
        """libpq's `connect_timeout` in seconds (at least 2), or None: the driver's own."""
        raw = dict(self.parameters).get("connect_timeout")
        if raw is None or int(raw) <= 0:
            return None
        return float(max(int(raw), _MIN_CONNECT_TIMEOUT))

    @property
    def where(self) -> str:
        """Where it connects, for messages: `host:port`, or the socket of a directory."""
        given = dict(self.parameters)
        hostlist = self.netloc.rpartition("@")[2]
        hosts = given.get("host", "")
        ports = given.get("port", "")
        if not hosts:
            pairs = [_split_host(part) for part in unquote(hostlist).split(",")]
            hosts = ",".join(host for host, _ in pairs)
            ports = ports or ",".join(port for _, port in pairs)
        places = []
        port_list = ports.split(",") if ports else [DEFAULT_PORT]
        for i, host in enumerate(hosts.split(",")):
            port = port_list[i] if i < len(port_list) else port_list[-1]
            port = port or DEFAULT_PORT
            if not host or host.startswith("/"):
                folder = host or "/var/run/postgresql"
                places.append(f"the socket {folder.rstrip('/')}/.s.PGSQL.{port}")
            else:
                places.append(f"{host}:{port}")
        return ", ".join(places)

    def _url(self, parameters: tuple[tuple[str, str], ...]) -> str:
        query = "&".join(f"{key}={quote(value, safe='/')}" for key, value in parameters)
        return f"postgresql://{self.netloc}{self.path}" + (f"?{query}" if query else "")


def _split_host(part: str) -> tuple[str, str]:
    if part.startswith("["):
        host, _, rest = part[1:].partition("]")
        return host, rest.lstrip(":")
    host, _, port = part.partition(":")
    return host, port


def parse_postgres_url(url: str, setting: str = "DATABASE_URL") -> PostgresUrl:
    """The URL checked as libpq would read it; ValueError naming the parameter otherwise."""
    if not is_postgres_url(url):
        raise ValueError(
            f"{setting or 'it'} is not a PostgreSQL URL (postgresql://user@host:5432/db)"
        )
    rest = url.split("://", 1)[1]
    location, _, query = rest.partition("?")
    netloc, slash, path = location.partition("/")
    parameters = []
    for pair in query.split("&") if query else []:
        key, equals, value = pair.partition("=")
        if not equals:
            raise ValueError(
                f"{_named(setting)}the parameter {key!r} has no value (write {key}=...)"
            )
        # As libpq decodes a URI: %XX escapes only ('+' is a plus sign, not a space).
        parameters.append((unquote(key), unquote(value)))
    for key, value in parameters:
        _check(setting, key, value)
    return PostgresUrl(netloc, slash + path, tuple(parameters))


def _check(setting: str, key: str, value: str) -> None:
    if key not in PARAMETERS:
        raise ValueError(
            f"{_named(setting)}the parameter {key!r} is not supported (Runyard connects with "
            "asyncpg and psycopg, and reads only what both honour as libpq does: "
            f"{', '.join(PARAMETERS)}); remove it"
        )
    allowed = PARAMETERS[key]
    if allowed is not None and value not in allowed:
        raise ValueError(f"{_named(setting)}{key}={value!r} is not one of {', '.join(allowed)}")
    if key == "connect_timeout" and not re.fullmatch(r"-?\d+", value.strip()):
        raise ValueError(f"{_named(setting)}connect_timeout must be a whole number of seconds")


def _named(setting: str) -> str:
    """`SETTING: `, or nothing where the caller names the setting (pydantic does)."""
    return f"{setting}: " if setting else ""


def libpq_url(url: str) -> str:
    """A PostgreSQL URL (SQLAlchemy's `postgresql+asyncpg://` too) in libpq's spelling."""
    return parse_postgres_url(url).libpq
