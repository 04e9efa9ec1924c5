"""sslmode, sslrootcert, sslcert and sslkey against a PostgreSQL that speaks TLS: a private
cluster whose certificates a test CA signed, which logs `certuser` in by client certificate.

Each parameter means to asyncpg (the engine, the statement pool) and to psycopg (LangGraph's
saver and store) what it means to libpq; a certificate the URL does not trust stops the
start in one line naming where, as `runyard migrate` shows.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from runyard.checkpoints.psycopg_pools import open_psycopg_pool
from runyard.db.conninfo import libpq_url
from runyard.db.driver import StatementPool
from runyard.db.engine import create_engine
from tests.integration.test_cli import Cli
from tests.support.throwaway import ThrowawayPostgres, postgres_tools

pytestmark = pytest.mark.timeout(120)

ASKED = (
    "SELECT current_user AS who, (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()) AS tls"
)


@dataclass(frozen=True)
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def write(self, folder: Path, name: str) -> tuple[Path, Path]:
        cert = folder / f"{name}.crt"
        key = folder / f"{name}.key"
        cert.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        key.write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key.chmod(0o600)
        return cert, key


def issue(name: str, signer: Issued | None = None, ip: str | None = None) -> Issued:
    """A certificate for `name`, signed by `signer` (a CA of its own without one)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer.cert.subject if signer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=signer is None, path_length=None), critical=True)
    )
    if ip is not None:
        alt = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))])
        builder = builder.add_extension(alt, critical=False)
    return Issued(key, builder.sign(signer.key if signer else key, hashes.SHA256()))


@dataclass(frozen=True)
class TlsServer:
    port: int
    ca: Path
    other_ca: Path
    client_cert: Path
    client_key: Path

    def url(self, user: str, **parameters: str) -> str:
        query = "&".join(f"{key}={value}" for key, value in parameters.items())
        return f"postgres://{user}@127.0.0.1:{self.port}/postgres?{query}"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    tools = postgres_tools()
    if tools is None:
        pytest.skip("PostgreSQL's server programs are not installed")
    folder = tmp_path_factory.mktemp("tls")
    ca = issue("runyard test CA")
    ca_file, _ = ca.write(folder, "ca")
    other_file, _ = issue("another CA").write(folder, "other-ca")
    client_cert, client_key = issue("certuser", ca).write(folder, "client")
    server = issue("127.0.0.1", ca, ip="127.0.0.1")

    def configure(data: Path) -> None:
        server.write(data, "server")
        (data / "ca.crt").write_bytes(ca_file.read_bytes())
        with (data / "postgresql.conf").open("a") as conf:
            conf.write("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n")
            conf.write("ssl_ca_file = 'ca.crt'\n")
        (data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "hostssl all certuser 127.0.0.1/32 cert\n"
            "hostssl all all 127.0.0.1/32 trust\n"
            "hostnossl all all 127.0.0.1/32 reject\n"
        )

    postgres = ThrowawayPostgres(tools).init(configure)
    try:
        with psycopg.connect(postgres.url + "?sslmode=require", autocommit=True) as admin:
            admin.execute("CREATE ROLE certuser LOGIN")
        yield TlsServer(postgres.port, ca_file, other_file, client_cert, client_key)
    finally:
        postgres.destroy()


async def asked_of_every_driver(url: str) -> list[tuple[str, bool]]:
    """Who each driver is logged in as, and whether over TLS: the engine, the statement
    pool, and psycopg as LangGraph's saver and store open it."""
    engine = create_engine(url)
    seen = []
    try:
        async with engine.connect() as conn:
            row = (await conn.exec_driver_sql(ASKED)).one()
            seen.append((row[0], row[1]))
        statements = StatementPool(engine, 1)
        await statements.open()
        try:
            found = (await statements.fetch_sql(ASKED, []))[0]
            seen.append((found["who"], found["tls"]))
        finally:
            await statements.close()
    finally:
        await engine.dispose()
    pool = await open_psycopg_pool(libpq_url(url), 1)
    try:
        async with pool.connection() as conn:
            answer = await (await conn.execute(ASKED)).fetchone()
            seen.append((answer["who"], answer["tls"]))
    finally:
        await pool.close()
    return seen


async def test_verify_full_with_sslrootcert_on_every_driver(tls_server: TlsServer) -> None:
    url = tls_server.url("postgres", sslmode="verify-full", sslrootcert=str(tls_server.ca))
    assert await asked_of_every_driver(url) == [("postgres", True)] * 3


async def test_a_client_certificate_logs_in_on_every_driver(tls_server: TlsServer) -> None:
    url = tls_server.url(
        "certuser",
        sslmode="verify-full",
        sslrootcert=str(tls_server.ca),
        sslcert=str(tls_server.client_cert),
        sslkey=str(tls_server.client_key),
    )
    assert await asked_of_every_driver(url) == [("certuser", True)] * 3


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("runyard: error:")]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize(
    ("user", "parameters", "said"),
    [
        # A server certificate from a CA the URL does not trust.
        ("postgres", {"sslmode": "verify-full", "sslrootcert": "other"}, "SSL failed"),
        # No client certificate where pg_hba.conf asks for one.
        ("certuser", {"sslmode": "require"}, "the server refused the login"),
        # No TLS where the server takes only TLS.
        ("postgres", {"sslmode": "disable"}, "the server refused the login"),
    ],
    ids=["untrusted-server", "no-client-cert", "no-tls"],
)
def test_a_refused_connection_is_one_line_naming_where(
    runner: Cli, tls_server: TlsServer, user: str, parameters: dict[str, str], said: str
) -> None:
    if parameters.get("sslrootcert") == "other":
        parameters = {**parameters, "sslrootcert": str(tls_server.other_ca)}
    url = tls_server.url(user, **parameters)
    code, output = runner.run("migrate", env={"DATABASE_URL": url})
    assert code == 2, output
    line = one_error_line(output)
    assert f"cannot connect to PostgreSQL at 127.0.0.1:{tls_server.port}: {said}" in line
