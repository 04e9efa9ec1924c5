"""The Deployment of `runyard serve` and the migrations Job that runs before it."""

from __future__ import annotations

from typing import Any

from runyard.deploy.dockerfile import SERVER_PORT
from runyard.deploy.instance import (
    MIGRATE_COMMAND,
    EnvValue,
    InstanceName,
    SecretKey,
    instance_environment,
    serve_command,
)
from runyard.deploy.kubernetes.app import (
    PRE_STOP_SECONDS,
    KubeApp,
    container_security,
    pod_security,
)

SERVER = "server"
MIGRATE = "migrate"
PORT_NAME = "http"
READINESS_PATH = "/readyz"
LIVENESS_PATH = "/livez"
# Settings that are secrets, read key by key from the Secret when it holds them.
OPTIONAL_SECRETS = ("RUNYARD_WEBHOOK_SECRET", "LANGGRAPH_AES_KEY", "RUNYARD_AES_DECRYPT_KEYS")
# Measured: an idle instance holds about 150 MB, and about as much after a hundred runs of the
# bundled examples; graphs add their own. Tune both to the project's graphs.
RESOURCES = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "2", "memory": "2Gi"},
}
MIGRATE_RESOURCES = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}


def server_environment(app: KubeApp) -> dict[str, EnvValue]:
    """The pods' environment: that of `runyard up`'s instances, secrets by reference."""
    env = instance_environment(
        SecretKey("DATABASE_URL"), SecretKey("REDIS_URL"), InstanceName(), app.drain_timeout
    )
    return env | {name: SecretKey(name, optional=True) for name in OPTIONAL_SECRETS}


def server_container(app: KubeApp) -> dict[str, Any]:
    """`runyard serve`: the command and environment of `runyard up`'s instances, the probes,
    the pre-stop pause, and nothing written outside /tmp."""
    return {
        "name": "runyard",
        "image": app.name,
        "command": serve_command(),
        "ports": [{"name": PORT_NAME, "containerPort": SERVER_PORT, "protocol": "TCP"}],
        "env": env_entries(app, server_environment(app)),
        # The project's own variables (model keys, what its auth handler reads); `env`
        # above wins over them.
        "envFrom": [{"secretRef": {"name": app.secret_name}}],
        "resources": RESOURCES,
        "securityContext": container_security(),
        **probes(),
        "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def deployment(app: KubeApp) -> dict[str, Any]:
    """N interchangeable instances; the autoscaler owns the count (so no `replicas`)."""
    spread = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": app.selector(SERVER)},
    }
    pod = {
        "terminationGracePeriodSeconds": app.grace_seconds,
        **_pod_basics(),
        "topologySpreadConstraints": [spread],
        "containers": [server_container(app)],
        "volumes": [_tmp_volume()],
    }
    metrics = {"prometheus.io/scrape": "true", "prometheus.io/port": str(SERVER_PORT)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": app.metadata(app.name, SERVER),
        "spec": {
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": app.selector(SERVER)},
            # A new pod is ready before an old one is told to stop.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": app.labels(SERVER),
                    "annotations": {**metrics, "prometheus.io/path": "/metrics"},
                },
                "spec": pod,
            },
        },
    }


def probes() -> dict[str, Any]:
    """Start-up (importing the graphs may be slow), readiness (storage answers and the pod
    is not draining) and liveness (the event loop turns and no loop of the pod died)."""

    def get(path: str, period: int, timeout: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": path, "port": PORT_NAME},
            "periodSeconds": period,
            "timeoutSeconds": timeout,
            "failureThreshold": failures,
        }

    return {
        "startupProbe": get(LIVENESS_PATH, 2, 3, 90),  # up to three minutes to start
        "readinessProbe": get(READINESS_PATH, 5, 3, 2),
        "livenessProbe": get(LIVENESS_PATH, 10, 5, 3),
    }


def migrate_job(app: KubeApp) -> dict[str, Any]:
    """`runyard migrate`, once per release, before the instances of that release start."""
    container = {
        "name": MIGRATE,
        "image": app.name,
        "command": list(MIGRATE_COMMAND),
        "env": env_entries(app, {"DATABASE_URL": SecretKey("DATABASE_URL")}),
        "resources": MIGRATE_RESOURCES,
        "securityContext": container_security(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod = {
        "restartPolicy": "Never",
        **_pod_basics(),
        "containers": [container],
        "volumes": [_tmp_volume()],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": app.metadata(app.migrate_name, MIGRATE),
        "spec": {
            "backoffLimit": 4,
            "activeDeadlineSeconds": 1800,
            "template": {"metadata": {"labels": app.labels(MIGRATE)}, "spec": pod},
        },
    }


def env_entries(app: KubeApp, env: dict[str, EnvValue]) -> list[dict[str, Any]]:
    """A container's `env`: plain values, Secret keys and the pod's name."""
    entries: list[dict[str, Any]] = []
    for name, value in env.items():
        if isinstance(value, SecretKey):
            ref: dict[str, Any] = {"name": app.secret_name, "key": value.key}
            if value.optional:
                ref["optional"] = True
            entries.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
        elif isinstance(value, InstanceName):
            field = {"fieldPath": "metadata.name"}
            entries.append({"name": name, "valueFrom": {"fieldRef": field}})
        else:
            entries.append({"name": name, "value": value})
    return entries


def _pod_basics() -> dict[str, Any]:
    # No API token (Runyard never calls the Kubernetes API) and no `<SERVICE>_PORT`
    # variables, which would land beside Runyard's own RUNYARD_* settings.
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security(),
    }


def _tmp_volume() -> dict[str, Any]:
    # The one place a pod writes: the graphs' and libraries' temporary files.
    return {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}
