"""The compose file and nginx configuration of `runyard up`, in one of two network shapes.

`bridge` (the default): an ordinary project network where services find each other by name;
PostgreSQL, Redis, a one-shot migration and N Runyard instances publish nothing, nginx
publishes one port. `host`: every container uses `network_mode: host` and binds to loopback,
for machines without bridge networking; each part then has a port of its own on the host.

The database password is never in these files: compose reads it from the `.env` written
beside them (`POSTGRES_PASSWORD`), and the image does not hold it either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runyard.deploy.dockerfile import SERVER_PORT
from runyard.deploy.instance import (
    DEFAULT_DRAIN_TIMEOUT,
    MIGRATE_COMMAND,
    instance_environment,
    serve_command,
    stop_grace_seconds,
)
from runyard.deploy.yaml_text import yaml_lines

POSTGRES_IMAGE = "postgres:15"
REDIS_IMAGE = "redis:7"
NGINX_IMAGE = "nginx:1.27"
NGINX_PORT = 8000  # nginx's port inside its container on the bridge network
UPSTREAM_HEADER = "X-Runyard-Upstream"
PASSWORD_VARIABLE = "POSTGRES_PASSWORD"
# Compose stops with an error naming the file when the password is missing.
PASSWORD = (
    "${" + PASSWORD_VARIABLE + ":?set " + PASSWORD_VARIABLE + " in the .env beside this file}"
)

Network = Literal["bridge", "host"]


@dataclass(frozen=True)
class Deployment:
    """What a `runyard up` deployment runs and where each part listens."""

    image: str
    instances: int = 3
    network: Network = "bridge"
    # Where nginx is published; None: 127.0.0.1, as `runyard serve` binds by default.
    host: str | None = None
    port: int = SERVER_PORT
    # host network only: the instances' first port (None: the ports right after nginx's),
    # PostgreSQL's and Redis's.
    first_instance_port: int | None = None
    postgres_port: int = 5433
    redis_port: int = 6380
    postgres_image: str = POSTGRES_IMAGE
    redis_image: str = REDIS_IMAGE
    nginx_image: str = NGINX_IMAGE
    # The project's env files (langgraph.json's "env"), relative to the compose file: the
    # instances read them at run time, so they need not be in the image.
    env_files: tuple[str, ...] = field(default=())
    # WORKER_DRAIN_TIMEOUT of the instances; their stop grace period follows from it.
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT

    @property
    def bind_host(self) -> str:
        """The address nginx is published on: loopback unless `host` says otherwise."""
        return self.host if self.host is not None else "127.0.0.1"

    @property
    def instance_names(self) -> list[str]:
        """The compose service of each Runyard instance."""
        return [f"runyard-{i}" for i in range(1, self.instances + 1)]

    @property
    def instance_ports(self) -> list[int]:
        """The port of each Runyard instance (on 127.0.0.1 with the host network)."""
        if self.network == "bridge":
            return [SERVER_PORT] * self.instances
        first = self.first_instance_port or self.port + 1
        return [first + i for i in range(self.instances)]

    @property
    def upstreams(self) -> list[str]:
        """The instances' addresses as nginx reaches them."""
        if self.network == "bridge":
            return [f"{name}:{SERVER_PORT}" for name in self.instance_names]
        return [f"127.0.0.1:{port}" for port in self.instance_ports]

    @property
    def url(self) -> str:
        """Where clients on this machine reach the load balancer."""
        shown = "127.0.0.1" if self.bind_host in ("0.0.0.0", "", "::") else self.bind_host
        return f"http://{shown}:{self.port}"

    @property
    def database_url(self) -> str:
        """The instances' DATABASE_URL, the password interpolated by compose."""
        where = "postgres:5432" if self.network == "bridge" else f"127.0.0.1:{self.postgres_port}"
        return f"postgresql://runyard:{PASSWORD}@{where}/runyard"

    @property
    def redis_url(self) -> str:
        """The instances' REDIS_URL."""
        where = "redis:6379" if self.network == "bridge" else f"127.0.0.1:{self.redis_port}"
        return f"redis://{where}/0"


