"""The folder `runyard k8s` writes: rendered by kustomize, accepted by Kubernetes' schemas,
and keeping the promises of `runyard up` (drain within the grace period, probes, migrations
first, secrets by reference)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from runyard.app.factory import create_app
from runyard.cli import main
from runyard.deploy.compose import Deployment, render_compose
from runyard.deploy.dockerfile import IMAGE_UID, render_dockerfile
from runyard.deploy.kubernetes.app import image_entry, kube_name
from runyard.deploy.kubernetes.workload import OPTIONAL_SECRETS
from runyard.deploy.project import load_build_config
from runyard.settings import Settings

# Kubernetes releases the manifests must be accepted by: the oldest supported one whose
# schemas have the kubelet's `sleep` pre-stop action enabled by default, and the newest.
KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")
IMAGE = "registry.example.com/team/agent:1.4.2"
# Values in the project's env file: secrets that must never reach a manifest.
SECRET_VALUES = ("sk-live-4f1c0ffee4f1c0ffee", "jwt-signing-9a8b7c6d5e")
ENV_FILE = f"OPENAI_API_KEY={SECRET_VALUES[0]}\nAUTH_JWT_SECRET={SECRET_VALUES[1]}\n"


def project(folder: Path, env: str = ENV_FILE, **keys: object) -> Path:
    """A project folder with a graph, an env file holding secrets, and a langgraph.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.py").write_text("graph = None\n")
    (folder / ".env").write_text(env)
    config = {"graphs": {"agent": "./graph.py:graph"}, "env": ".env", **keys}
    (folder / "langgraph.json").write_text(json.dumps(config))
    return folder / "langgraph.json"


def generate(tmp_path: Path, env: str = ENV_FILE, **keys: object) -> Path:
    """`runyard k8s` of a new project; the folder it wrote."""
    config = project(tmp_path / "agent", env, **keys)
    out = tmp_path / "out"
    main(["k8s", "-c", str(config), "-o", str(out), "-t", IMAGE])
    return out


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of a file."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def base(folder: Path) -> dict[str, dict[str, Any]]:
    """The base's resources by kind, as its kustomization lists them."""
    kustomization = documents(folder / "base" / "kustomization.yaml")[0]
    resources = [
        d for name in kustomization["resources"] for d in documents(folder / "base" / name)
    ]
    by_kind = {doc["kind"]: doc for doc in resources}
    assert len(by_kind) == len(resources), "one resource of each kind"
    return by_kind


def pod_templates(folder: Path) -> dict[str, dict[str, Any]]:
    """Every pod template the folder defines (base and trial), by workload name."""
    files = [*(folder / "base").glob("*.yaml"), *(folder / "trial").glob("*.yaml")]
    found = {}
    for doc in (d for path in files for d in documents(path)):
        if doc["kind"] in ("Deployment", "Job", "StatefulSet"):
            found[doc["metadata"]["name"]] = doc["spec"]["template"]
    return found


def container(resource: dict[str, Any]) -> dict[str, Any]:
    """The one container of a workload."""
    (only,) = resource["spec"]["template"]["spec"]["containers"]
    return only


