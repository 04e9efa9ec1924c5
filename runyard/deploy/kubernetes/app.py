"""What a project's manifests are made from, and the names, labels and timings they share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from runyard.deploy.dockerfile import IMAGE_UID
from runyard.deploy.instance import DEFAULT_DRAIN_TIMEOUT, stop_grace_seconds

# Between a pod being told to stop and its SIGTERM: the time for the Service's endpoints, the
# ingress and every node's proxy to stop sending it new connections. The kubelet's own
# `sleep` action, so the image needs no sleep binary and the server no hook of its own.
PRE_STOP_SECONDS = 10
DEFAULT_INGRESS_NAMESPACE = "ingress-nginx"
# Resource names get suffixes (-migrate, -secrets, -postgres-0): keep the base name short.
MAX_NAME = 40


@dataclass(frozen=True)
class KubeApp:
    """One project's deployment on Kubernetes: its names, its image, its timings and what
    its pods may reach."""

    # The base name of every resource, `runyard-<project>`; also the image's name in the
    # manifests, which the kustomization's `images:` replaces with `image`.
    name: str
    image: str
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    # Where the ingress controller runs: the one namespace whose pods may connect.
    ingress_namespace: str = DEFAULT_INGRESS_NAMESPACE
    # Webhooks (and anything else the graphs call): the ports, and whether private
    # addresses may be reached, as `webhooks.url` in the project's config allows.
    egress_ports: tuple[int, ...] = (443,)
    egress_private: bool = False
    # The names of the project's own variables, for the example Secret (never their values).
    project_variables: tuple[str, ...] = ()

    @property
    def secret_name(self) -> str:
        """The Secret every pod reads its secrets and the project's variables from."""
        return f"{self.name}-secrets"

    @property
    def migrate_name(self) -> str:
        """The migrations Job."""
        return f"{self.name}-migrate"

    @property
    def grace_seconds(self) -> int:
        """terminationGracePeriodSeconds: the pre-stop pause, the drain, the hand-over."""
        return stop_grace_seconds(self.drain_timeout, PRE_STOP_SECONDS)

    def selector(self, component: str) -> dict[str, str]:
        """The labels that pick this deployment's pods of one component."""
        return {
            "app.kubernetes.io/name": "runyard",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": component,
        }

    def labels(self, component: str) -> dict[str, str]:
        """Every label of a resource of one component."""
        return {**self.selector(component), "app.kubernetes.io/managed-by": "runyard-k8s"}

    def metadata(self, name: str, component: str) -> dict[str, Any]:
        """A resource's metadata."""
        return {"name": name, "labels": self.labels(component)}


def kube_name(project_name: str) -> str:
    """`runyard-<project>` as Kubernetes names must be: lower case letters, digits, `-`."""
    slug = re.sub(r"[^a-z0-9]+", "-", project_name.lower()).strip("-")
    return f"runyard-{slug}"[:MAX_NAME].rstrip("-") if slug else "runyard"


def pod_security() -> dict[str, Any]:
    """The pods' security context: the image's non-root user, the runtime's seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": IMAGE_UID,
        "runAsGroup": IMAGE_UID,
        "fsGroup": IMAGE_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security() -> dict[str, Any]:
    """A container's security context: no privilege, no capability, nothing written outside
    its volumes (the server writes nothing on PostgreSQL; /tmp is a volume for graphs)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def image_entry(name: str, reference: str) -> dict[str, str]:
    """The kustomization's `images:` entry that points `name` at `reference`
    (`repository[:tag]`, `repository@sha256:...`, `repository:tag@sha256:...`)."""
    repository, _, digest = reference.partition("@")
    tag = ""
    slash = repository.rfind("/")
    colon = repository.rfind(":")
    if colon > slash:  # a colon after the last slash is the tag's, not a registry port's
        repository, tag = repository[:colon], repository[colon + 1 :]
    entry = {"name": name, "newName": repository}
    if digest:
        entry["digest"] = digest
    elif tag:
        entry["newTag"] = tag
    return entry