# nginx's connections per worker (its default, 512, holds about 250 stream clients) and the
# open-files limit it sets itself.
NGINX_WORKER_CONNECTIONS = 32768
NGINX_OPEN_FILES = 65536


def render_nginx_conf(upstreams: Sequence[str | int], listen: str, extra_main: str = "") -> str:
    """nginx in front of Runyard instances (addresses, or ports on 127.0.0.1): streams
    unbuffered, retries on another instance when one is stopping, and names the instance
    that answered in a response header; `extra_main` adds top-level directives."""
    addresses = [f"127.0.0.1:{u}" if isinstance(u, int) else u for u in upstreams]
    servers = "\n".join(
        f"        server {address} max_fails=1 fail_timeout=2s;" for address in addresses
    )
    return f"""# Load balancer in front of the Runyard instances (generated by Runyard).
# Any instance serves any request; streams need buffering off and long read timeouts.
# Each client held costs nginx two connections (the client's, the instance's): room for
# about sixteen thousand stream clients per worker (docs/operating.md, "How far one
# instance goes").
{extra_main}worker_rlimit_nofile {NGINX_OPEN_FILES};
events {{
    worker_connections {NGINX_WORKER_CONNECTIONS};
}}

http {{
    upstream runyard {{
{servers}
        keepalive 32;
    }}

    server {{
        listen {listen};

        location / {{
            proxy_pass http://runyard;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            client_max_body_size 20m;
            # A request that reaches a stopping instance is retried on another one.
            proxy_next_upstream error timeout http_502 http_503;
            # Which instance answered: `runyard up` waits until every one has.
            add_header {UPSTREAM_HEADER} $upstream_addr always;
        }}
    }}
}}
"""


def nginx_listen(deployment: Deployment) -> str:
    """The `listen` value of the load balancer."""
    if deployment.network == "bridge":
        return str(NGINX_PORT)
    return f"{deployment.bind_host}:{deployment.port}"


def render_deployment_nginx(deployment: Deployment) -> str:
    """nginx.conf of a deployment."""
    return render_nginx_conf(deployment.upstreams, nginx_listen(deployment))


def render_compose(
    deployment: Deployment, nginx_conf: str = "./nginx.conf", header: str = ""
) -> str:
    """The compose file: a header comment, then YAML with every string JSON-quoted."""
    d = deployment
    services: dict[str, Any] = {
        "postgres": _postgres(d),
        "redis": _redis(d),
        "migrate": _network(
            d,
            {
                "image": d.image,
                "command": list(MIGRATE_COMMAND),
                "environment": {"DATABASE_URL": d.database_url},
                "depends_on": {"postgres": {"condition": "service_healthy"}},
                "restart": "no",
            },
        ),
    }
    for name, port in zip(d.instance_names, d.instance_ports, strict=True):
        services[name] = _instance(d, name, port)
    lb: dict[str, Any] = {
        "image": d.nginx_image,
        "volumes": [f"{nginx_conf}:/etc/nginx/nginx.conf:ro"],
        "depends_on": d.instance_names,
        "restart": "unless-stopped",
    }
    if d.network == "bridge":
        host = f"[{d.bind_host}]" if ":" in d.bind_host else d.bind_host
        lb["ports"] = [f"{host}:{d.port}:{NGINX_PORT}"]
    services["lb"] = _network(d, lb)
    document = {"services": services, "volumes": {"postgres-data": {}, "redis-data": {}}}
    return "\n".join([*_comment(d, header), *yaml_lines(document, gap_depth=1)]) + "\n"


