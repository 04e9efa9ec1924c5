"""The flags a LangGraph CLI user types out of habit, and `validate` and `new`.

Reference: langgraph-cli 0.4.40 takes `langgraph dev --no-browser`, `langgraph up -p/--port`
(default 8123), `--watch`, `--wait`, `--pull/--no-pull`, `langgraph build --no-pull`,
`langgraph dockerfile --add-docker-compose`, `langgraph validate` and `langgraph new`; its
click commands match no abbreviation and report an unknown flag with the command's own usage.
Runyard answered `unrecognized arguments` or `invalid choice`, took `up --wait` for
`--wait-timeout`, and printed the top-level usage.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from runyard.app.factory import create_app
from runyard.cli import build_parser, main
from runyard.settings import Settings


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["dev", "--no-browser", "-p", "3000"], {"no_browser": True, "port": 3000}),
        (["serve", "-p", "9000"], {"port": 9000}),
        (["up"], {"port": 8123, "pull": False, "wait": False, "watch": False}),
        (
            ["up", "-p", "9000", "--wait", "--watch", "--no-pull"],
            {"port": 9000, "wait": True, "watch": True, "pull": False},
        ),
        (["up", "--pull", "--offline"], {"pull": True, "offline": True}),
        (["build", "--no-pull"], {"pull": False}),
        (["build", "--ca-certificates"], {"ca_certificates": "host"}),
        (["dockerfile", "--add-docker-compose", "Dockerfile"], {"add_docker_compose": True}),
        (["validate", "-c", "x.json"], {"config": Path("x.json")}),
        (["new", "my-app"], {"path": Path("my-app"), "template": "new-langgraph-project-python"}),
    ],
)
def test_langgraph_cli_habits_are_taken(argv: list[str], expected: dict[str, object]) -> None:
    args = build_parser().parse_args(argv)
    assert {key: getattr(args, key) for key in expected} == expected


@pytest.mark.parametrize(
    ("argv", "usage", "unknown"),
    [
        (["up", "--wait-t", "5"], "usage: runyard up ", "--wait-t"),  # no abbreviation
        (["up", "--inst", "2"], "usage: runyard up ", "--inst"),
        (["dev", "--tunnel"], "usage: runyard dev ", "--tunnel"),
        (["migrate", "--bogus"], "usage: runyard migrate ", "--bogus"),
    ],
)
def test_an_unknown_flag_gets_the_commands_own_usage(
    argv: list[str], usage: str, unknown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    assert f"unrecognized arguments: {unknown}" in err


def write_project(folder: Path, config: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text("graph = object()\n")
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


def test_validate_passes_a_config_that_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "libs").mkdir()
    config = write_project(
        tmp_path, {"graphs": {"agent": "./agent.py:graph"}, "dependencies": [".", "./libs"]}
    )
    main(["validate", "-c", str(config)])
    assert "is valid (1 graph(s): agent)" in capsys.readouterr().out


def test_validate_lists_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_project(
        tmp_path,
        {
            "graphs": {"agent": "./agent.py:missing", "other": "./nope.py:graph"},
            "auth": {"path": "./auth.py:auth"},
            "http": {"app": "./agent.py:graph"},
            "dependencies": ["./libs"],
        },
    )
    with pytest.raises(SystemExit) as exited:
        main(["validate", "-c", str(config)])
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "has 4 problems" in out, out
    assert "graph 'agent': ./agent.py defines no 'missing' at its top level" in out
    assert "graph 'other': ./nope.py does not exist" in out
    assert "auth.path: ./auth.py does not exist" in out
    assert "dependency ./libs" in out
    assert "http.app" not in out  # that one is there


def test_validate_refuses_an_unknown_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_project(tmp_path, {"graphs": {"agent": "./agent.py:graph"}, "grpahs": {}})
    with pytest.raises(SystemExit) as exited:
        main(["validate", "-c", str(config)])
    assert exited.value.code == 1
    assert "unknown key 'grpahs'" in capsys.readouterr().out


async def test_new_writes_a_project_that_validates_and_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "my-app"
    main(["new", str(folder)])
    main(["validate", "-c", str(folder / "langgraph.json")])
    assert "is valid (1 graph(s): agent)" in capsys.readouterr().out
    settings = Settings(
        DATABASE_URL="",
        REDIS_URL="",
        RUNYARD_DATA_DIR=tmp_path / "data",
        RUNYARD_CONFIG=folder / "langgraph.json",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runyard") as http:
            body = {
                "assistant_id": "agent",
                "input": {"text": "you"},
                "context": {"greeting": "Hi"},
            }
            answer = await http.post("/runs/wait", json=body)
            assert answer.json() == {"text": "you", "answer": "Hi, you!"}
    with pytest.raises(SystemExit):
        main(["new", str(folder)])  # not into a folder that has files
    assert "is not empty" in capsys.readouterr().err
