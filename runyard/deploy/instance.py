"""What every Runyard instance of a deployment runs, whichever orchestrator starts it.

`runyard up` (Docker Compose) and `runyard k8s` (Kubernetes) both build their instances'
command, environment and stop grace period here, so the two cannot drift apart: only how
a secret or the instance's name reaches the environment differs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from runyard.deploy.dockerfile import SERVER_PORT
from runyard.domain.errors import ConfigError
from runyard.settings import OFFICIAL_NAMES, Settings

DRAIN_VARIABLE = "WORKER_DRAIN_TIMEOUT"
DEFAULT_DRAIN_TIMEOUT = float(Settings.model_fields["worker_drain_timeout"].default)
# After the drain an instance hands its unfinished runs back (the worker pool waits up to
# 10 s for that) and closes its connections: the stop grace period leaves it this long.
HANDOVER_SECONDS = 10
MIGRATE_COMMAND = ("runyard", "migrate")


@dataclass(frozen=True)
class SecretKey:
    """A value the orchestrator keeps as a secret: only the key's name is ever written."""

    key: str
    optional: bool = False


@dataclass(frozen=True)
class InstanceName:
    """The name the orchestrator gives the instance (a compose service, a pod)."""


EnvValue = str | SecretKey | InstanceName


def serve_command(host: str = "0.0.0.0", port: int = SERVER_PORT) -> list[str]:
    """The instances' command: serve, never migrate (a one-shot migration runs first)."""
    return ["runyard", "serve", "--host", host, "--port", str(port), "--no-migrate"]


def instance_environment(
    database_url: EnvValue, redis_url: EnvValue, instance: EnvValue, drain_timeout: float
) -> dict[str, EnvValue]:
    """The instances' environment; the project's own variables come beside it, and lose to
    it (compose's `environment` beats `env_file`, Kubernetes' `env` beats `envFrom`)."""
    return {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "RUNYARD_LOG_FORMAT": "json",
        # Behind the deployment's gateway (nginx, an ingress), which is their only way in.
        "RUNYARD_ALLOW_UNAUTHENTICATED": "true",
        # Which instance this is, for logs and graphs.
        "RUNYARD_INSTANCE": instance,
        # An old schema stops start-up with a message instead of migrating under traffic.
        "RUNYARD_MIGRATE_ON_START": "false",
        # Written, not left to the default: the stop grace period is computed from it.
        DRAIN_VARIABLE: _seconds_text(drain_timeout),
    }


def stop_grace_seconds(drain_timeout: float, pre_stop_seconds: int = 0) -> int:
    """How long the orchestrator waits between asking an instance to stop and killing it:
    any pre-stop pause, the whole drain, then the hand-over of what is left."""
    return pre_stop_seconds + math.ceil(drain_timeout) + HANDOVER_SECONDS


def project_drain_timeout(env: Mapping[str, str], source: str) -> float:
    """The drain the project's variables ask for (`WORKER_DRAIN_TIMEOUT`, else LangGraph's
    name for it), else the default; ConfigError naming `source` when it is no number >= 0."""
    for name in (DRAIN_VARIABLE, OFFICIAL_NAMES[DRAIN_VARIABLE]):
        text = env.get(name, "").strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"{source}: {name} must be a number of seconds >= 0, got {text!r}")
        return value
    return DEFAULT_DRAIN_TIMEOUT


def _seconds_text(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)
