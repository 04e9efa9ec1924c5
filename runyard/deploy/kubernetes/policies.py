"""Around the Deployment: its Service, disruption budget, autoscaler, network policy, and
the example of the Secret it reads."""

from __future__ import annotations

from typing import Any

from runyard.deploy.dockerfile import SERVER_PORT
from runyard.deploy.kubernetes.app import KubeApp
from runyard.deploy.kubernetes.workload import OPTIONAL_SECRETS, PORT_NAME, SERVER

POSTGRES_PORT = 5432
REDIS_PORT = 6379
MIN_REPLICAS = 2
MAX_REPLICAS = 10
CPU_TARGET = 70
# What webhooks may not reach unless `webhooks.url.disable_private_ips` is false: loopback,
# private, shared (CGNAT), link-local (cloud metadata) and unspecified addresses.
PRIVATE_V4 = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
)
PRIVATE_V6 = ("::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10")


def service(app: KubeApp) -> dict[str, Any]:
    """The instances behind one address, for the ingress."""
    port = {"name": PORT_NAME, "port": SERVER_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": app.metadata(app.name, SERVER),
        "spec": {"type": "ClusterIP", "selector": app.selector(SERVER), "ports": [port]},
    }


def disruption_budget(app: KubeApp) -> dict[str, Any]:
    """A node drain takes one instance at a time: each hands its runs over before the next."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": app.metadata(app.name, SERVER),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": app.selector(SERVER)},
            # A pod that is not ready serves nobody: evicting it costs nothing.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def autoscaler(app: KubeApp) -> dict[str, Any]:
    """On CPU, the signal every cluster has; scale-down removes one pod a minute, so the
    pods leaving hand their runs over one after the other."""
    cpu = {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": CPU_TARGET}}
    one_a_minute = {"type": "Pods", "value": 1, "periodSeconds": 60}
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": app.metadata(app.name, SERVER),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app.name},
            "minReplicas": MIN_REPLICAS,
            "maxReplicas": MAX_REPLICAS,
            "metrics": [{"type": "Resource", "resource": cpu}],
            "behavior": {
                "scaleDown": {"stabilizationWindowSeconds": 300, "policies": [one_a_minute]}
            },
        },
    }


def network_policy(app: KubeApp) -> dict[str, Any]:
    """In: the ingress controller only. Out: DNS, PostgreSQL, Redis, and the webhook ports
    the project allows, to public addresses unless it allows private ones."""
    ingress_pods = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": app.ingress_namespace}}
    }
    tcp = [{"protocol": "TCP", "port": port} for port in app.egress_ports]
    outside: list[dict[str, Any]]
    if app.egress_private:
        outside = [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]
    else:
        outside = [
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_V4)}},
            {"ipBlock": {"cidr": "::/0", "except": list(PRIVATE_V6)}},
        ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": app.metadata(app.name, SERVER),
        "spec": {
            # Every pod of the deployment: the instances and the migrations Job.
            "podSelector": {"matchLabels": _deployment_pods(app)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [ingress_pods], "ports": [{"protocol": "TCP", "port": PORT_NAME}]}
            ],
            "egress": [
                {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                {"ports": [{"protocol": "TCP", "port": POSTGRES_PORT}]},
                {"ports": [{"protocol": "TCP", "port": REDIS_PORT}]},
                {"to": outside, "ports": tcp},
            ],
        },
    }


def example_secret(app: KubeApp) -> dict[str, Any]:
    """The Secret the pods read, with placeholders where the values go."""
    values = {
        "DATABASE_URL": "postgresql://<user>:<password>@<host>:5432/<database>",
        "REDIS_URL": "redis://<host>:6379/0",
        **{name: f"<optional: {name}, or remove this line>" for name in OPTIONAL_SECRETS},
        **{name: f"<{name}>" for name in app.project_variables},
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": app.metadata(app.secret_name, SERVER),
        "type": "Opaque",
        "stringData": values,
    }


def _deployment_pods(app: KubeApp) -> dict[str, str]:
    selector = app.selector(SERVER)
    del selector["app.kubernetes.io/component"]
    return selector
