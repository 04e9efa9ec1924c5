"""A project's deployment on Kubernetes, read from its config: names, drain, egress, variables."""

from __future__ import annotations

from pathlib import Path

from runyard.deploy.instance import instance_environment, project_drain_timeout
from runyard.deploy.kubernetes.app import DEFAULT_INGRESS_NAMESPACE, KubeApp, kube_name
from runyard.deploy.kubernetes.workload import OPTIONAL_SECRETS
from runyard.deploy.project import BuildConfig
from runyard.domain.webhook_policy import WebhookPolicy

HTTP_PORTS = (80, 443)
HTTPS_PORTS = (443,)


def project_app(
    build: BuildConfig, image: str, ingress_namespace: str = DEFAULT_INGRESS_NAMESPACE
) -> KubeApp:
    """The KubeApp of a project whose pods run `image`."""
    policy = build.webhook_policy
    return KubeApp(
        name=kube_name(build.project_name),
        image=image,
        drain_timeout=project_drain_timeout(build.env, build.env_source),
        ingress_namespace=ingress_namespace,
        egress_ports=egress_ports(policy),
        egress_private=not policy.disable_private_ips,
        project_variables=project_variables(build),
    )


def egress_ports(policy: WebhookPolicy) -> tuple[int, ...]:
    """The ports webhooks may be sent to: those `webhooks.url.allowed_ports` lists, else
    443, and 80 too unless https is required."""
    if policy.allowed_ports:
        return tuple(sorted(set(policy.allowed_ports)))
    return HTTPS_PORTS if policy.require_https else HTTP_PORTS


def project_variables(build: BuildConfig) -> tuple[str, ...]:
    """The names in the project's env file (or, when it has none yet, in the `.example` file
    beside it) that the manifests do not set themselves."""
    if build.env_file is None:
        return ()
    candidates = [build.env_file, Path(f"{build.env_file}.example")]
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        return ()
    from dotenv import dotenv_values

    names = list(dotenv_values(found))
    # The variables' names only: the values given here are never read.
    set_here = {*instance_environment("", "", "", 0), *OPTIONAL_SECRETS}
    return tuple(name for name in names if name not in set_here)
