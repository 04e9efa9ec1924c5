"""`runyard up` finds its own way: no image registry, a TLS-inspecting proxy, loopback.

Reference: a first `runyard up` on a machine with no route to Docker Hub failed with
`registry-1.docker.io ... no such host` and nothing pointing to `runyard base-images`; behind
a TLS-inspecting proxy the image's pip failed with CERTIFICATE_VERIFY_FAILED and nothing
pointing to `--ca-certificates`; once up, nginx was published on 0.0.0.0. The docker output
below is what Docker 26 (BuildKit and the classic daemon), Compose v2 and pip print.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from runyard.cli import main
from runyard.deploy.compose import Deployment, render_compose
from runyard.deploy.docker_output import failure_hint
from runyard.deploy.dockerfile import CA_PATH, render_dockerfile
from runyard.deploy.images import DeployError, build_image, host_ca_bundle, stage_context
from runyard.deploy.project import load_build_config

REGISTRY_UNREACHABLE = [
    "ERROR: failed to solve: python:3.11-slim: failed to resolve source metadata for "
    'docker.io/library/python:3.11-slim: failed to do request: Head "https://registry-1.docker.io'
    '/v2/library/python/manifests/3.11-slim": dial tcp: lookup registry-1.docker.io on '
    "127.0.0.53:53: no such host",
    'Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request '
    "canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)",
    'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp '
    "54.236.113.205:443: i/o timeout",
    ' postgres Error Get "https://registry-1.docker.io/v2/": dial tcp: lookup '
    "registry-1.docker.io: Temporary failure in name resolution",
    'Error response from daemon: Get "https://registry-1.docker.io/v2/": tls: failed to verify '
    "certificate: x509: certificate signed by unknown authority",
]
CERTIFICATE_FAILURES = [
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) "
    "after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: "
    "CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate in "
    "certificate chain (_ssl.c:1006)'))': /simple/fastapi/",
    "curl: (60) SSL certificate problem: unable to get local issuer certificate",
]
UNRELATED = [
    "ERROR: Could not find a version that satisfies the requirement nosuchpkg "
    "(from versions: none)",
    'ERROR: failed to solve: process "/bin/sh -c pip install -e /deps/app" did not complete '
    "successfully: exit code: 1",
]


@pytest.mark.parametrize("line", REGISTRY_UNREACHABLE)
def test_an_unreachable_registry_points_to_base_images_and_offline(line: str) -> None:
    hint = failure_hint(f"#1 [internal] load build definition\n{line}\n")
    assert hint is not None
    assert "runyard base-images" in hint and "--offline" in hint
    assert line.strip()[:60] in hint  # the line that shows it is quoted


@pytest.mark.parametrize("line", CERTIFICATE_FAILURES)
def test_a_certificate_failure_in_the_build_points_to_ca_certificates(line: str) -> None:
    hint = failure_hint(f"#9 [5/9] RUN pip install fastapi\n{line}\n")
    assert hint is not None
    assert "--ca-certificates" in hint
    assert "base-images" not in hint


@pytest.mark.parametrize("line", UNRELATED)
def test_other_failures_get_no_hint(line: str) -> None:
    assert failure_hint(line) is None


def project(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "agent.py").write_text("graph = None\n")
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}}))
    return config


def fake_docker(tmp_path: Path, output: str) -> list[str]:
    """A `docker` that prints what a failing one printed, and fails."""
    script = tmp_path / "bin" / "docker"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return [str(script)]


def test_a_failed_build_says_what_docker_showed_and_what_to_do(tmp_path: Path) -> None:
    build = load_build_config(project(tmp_path / "app"))
    docker = fake_docker(tmp_path, REGISTRY_UNREACHABLE[0])
    with pytest.raises(DeployError) as failed:
        build_image(build, "runyard-app:latest", docker=docker)
    message = str(failed.value)
    assert message.startswith("docker build failed with exit code 1: the image registry")
    assert "runyard up --offline" in message


def test_the_ca_bundle_is_trusted_before_any_download(tmp_path: Path) -> None:
    build = load_build_config(project(tmp_path / "app"))
    bundle = tmp_path / "proxy-ca.crt"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
    context, dockerfile = stage_context(build, tmp_path / "stage", bundle)
    assert (context / ".runyard-dist" / "ca-certificates.crt").read_text() == bundle.read_text()
    lines = dockerfile.read_text().splitlines()
    trust = lines.index(f"COPY .runyard-dist/ca-certificates.crt {CA_PATH}")
    first_download = next(i for i, line in enumerate(lines) if line.startswith("RUN "))
    assert trust < first_download
    assert f"PIP_CERT={CA_PATH}" in lines[trust + 1]
    assert f"SSL_CERT_FILE={CA_PATH}" in lines[trust + 1]
    assert "ca-certificates" not in render_dockerfile(build, "runyard.whl")


def test_without_a_path_the_machines_own_bundle_is_read() -> None:
    bundle = host_ca_bundle()
    assert bundle.is_file()
    assert b"BEGIN CERTIFICATE" in bundle.read_bytes()


def test_up_refuses_a_ca_bundle_that_is_not_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["up", "-c", str(config), "--ca-certificates", str(tmp_path / "none.crt")])
    assert exited.value.code == 2
    assert f"--ca-certificates {tmp_path / 'none.crt'}: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("host", "published"),
    [(None, "127.0.0.1:8123:8000"), ("0.0.0.0", "0.0.0.0:8123:8000"), ("::", "[::]:8123:8000")],
)
def test_nginx_is_published_on_loopback_unless_host_says_otherwise(
    host: str | None, published: str
) -> None:
    deployment = Deployment(image="x", host=host, port=8123)
    services = yaml.safe_load(render_compose(deployment))["services"]
    assert services["lb"]["ports"] == [published]
