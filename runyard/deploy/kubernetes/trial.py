"""PostgreSQL and Redis inside the cluster, for trying the manifests out only: one pod each,
no backup, no failover, no tuning. Production uses managed or operated servers."""

from __future__ import annotations

from typing import Any

from runyard.deploy.compose import POSTGRES_IMAGE, REDIS_IMAGE
from runyard.deploy.kubernetes.app import KubeApp
from runyard.deploy.kubernetes.policies import POSTGRES_PORT, REDIS_PORT

TRIAL_LABEL = "runyard-trial-only"
WARNING = (
    "For trials only: one pod, no backup, no failover. Use a managed or operated "
    "PostgreSQL and Redis in production."
)
# The official images' postgres and redis users.
SERVICE_UID = 999
PASSWORD_KEY = "POSTGRES_PASSWORD"


def trial_images() -> dict[str, str]:
    """The images the trial servers name, as the kustomization lists them."""
    return {"postgres": POSTGRES_IMAGE, "redis": REDIS_IMAGE}


def postgres(app: KubeApp) -> list[dict[str, Any]]:
    """A PostgreSQL StatefulSet and its Service; the password is POSTGRES_PASSWORD in the
    deployment's Secret (and DATABASE_URL there names it)."""
    name = f"{app.name}-postgres"
    password = {"secretKeyRef": {"name": app.secret_name, "key": PASSWORD_KEY}}
    container = {
        "name": "postgres",
        "image": "postgres",
        "env": [
            {"name": "POSTGRES_USER", "value": "runyard"},
            {"name": "POSTGRES_DB", "value": "runyard"},
            {"name": PASSWORD_KEY, "valueFrom": password},
            # A folder inside the volume, which initdb may own (the volume's root it may not).
            {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
        ],
        "ports": [{"name": "postgres", "containerPort": POSTGRES_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "exec": {
                "command": ["pg_isready", "-h", "127.0.0.1", "-U", "runyard", "-d", "runyard"]
            },
            "periodSeconds": 5,
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/postgresql/data"},
            {"name": "run", "mountPath": "/var/run/postgresql"},
        ],
    }
    # The server's socket and lock files go on a volume of their own.
    return _server(app, name, container, POSTGRES_PORT, [{"name": "run", "emptyDir": {}}])


def redis(app: KubeApp) -> list[dict[str, Any]]:
    """A Redis StatefulSet (append-only file on its volume) and its Service."""
    name = f"{app.name}-redis"
    container = {
        "name": "redis",
        "image": "redis",
        # Reached over the cluster network, which protected mode would refuse.
        "command": ["redis-server", "--appendonly", "yes", "--protected-mode", "no"],
        "ports": [{"name": "redis", "containerPort": REDIS_PORT, "protocol": "TCP"}],
        "readinessProbe": {"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 5},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    return _server(app, name, container, REDIS_PORT, [])


def trial_policy(app: KubeApp) -> dict[str, Any]:
    """Only the deployment's pods reach the trial servers."""
    runyard_pods = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "runyard",
                "app.kubernetes.io/instance": app.name,
            }
        }
    }
    ports = [{"protocol": "TCP", "port": port} for port in (POSTGRES_PORT, REDIS_PORT)]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(app, f"{app.name}-trial", "trial"),
        "spec": {
            "podSelector": {
                "matchLabels": {TRIAL_LABEL: "true", "app.kubernetes.io/instance": app.name}
            },
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [runyard_pods], "ports": ports}],
        },
    }


def _server(
    app: KubeApp, name: str, container: dict[str, Any], port: int, volumes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    component = f"trial-{container['name']}"
    container["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    container["resources"] = {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    selector = {"app.kubernetes.io/instance": app.name, "app.kubernetes.io/component": component}
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
    }
    pod = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SERVICE_UID,
            "runAsGroup": SERVICE_UID,
            "fsGroup": SERVICE_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        **({"volumes": volumes} if volumes else {}),
    }
    stateful_set = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(app, name, component),
        "spec": {
            "serviceName": name,
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": _labels(app, component)}, "spec": pod},
            "volumeClaimTemplates": [claim],
        },
    }
    service_port = {"name": container["name"], "port": port, "targetPort": port}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(app, name, component),
        "spec": {"selector": selector, "ports": [service_port]},
    }
    return [stateful_set, service]


def _labels(app: KubeApp, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/instance": app.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "runyard-k8s",
        TRIAL_LABEL: "true",
    }


def _metadata(app: KubeApp, name: str, component: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": _labels(app, component),
        "annotations": {"runyard/warning": WARNING},
    }