def kubectl_kustomize(folder: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize folder`, parsed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: it renders kustomizations (kubectl kustomize)")
    result = subprocess.run(
        [kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def schema_errors(doc: dict[str, Any], version: str) -> str | None:
    """What Kubernetes `version`'s strict schema (no unknown field) finds wrong, or None."""
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{doc['kind']} at {'.'.join(map(str, exc.path))}: {exc.message}"
    return None


# --- rendering and schemas -------------------------------------------------------------


@pytest.mark.timeout(120)
def test_kustomize_renders_the_folder_and_both_releases_accept_every_object(
    tmp_path: Path,
) -> None:
    out = generate(tmp_path)
    rendered = kubectl_kustomize(out)
    trial = kubectl_kustomize(out / "trial")
    kinds = ["Deployment", "Job", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"]
    assert sorted(d["kind"] for d in rendered) == sorted([*kinds, "NetworkPolicy"])
    assert len(trial) == len(rendered) + 5  # two StatefulSets, two Services, a NetworkPolicy
    errors = [
        error
        for version in KUBERNETES_VERSIONS
        for doc in [*rendered, *trial]
        if (error := schema_errors(doc, version))
    ]
    assert errors == []
    # What kustomize renders is the files with the image put in: the tests below, which
    # read the files, read what a cluster gets.
    files = base(out)
    for doc in rendered:
        written = files[doc["kind"]]
        if doc["kind"] in ("Deployment", "Job"):
            assert container(doc)["image"] == IMAGE
            container(written)["image"] = IMAGE
        assert doc == written
    images = {container(d)["image"] for d in trial if d["kind"] == "StatefulSet"}
    assert images == {"postgres:15", "redis:7"}


def test_the_strict_schemas_refuse_what_a_cluster_would(tmp_path: Path) -> None:
    # The validation above can fail: an unknown field, or a number where a name goes.
    deployment = base(generate(tmp_path))["Deployment"]
    container(deployment)["terminationGracePeriod"] = 60
    misplaced = json.loads(json.dumps(base(tmp_path / "out")["Service"]))
    misplaced["spec"]["ports"][0]["protocol"] = 6
    for version in KUBERNETES_VERSIONS:
        assert "terminationGracePeriod" in (schema_errors(deployment, version) or "")
        assert schema_errors(misplaced, version) is not None


# --- the promises of `runyard up` ------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "drain"), [(ENV_FILE, 30.0), (ENV_FILE + "WORKER_DRAIN_TIMEOUT=300\n", 300.0)]
)
def test_the_grace_period_outlasts_the_pause_the_drain_and_the_handover(
    tmp_path: Path, env: str, drain: float
) -> None:
    deployment = base(generate(tmp_path, env))["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    server = container(deployment)
    written = {e["name"]: e.get("value") for e in server["env"]}
    assert float(written["WORKER_DRAIN_TIMEOUT"]) == drain
    pause = server["lifecycle"]["preStop"]["sleep"]["seconds"]
    # The kubelet counts the pre-stop pause inside the grace period; after the drain the
    # instance still hands its unfinished runs back (up to 10 s).
    assert pod["terminationGracePeriodSeconds"] >= pause + drain + 10
    # A rolling update starts a new pod before it stops an old one.
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_pods_run_the_command_and_environment_of_runyard_up(tmp_path: Path) -> None:
    out = generate(tmp_path)
    resources = base(out)
    compose = yaml.safe_load(render_compose(Deployment(image=IMAGE)))["services"]
    up, up_migrate = compose["runyard-1"], compose["migrate"]
    server, migrate = container(resources["Deployment"]), container(resources["Job"])

    assert server["command"] == up["command"]
    assert migrate["command"] == up_migrate["command"]
    env = {e["name"]: e for e in server["env"]}
    literal = {name: e["value"] for name, e in env.items() if "value" in e}
    by_reference = set(env) - set(literal)
    # The same variables; the same values where a value is written; the rest by reference.
    assert set(env) == set(up["environment"]) | set(OPTIONAL_SECRETS)
    assert literal == {k: v for k, v in up["environment"].items() if k in literal}
    assert by_reference == {"DATABASE_URL", "REDIS_URL", "RUNYARD_INSTANCE", *OPTIONAL_SECRETS}
    assert env["RUNYARD_INSTANCE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert [e["name"] for e in migrate["env"]] == list(up_migrate["environment"])
    # The image `runyard build -t` made, put in by kustomize.
    kustomization = documents(out / "base" / "kustomization.yaml")[0]
    assert kustomization["images"] == [image_entry(server["image"], IMAGE)]
    assert migrate["image"] == server["image"] == kube_name("agent")


def test_the_probes_ask_routes_the_server_has(tmp_path: Path) -> None:
    # That they answer, on a real instance started as the pod starts: tests/integration/
    # test_kubernetes_pod.py.
    server = container(base(generate(tmp_path))["Deployment"])
    config = tmp_path / "agent" / "langgraph.json"
    app = create_app(Settings(RUNYARD_CONFIG=config, RUNYARD_DATA_DIR=tmp_path / "data"))
    routes = {route.path for route in app.routes if "GET" in getattr(route, "methods", ())}
    ports = {port["name"] for port in server["ports"]}
    probes = [server[name] for name in ("startupProbe", "readinessProbe", "livenessProbe")]
    assert [probe["httpGet"]["path"] for probe in probes] == ["/livez", "/readyz", "/livez"]
    assert all(probe["httpGet"]["path"] in routes for probe in probes)
    assert all(probe["httpGet"]["port"] in ports for probe in probes)


def test_migrations_run_in_a_job_the_instances_do_not_wait_for(tmp_path: Path) -> None:
    out = generate(tmp_path)
    resources = base(out)
    job, deployment = resources["Job"], resources["Deployment"]
    assert container(job)["command"] == ["runyard", "migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    # The instances never migrate, and nothing ties them to the Job: an old schema stops
    # them with a message, and they start once the Job has run.
    server = container(deployment)
    assert "--no-migrate" in server["command"]
    assert {"name": "RUNYARD_MIGRATE_ON_START", "value": "false"} in server["env"]
    assert "initContainers" not in deployment["spec"]["template"]["spec"]
    assert job["metadata"]["name"] not in json.dumps(deployment)
    kustomization = documents(out / "base" / "kustomization.yaml")[0]
    assert kustomization["resources"][0] == "migrate-job.yaml"
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == (
        "migrate"
    )


def test_no_secret_value_is_written_anywhere(tmp_path: Path) -> None:
    out = generate(tmp_path)
    texts = {path: path.read_text() for path in out.rglob("*") if path.is_file()}
    assert [p for p, text in texts.items() for v in SECRET_VALUES if v in text] == []
    resources = base(out)
    assert "Secret" not in resources
    secrets = {"DATABASE_URL", "REDIS_URL", *OPTIONAL_SECRETS}
    for workload in (resources["Deployment"], resources["Job"]):
        for entry in container(workload)["env"]:
            if entry["name"] in secrets:
                assert set(entry) == {"name", "valueFrom"}, entry
                assert set(entry["valueFrom"]) == {"secretKeyRef"}
    # The example names the project's variables and holds only placeholders.
    (example,) = documents(out / "secret.example.yaml")
    assert {"OPENAI_API_KEY", "AUTH_JWT_SECRET", "DATABASE_URL"} <= set(example["stringData"])
    assert all(re.search(r"<[^>]+>", value) for value in example["stringData"].values())
    assert "data" not in example


def test_pods_run_as_the_images_user_with_resources_set(tmp_path: Path) -> None:
    out = generate(tmp_path)
    dockerfile = render_dockerfile(load_build_config(tmp_path / "agent" / "langgraph.json"), "w")
    assert f"--uid {IMAGE_UID} runyard" in dockerfile
    templates = pod_templates(out)
    assert len(templates) == 4  # the instances, the Job, the trial PostgreSQL and Redis
    for name, template in templates.items():
        pod = template["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert pod["automountServiceAccountToken"] is False, name
        for each in pod["containers"]:
            security = each["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            assert {"cpu", "memory"} <= set(each["resources"]["requests"]), name
            assert "memory" in each["resources"]["limits"], name
    for workload in (base(out)["Deployment"], base(out)["Job"]):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == IMAGE_UID
        (each,) = pod["containers"]
        assert each["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"cpu", "memory"} <= set(each["resources"]["limits"])
        # Written only where a volume is: temporary files.
        assert each["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
        assert [v["emptyDir"] for v in pod["volumes"]] == [{"sizeLimit": "1Gi"}]


def test_a_budget_an_autoscaler_and_a_network_policy_guard_the_instances(
    tmp_path: Path,
) -> None:
    resources = base(generate(tmp_path))
    deployment = resources["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    job_labels = resources["Job"]["spec"]["template"]["metadata"]["labels"]
    budget, scaler = resources["PodDisruptionBudget"], resources["HorizontalPodAutoscaler"]
    policy = resources["NetworkPolicy"]["spec"]

    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert budget["spec"]["maxUnavailable"] == 1
    assert scaler["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert scaler["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in scaler["spec"]["metrics"]] == ["cpu"]
    assert "replicas" not in deployment["spec"]  # the autoscaler owns the count
    # Both the instances and the Job are held by the policy.
    selected = policy["podSelector"]["matchLabels"].items()
    assert selected <= pod_labels.items() and selected <= job_labels.items()
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["ingress"]
    assert ingress["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    ]
    ports = [(p["protocol"], p["port"]) for rule in policy["egress"] for p in rule["ports"]]
    # DNS, PostgreSQL, Redis, and webhooks (http and https: the project sets no rule).
    dns = [("UDP", 53), ("TCP", 53)]
    assert ports == [*dns, ("TCP", 5432), ("TCP", 6379), ("TCP", 80), ("TCP", 443)]
    webhooks = policy["egress"][-1]["to"]
    assert "169.254.0.0/16" in webhooks[0]["ipBlock"]["except"]  # no cloud metadata service


def test_the_webhook_egress_is_what_the_project_allows(tmp_path: Path) -> None:
    url = {"allowed_ports": [8443, 443], "disable_private_ips": False}
    out = generate(tmp_path, webhooks={"url": url})
    (*_, webhooks) = base(out)["NetworkPolicy"]["spec"]["egress"]
    assert webhooks["ports"] == [{"protocol": "TCP", "port": p} for p in (443, 8443)]
    assert webhooks["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]


def test_trial_servers_are_apart_and_labelled_trial_only(tmp_path: Path) -> None:
    out = generate(tmp_path)
    trial = [d for path in (out / "trial").glob("*.yaml") for d in documents(path)]
    kustomization = next(d for d in trial if d["kind"] == "Kustomization")
    assert kustomization["resources"][0] == "../base"
    for doc in (d for d in trial if d["kind"] != "Kustomization"):
        assert doc["metadata"]["labels"]["runyard-trial-only"] == "true", doc["kind"]
        assert "trials only" in doc["metadata"]["annotations"]["runyard/warning"]
    for doc in base(out).values():
        assert "runyard-trial-only" not in json.dumps(doc)


def test_k8s_leaves_a_folder_it_did_not_write_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path / "agent")
    mine = tmp_path / "deploy"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text("resources: [app.yaml]\n")
    with pytest.raises(SystemExit) as exited:
        main(["k8s", "-c", str(config), "-o", str(mine)])
    assert exited.value.code == 2
    assert "was not written by `runyard k8s`" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["kustomization.yaml"]


def test_k8s_writes_beside_the_config_and_can_write_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path / "agent")
    main(["k8s", "-c", str(config)])
    main(["k8s", "-c", str(config)])  # its own folder: written again
    folder = tmp_path / "agent" / "k8s"
    assert (folder / "kustomization.yaml").is_file()
    kustomization = documents(folder / "base" / "kustomization.yaml")[0]
    assert kustomization["images"] == [
        {"name": "runyard-agent", "newName": "runyard-agent", "newTag": "latest"}
    ]
    assert "kubectl apply -k" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("reference", "entry"),
    [
        ("runyard-agent:latest", {"newName": "runyard-agent", "newTag": "latest"}),
        ("registry:5000/team/agent", {"newName": "registry:5000/team/agent"}),
        ("registry:5000/team/agent:2", {"newName": "registry:5000/team/agent", "newTag": "2"}),
        ("agent@sha256:ab12", {"newName": "agent", "digest": "sha256:ab12"}),
        ("agent:1@sha256:ab12", {"newName": "agent", "digest": "sha256:ab12"}),
    ],
)
def test_the_image_reference_becomes_a_kustomize_entry(
    reference: str, entry: dict[str, str]
) -> None:
    assert image_entry("runyard-agent", reference) == {"name": "runyard-agent", **entry}


@pytest.mark.parametrize(
    ("project_name", "name"),
    [
        ("agent", "runyard-agent"),
        ("My_Project.v2", "runyard-my-project-v2"),
        ("---", "runyard"),
        ("a" * 80, "runyard-" + "a" * 32),
    ],
)
def test_resource_names_are_what_kubernetes_accepts(project_name: str, name: str) -> None:
    assert kube_name(project_name) == name


# --- the documentation's overlays ------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"


def documented_files() -> dict[str, str]:
    """The files docs/kubernetes.md shows: YAML blocks whose first line names their path."""
    blocks = re.findall(r"```yaml\n# (deploy/\S+)\n(.*?)```", DOCS.read_text(), re.S)
    return {path: text for path, text in blocks}


@pytest.mark.timeout(120)
def test_the_overlays_the_documentation_shows_render_and_validate(tmp_path: Path) -> None:
    files = documented_files()
    assert sorted(files) == [
        "deploy/keda/kustomization.yaml",
        "deploy/keda/scaledobject.yaml",
        "deploy/production/ingress.yaml",
        "deploy/production/kustomization.yaml",
    ]
    # The documentation's project: `agent/`, its image, the generated folder beside deploy/.
    config = project(tmp_path / "agent")
    main(["k8s", "-c", str(config), "-t", IMAGE])
    for path, text in files.items():
        (tmp_path / "agent" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "agent" / path).write_text(text)
    production = kubectl_kustomize(tmp_path / "agent" / "deploy" / "production")
    keda = kubectl_kustomize(tmp_path / "agent" / "deploy" / "keda")
    errors = [
        error
        for version in KUBERNETES_VERSIONS
        for doc in production + [d for d in keda if d["kind"] != "ScaledObject"]
        if (error := schema_errors(doc, version))
    ]
    assert errors == []
    assert {doc["metadata"]["namespace"] for doc in production + keda} == {"agents"}
    workloads = [doc for doc in production if doc["kind"] in ("Deployment", "Job")]
    assert {container(doc)["image"].split("@")[0] for doc in workloads} == {IMAGE.split(":")[0]}
    assert all("@sha256:" in container(doc)["image"] for doc in workloads)
    (policy,) = [doc for doc in production if doc["kind"] == "NetworkPolicy"]
    database, cache = policy["spec"]["egress"][1:3]
    assert database["to"] == [{"ipBlock": {"cidr": "10.20.0.5/32"}}]
    assert cache["ports"] == [{"protocol": "TCP", "port": 6379}]
    kinds = sorted(doc["kind"] for doc in keda)
    assert "HorizontalPodAutoscaler" not in kinds and "ScaledObject" in kinds