def _comment(d: Deployment, header: str) -> list[str]:
    shape = (
        "An ordinary project network: services find each other by name and only nginx"
        f"\n# publishes a port ({d.bind_host}:{d.port})."
        if d.network == "bridge"
        else "Every container uses the host network (no bridge) and binds to 127.0.0.1"
        f"\n# unless told otherwise; nginx listens on {d.bind_host}:{d.port}."
    )
    return [
        "# Runyard in production shape, generated by `runyard up`: PostgreSQL, Redis, a one-shot",
        f"# migration, {d.instances} Runyard instance(s) and nginx in front of them.",
        f"# {shape}",
        f"# The database password is {PASSWORD_VARIABLE} in the .env beside this file (not in the",
        "# image). On SIGTERM an instance drains its runs (WORKER_DRAIN_TIMEOUT, "
        f"{d.drain_timeout:g} s),",
        "# then hands the rest to the others, within its "
        f"{stop_grace_seconds(d.drain_timeout)} s stop grace period.",
        "# RUNYARD_ALLOW_UNAUTHENTICATED=true: the instances listen on every address of their",
        "# container, but nginx is their only way in. It serves without authentication:",
        "# configure `auth` in langgraph.json before exposing this to anyone but yourself.",
        *([header.rstrip("\n")] if header else []),
    ]


def _network(d: Deployment, service: dict[str, Any]) -> dict[str, Any]:
    if d.network == "host":
        return {"image": service.pop("image"), "network_mode": "host", **service}
    return service


def _postgres(d: Deployment) -> dict[str, Any]:
    port = "5432" if d.network == "bridge" else str(d.postgres_port)
    command = ["postgres"]
    if d.network == "host":
        command += ["-c", "listen_addresses=127.0.0.1", "-p", port]
    return _network(
        d,
        {
            "image": d.postgres_image,
            "command": command,
            "environment": {
                "POSTGRES_USER": "runyard",
                PASSWORD_VARIABLE: PASSWORD,
                "POSTGRES_DB": "runyard",
            },
            "volumes": ["postgres-data:/var/lib/postgresql/data"],
            "healthcheck": _check(
                ["pg_isready", "-h", "127.0.0.1", "-p", port, "-U", "runyard", "-d", "runyard"]
            ),
            "restart": "unless-stopped",
        },
    )


def _redis(d: Deployment) -> dict[str, Any]:
    port = "6379" if d.network == "bridge" else str(d.redis_port)
    command = ["redis-server", "--port", port, "--appendonly", "yes"]
    if d.network == "host":
        command[1:1] = ["--bind", "127.0.0.1"]
    else:
        # Reached over the project network only (not published); without this a Redis
        # built with the usual defaults refuses every client but loopback.
        command += ["--protected-mode", "no"]
    return _network(
        d,
        {
            "image": d.redis_image,
            "command": command,
            "volumes": ["redis-data:/data"],
            "healthcheck": _check(["redis-cli", "-p", port, "ping"]),
            "restart": "unless-stopped",
        },
    )


def _instance(d: Deployment, name: str, port: int) -> dict[str, Any]:
    bind = "0.0.0.0" if d.network == "bridge" else "127.0.0.1"
    ready = (
        "import urllib.request; "
        f"urllib.request.urlopen('http://127.0.0.1:{port}/readyz', timeout=2)"
    )
    service: dict[str, Any] = {"image": d.image, "command": serve_command(bind, port)}
    if d.env_files:
        service["env_file"] = list(d.env_files)
    # nginx is the gateway; see the comment at the top of this file.
    environment = instance_environment(d.database_url, d.redis_url, name, d.drain_timeout)
    service |= {
        "environment": environment,
        "depends_on": {
            "migrate": {"condition": "service_completed_successfully"},
            "redis": {"condition": "service_healthy"},
        },
        "healthcheck": {
            "test": ["CMD", "python", "-c", ready],
            "interval": "10s",
            "timeout": "3s",
            "start_period": "30s",
            "retries": 5,
        },
        "stop_grace_period": f"{stop_grace_seconds(d.drain_timeout)}s",
        "restart": "unless-stopped",
    }
    return _network(d, service)


def _check(command: list[str]) -> dict[str, Any]:
    return {"test": ["CMD", *command], "interval": "1s", "timeout": "3s", "retries": 60}
