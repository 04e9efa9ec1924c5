"""The files `runyard dockerfile` and `runyard up` write, read back as Docker would."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runyard.cli import main
from runyard.deploy.compose import Deployment, nginx_listen, render_compose, render_nginx_conf
from runyard.deploy.dockerfile import DOCKERIGNORE, render_dockerfile
from runyard.deploy.images import stage_context
from runyard.deploy.instance import project_drain_timeout
from runyard.deploy.project import load_build_config
from runyard.deploy.stack import crashed_services, write_deployment
from runyard.domain.errors import ConfigError

WHEEL = "runyard-0.1.0-py3-none-any.whl"


def project(tmp_path: Path, **keys: object) -> Path:
    """A project folder with a graph file and a langgraph.json holding `keys`."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "graph.py").write_text("graph = None\n")
    config = {"graphs": {"agent": "./app/graph.py:graph"}, **keys}
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    return tmp_path / "langgraph.json"


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    return [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_dockerfile_follows_the_build_keys(tmp_path: Path) -> None:
    (tmp_path / "libs" / "tools").mkdir(parents=True)
    (tmp_path / "libs" / "tools" / "requirements.txt").write_text("httpx\n")
    (tmp_path / "libs" / "pkg").mkdir(parents=True)
    (tmp_path / "libs" / "pkg" / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    (tmp_path / "pip.conf").write_text("[global]\n")
    config = project(
        tmp_path,
        dependencies=[".", "inflection==0.5.1", "some pkg[extra]>=1", "./libs/tools", "./libs/pkg"],
        python_version="3.12",
        pip_config_file="pip.conf",
        dockerfile_lines=["RUN apt-get update && apt-get install -y curl"],
    )
    build = load_build_config(config)
    steps = instructions(render_dockerfile(build, WHEEL))
    home = f"/deps/{tmp_path.name}"

    assert steps[:2] == ["ARG BASE_IMAGE=python:3.12-slim", "FROM ${BASE_IMAGE}"]
    order = [
        "RUN python3 -m venv /opt/runyard",
        "RUN apt-get update && apt-get install -y curl",
        "ADD pip.conf /pipconfig.txt",
        f"COPY .runyard-dist/{WHEEL} /tmp/{WHEEL}",
        "RUN pip install inflection==0.5.1 'some pkg[extra]>=1'",
        f"ADD ./libs/tools/requirements.txt {home}/libs/tools/requirements.txt",
        f"RUN pip install -r {home}/libs/tools/requirements.txt",
        f"ADD . {home}",
        f"RUN pip install -e {home}/libs/pkg",
    ]
    assert [steps.index(step) for step in order] == sorted(steps.index(step) for step in order)
    assert "ENV PIP_CONFIG_FILE=/pipconfig.txt" in steps
    # "." has no pyproject.toml: copied and put on sys.path by the server, not pip-installed.
    assert f"RUN pip install -e {home}" not in steps
    assert f'ENV RUNYARD_CONFIG="{home}/langgraph.json" RUNYARD_DATA_DIR="/data"' in steps
    assert steps[-1] == 'CMD ["runyard", "serve", "--host", "0.0.0.0", "--port", "8000"]'


def test_a_generative_ui_is_built_in_a_node_stage_and_served_prebuilt(tmp_path: Path) -> None:
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "ui.tsx").write_text("export default {};\n")
    config = project(
        tmp_path,
        ui={"agent": "./web/ui.tsx"},
        ui_config={"shared": ["@acme/cards"]},
        node_version="22",
    )
    steps = instructions(render_dockerfile(load_build_config(config), WHEEL))
    home = f"/deps/{tmp_path.name}"

    ui_stage = [
        "ARG NODE_IMAGE=node:22-slim",
        "FROM ${NODE_IMAGE} AS ui",
        "WORKDIR /project",
        "ADD . /project",
        "RUN if [ -f package-lock.json ]; then npm ci; "
        "elif [ -f package.json ]; then npm install; fi",
        """ENV LANGGRAPH_UI='{"agent": "./web/ui.tsx"}' """
        """LANGGRAPH_UI_CONFIG='{"shared": ["@acme/cards"]}'""",
        "RUN npx --yes @langchain/langgraph-ui@1.5.1 build -o /ui",
        "FROM ${BASE_IMAGE}",
    ]
    assert steps[1 : 1 + len(ui_stage)] == ui_stage
    # The server's stage takes only the result: no Node.js, no npm, no build at start.
    server = steps[len(ui_stage) :]
    assert not any("npm" in step or "npx" in step or "NODE" in step for step in server)
    assert steps.index("COPY --from=ui /ui /opt/runyard-ui") > steps.index(f"ADD . {home}")
    assert (
        f'ENV RUNYARD_CONFIG="{home}/langgraph.json" RUNYARD_DATA_DIR="/data" '
        'RUNYARD_UI_DIR="/opt/runyard-ui" RUNYARD_UI_BUILD="false"'
    ) in steps


def test_no_ui_means_no_node_stage(tmp_path: Path) -> None:
    dockerfile = render_dockerfile(load_build_config(project(tmp_path)), WHEEL)
    assert "NODE_IMAGE" not in dockerfile and "npx" not in dockerfile
    assert "RUNYARD_UI" not in dockerfile


def test_runyards_dependencies_are_a_layer_before_its_wheel(tmp_path: Path) -> None:
    # A change to Runyard's code rebuilds the wheel's layer, not its dependencies'.
    build = load_build_config(project(tmp_path))
    steps = instructions(render_dockerfile(build, WHEEL, ["fastapi>=0.115", "uvicorn[standard]"]))
    start = steps.index("RUN pip install 'fastapi>=0.115' 'uvicorn[standard]'")
    assert steps[start + 1 : start + 3] == [
        f"COPY .runyard-dist/{WHEEL} /tmp/{WHEEL}",
        f"RUN pip install --no-deps /tmp/{WHEEL} && rm /tmp/{WHEEL}",
    ]
    # By default, what the installed Runyard requires, without its extras.
    default = " ".join(instructions(render_dockerfile(build, WHEEL)))
    assert "'fastapi>=" in default and "pytest" not in default


def test_default_python_version_is_the_usual_public_base(tmp_path: Path) -> None:
    steps = instructions(render_dockerfile(load_build_config(project(tmp_path)), WHEEL))
    assert steps[0] == "ARG BASE_IMAGE=python:3.11-slim"


def test_base_image_key_is_the_build_argument_default(tmp_path: Path) -> None:
    config = project(tmp_path, base_image="registry.example/python:3.12-bookworm")
    steps = instructions(render_dockerfile(load_build_config(config), WHEEL))
    assert steps[0] == "ARG BASE_IMAGE=registry.example/python:3.12-bookworm"


def test_a_module_path_graph_needs_no_file_in_the_project(tmp_path: Path) -> None:
    config = project(tmp_path, dependencies=["."])
    raw = json.loads(config.read_text())
    raw["graphs"]["other"] = "app.graph:graph"
    config.write_text(json.dumps(raw))
    assert load_build_config(config).project_name == tmp_path.name


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"python_version": "3.10"}, "too old"),
        ({"python_version": "latest"}, "major.minor"),
        ({"dependencies": ["../elsewhere"]}, "outside the project folder"),
        ({"dependencies": ["./missing"]}, "is not a folder"),
        ({"pip_config_file": "nope.conf"}, "does not exist"),
        ({"dockerfile_lines": "RUN x"}, "list of strings"),
        ({"node_version": "20.x"}, "'node_version' must be a major version"),
    ],
)
def test_unusable_build_keys_are_refused_naming_them(
    tmp_path: Path, keys: dict[str, object], message: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    root = tmp_path / "proj"
    root.mkdir()
    with pytest.raises(ConfigError, match=message):
        load_build_config(project(root, **keys))


def test_host_network_compose_runs_every_part_on_loopback() -> None:
    deployment = Deployment(image="runyard-x:latest", instances=3, network="host", port=8100)
    compose = yaml.safe_load(render_compose(deployment))
    services = compose["services"]
    instances = {f"runyard-{i}" for i in (1, 2, 3)}
    assert set(services) == {"postgres", "redis", "migrate", "lb"} | instances
    assert {s["network_mode"] for s in services.values()} == {"host"}
    assert not any("ports" in s or "networks" in s for s in services.values())
    commands = [services[f"runyard-{i}"]["command"] for i in (1, 2, 3)]
    assert [c[3:6] for c in commands] == [
        ["127.0.0.1", "--port", str(p)] for p in (8101, 8102, 8103)
    ]
    for i in (1, 2, 3):
        instance = services[f"runyard-{i}"]
        assert instance["image"] == "runyard-x:latest"
        assert instance["command"][:2] == ["runyard", "serve"]
        assert instance["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert instance["environment"]["DATABASE_URL"].endswith("@127.0.0.1:5433/runyard")
        assert instance["environment"]["REDIS_URL"] == "redis://127.0.0.1:6380/0"
    assert services["postgres"]["command"][-3:] == ["listen_addresses=127.0.0.1", "-p", "5433"]
    assert services["migrate"]["command"] == ["runyard", "migrate"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert deployment.url == "http://127.0.0.1:8100"
    assert nginx_listen(deployment) == "127.0.0.1:8100"


def test_bridge_network_compose_publishes_nginx_only() -> None:
    deployment = Deployment(image="runyard-x:latest", instances=2, port=8100)
    services = yaml.safe_load(render_compose(deployment))["services"]
    assert [name for name, s in services.items() if "ports" in s] == ["lb"]
    assert services["lb"]["ports"] == ["127.0.0.1:8100:8000"]  # loopback, as `serve` binds
    assert not any("network_mode" in s or "expose" in s for s in services.values())
    for name in ("runyard-1", "runyard-2"):
        instance = services[name]
        assert instance["command"][2:6] == ["--host", "0.0.0.0", "--port", "8000"]
        env = instance["environment"]
        assert env["DATABASE_URL"].endswith("@postgres:5432/runyard")
        assert env["REDIS_URL"] == "redis://redis:6379/0"
        # nginx is the gateway: the instances serve unauthenticated behind it.
        assert env["RUNYARD_ALLOW_UNAUTHENTICATED"] == "true"
        assert env["RUNYARD_INSTANCE"] == name
    assert services["redis"]["command"][-2:] == ["--protected-mode", "no"]
    # The password is interpolated from the .env beside the file, never written in it.
    password = services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password.startswith("${POSTGRES_PASSWORD:?")
    assert services["migrate"]["environment"]["DATABASE_URL"].startswith(
        f"postgresql://runyard:{password}@"
    )
    conf = render_nginx_conf(deployment.upstreams, nginx_listen(deployment))
    assert re.findall(r"server (\S+) max_fails", conf) == ["runyard-1:8000", "runyard-2:8000"]
    assert "listen 8000;" in conf
    published = Deployment(image="x", host="10.0.0.5", port=80)
    assert yaml.safe_load(render_compose(published))["services"]["lb"]["ports"] == [
        "10.0.0.5:80:8000"
    ]
    assert published.url == "http://10.0.0.5:80"


def test_images_and_the_projects_env_file_are_the_chosen_ones() -> None:
    deployment = Deployment(
        image="x",
        postgres_image="mirror.local/postgres:15",
        redis_image="mirror.local/redis:7",
        nginx_image="mirror.local/nginx:1",
        env_files=("../../.env",),
    )
    services = yaml.safe_load(render_compose(deployment))["services"]
    assert services["postgres"]["image"] == "mirror.local/postgres:15"
    assert services["redis"]["image"] == "mirror.local/redis:7"
    assert services["lb"]["image"] == "mirror.local/nginx:1"
    assert services["runyard-3"]["env_file"] == ["../../.env"]
    assert "env_file" not in services["migrate"]


def test_the_password_is_made_once_and_kept_private(tmp_path: Path) -> None:
    write_deployment(Deployment(image="x"), tmp_path)
    env = tmp_path / ".env"
    first = env.read_text()
    assert re.search(r"^POSTGRES_PASSWORD=[0-9a-f]{48}$", first, re.M)
    assert env.stat().st_mode & 0o777 == 0o600
    write_deployment(Deployment(image="x", network="host"), tmp_path)
    assert env.read_text() == first  # the database volume was initialised with it
    assert "POSTGRES_PASSWORD=" not in (tmp_path / "docker-compose.yml").read_text()


@pytest.mark.timeout(60)
def test_the_bridge_network_file_passes_docker_compose_config(tmp_path: Path) -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    (tmp_path / ".env").write_text("GREETING=hello\n")
    compose_file = write_deployment(
        Deployment(image="runyard-x:latest", env_files=("../.env",)), tmp_path / "up"
    )
    result = subprocess.run(
        [compose, "-p", "runyard-x", "-f", str(compose_file), "config"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)["services"]
    assert [name for name, s in resolved.items() if s.get("ports")] == ["lb"]
    assert resolved["runyard-1"]["environment"]["GREETING"] == "hello"
    password = (tmp_path / "up" / ".env").read_text().split("POSTGRES_PASSWORD=")[1].strip()
    assert resolved["postgres"]["environment"]["POSTGRES_PASSWORD"] == password


def test_nginx_spreads_over_the_instances_without_buffering() -> None:
    conf = render_nginx_conf([8101, 8102], "127.0.0.1:8100")
    assert re.findall(r"server (127\.0\.0\.1:\d+)", conf) == ["127.0.0.1:8101", "127.0.0.1:8102"]
    assert "listen 127.0.0.1:8100;" in conf
    assert "proxy_buffering off;" in conf
    assert "add_header X-Runyard-Upstream $upstream_addr always;" in conf


def test_down_without_a_deployment_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["down", "--config", str(config)])
    assert exited.value.code == 2
    assert "nothing to stop: no docker-compose.yml in" in capsys.readouterr().err


def test_up_without_compose_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(SystemExit) as exited:
        main(["up", "--config", str(config)])
    assert exited.value.code == 2
    assert "Docker Compose is not installed" in capsys.readouterr().err


def test_the_repository_compose_files_are_the_generated_ones() -> None:
    # docker-compose.yml and deploy/nginx.conf at the root are what `runyard up` writes for
    # the bundled examples; regenerate them with these calls when the generator changes.
    root = Path(__file__).resolve().parents[2]
    deployment = Deployment(image="runyard:latest")
    compose = render_compose(deployment, nginx_conf="./deploy/nginx.conf", header=REPO_HEADER)
    assert (root / "docker-compose.yml").read_text() == compose
    nginx = render_nginx_conf(deployment.upstreams, nginx_listen(deployment))
    assert (root / "deploy" / "nginx.conf").read_text() == nginx


REPO_HEADER = """# The repository's own deployment of the bundled examples:
#   docker build --network host -t runyard:latest .
#   echo "POSTGRES_PASSWORD=$(openssl rand -hex 24)" >> .env   then   docker compose up -d
# For your own project, run `runyard up` in its folder instead (see the README)."""


# --- .dockerignore ------------------------------------------------------------------------


def docker_ignores(patterns: str, path: str) -> bool:
    """Whether Docker leaves `path` out of the build context under these .dockerignore lines.

    Docker's rules: patterns are relative to the context root, `**` matches any number of
    folders, `*` anything within one name, a folder's exclusion covers what is inside it, a
    trailing `/` is dropped, and the last matching line wins (`!` re-includes).
    """
    ignored = False
    for raw in patterns.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        regex = "".join(
            ".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
            for part in re.split(r"(\*\*|\*)", pattern)
        ).replace(".*/", "(.*/)?")
        if re.fullmatch(f"{regex}(/.*)?", path):
            ignored = not negate
    return ignored


def test_dockerfile_writes_a_dockerignore_that_keeps_secrets_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    main(["dockerfile", "--config", str(config), str(tmp_path / "Dockerfile")])
    assert ".dockerignore" in capsys.readouterr().out
    patterns = (tmp_path / ".dockerignore").read_text()
    left_out = [
        ".env",
        ".env.local",
        "app/.env",
        ".runyard/runyard.sqlite",
        ".venv/bin/python",
        ".git/HEAD",
        "app/__pycache__/graph.cpython-311.pyc",
    ]
    kept = [
        "langgraph.json",
        "app/graph.py",
        ".env.example",
        f".runyard-dist/{next((tmp_path / '.runyard-dist').glob('*.whl')).name}",
        "requirements.txt",
    ]
    assert [p for p in left_out if not docker_ignores(patterns, p)] == []
    assert [p for p in kept if docker_ignores(patterns, p)] == []


def test_an_existing_dockerignore_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    (tmp_path / ".dockerignore").write_text("mine\n")
    main(["dockerfile", "--config", str(config), str(tmp_path / "Dockerfile")])
    assert (tmp_path / ".dockerignore").read_text() == "mine\n"
    assert "kept the existing" in capsys.readouterr().out


@pytest.mark.parametrize("existing", [None, "mine\n"], ids=["none", "own"])
def test_build_context_carries_the_dockerignore(tmp_path: Path, existing: str | None) -> None:
    # `runyard build` / `up` send a copy of the project: it gets the same .dockerignore.
    folder = tmp_path / "project"
    folder.mkdir()
    build = load_build_config(project(folder))
    (folder / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    if existing is not None:
        (folder / ".dockerignore").write_text(existing)
    context, _ = stage_context(build, tmp_path / "stage")
    written = (folder / ".dockerignore").read_text()
    assert written == (existing or DOCKERIGNORE)
    assert (context / ".dockerignore").read_text() == written


def test_up_tells_a_crashing_service_from_a_finished_migration() -> None:
    before = {"runyard-1": (2, "running", "0")}
    now = {
        "migrate": (0, "exited", "0"),  # done: that is its job
        "postgres": (0, "running", "0"),
        "runyard-1": (2, "running", "0"),  # restarted before `up`, not since
        "runyard-2": (1, "running", "0"),  # restarted since
        "runyard-3": (0, "restarting", "2"),
        "lb": (0, "exited", "1"),
    }
    assert crashed_services(before, now) == ["lb", "runyard-2", "runyard-3"]
    assert crashed_services({}, {"migrate": (0, "exited", "1")}) == ["migrate"]


def test_up_refuses_to_write_the_password_into_the_build_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["up", "--config", str(config), "--dir", str(tmp_path / "deploy")])
    assert exited.value.code == 2
    assert "inside the project folder" in capsys.readouterr().err
    assert not (tmp_path / "deploy").exists()


def test_a_missing_env_file_is_left_out_of_the_deployment(tmp_path: Path) -> None:
    """The official templates name `"env": ".env"` and ship no .env: `runyard dev` starts
    with a warning, so `runyard up` must too, never with Compose's "Couldn't find env file"."""
    build = load_build_config(project(tmp_path, env=".env"))
    up = tmp_path / ".runyard" / "up"
    assert build.env_files_for(up) == ()
    (tmp_path / ".env").write_text("OPENAI_API_KEY=x\n")
    assert build.env_files_for(up) == ("../../.env",)


def test_the_dockerignore_keeps_langgraph_dev_data_and_egg_info_out(tmp_path: Path) -> None:
    """`langgraph dev` 0.16.7 keeps its data in .langgraph_api/; `pip install -e .` leaves
    *.egg-info folders: neither belongs in an image."""
    left_out = [
        ".langgraph_api/.langgraph_checkpoint.1.pckl",
        "my_agent.egg-info/PKG-INFO",
        "src/my_agent.egg-info/SOURCES.txt",
    ]
    assert [p for p in left_out if not docker_ignores(DOCKERIGNORE, p)] == []
    folder = tmp_path / "project"
    folder.mkdir()
    config = project(folder)
    for path in left_out:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text("x")
    context, _ = stage_context(load_build_config(config), tmp_path / "stage")
    assert [p for p in left_out if (context / p).exists()] == []


def test_the_drain_the_project_asks_for_sets_the_stop_grace_period(tmp_path: Path) -> None:
    """WORKER_DRAIN_TIMEOUT in the project's env file reaches the instances, and compose
    waits for the whole drain and the hand-over before it kills one."""
    (tmp_path / ".env").write_text("WORKER_DRAIN_TIMEOUT=120\nOPENAI_API_KEY=sk-x\n")
    build = load_build_config(project(tmp_path, env=".env"))
    drain = project_drain_timeout(build.env, build.env_source)
    assert drain == 120
    services = yaml.safe_load(render_compose(Deployment(image="x", drain_timeout=drain)))
    instance = services["services"]["runyard-1"]
    assert instance["environment"]["WORKER_DRAIN_TIMEOUT"] == "120"
    assert instance["stop_grace_period"] == "130s"
    # Nothing asked: the default drain, as before.
    default = yaml.safe_load(render_compose(Deployment(image="x")))["services"]["runyard-1"]
    assert default["environment"]["WORKER_DRAIN_TIMEOUT"] == "30"
    assert default["stop_grace_period"] == "40s"


@pytest.mark.parametrize(
    ("env", "drain"),
    [
        ({"BG_JOB_SHUTDOWN_GRACE_PERIOD_SECS": "45"}, 45.0),
        ({"WORKER_DRAIN_TIMEOUT": "10", "BG_JOB_SHUTDOWN_GRACE_PERIOD_SECS": "45"}, 10.0),
        ({"WORKER_DRAIN_TIMEOUT": "2.5"}, 2.5),
        ({}, 30.0),
    ],
)
def test_the_drain_is_read_under_either_name(env: dict[str, str], drain: float) -> None:
    assert project_drain_timeout(env, "langgraph.json") == drain


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_an_unusable_drain_is_refused_naming_where_it_is(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^\.env: WORKER_DRAIN_TIMEOUT must be a number"):
        project_drain_timeout({"WORKER_DRAIN_TIMEOUT": value}, ".env")
