"""The benchmark harness runs each scenario against a live server and prints one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5


def _bench(url: str, scenario: str, *extra: str) -> tuple[int, list[dict[str, Any]], str]:
    args = [sys.executable, "-m", "bench.run", "--url", url, "--scenario", scenario, *extra]
    # The test config has no `noop` graph; `pipeline` is a short graph every backend serves.
    args += ["--runs", str(RUNS), "--concurrency", "3", "--warmup", "1"]
    args += ["--assistant", "pipeline", "--input", json.dumps({"text": "one two three"})]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=90)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, lines, done.stderr[-3000:]


def _assert_latencies(leg: dict[str, Any]) -> None:
    assert leg["n"] == RUNS
    assert leg["errors"] == 0
    for key in ("p50_ms", "p95_ms", "p99_ms"):
        assert leg[key] > 0, key
    assert leg["p50_ms"] <= leg["p95_ms"] <= leg["p99_ms"]


@pytest.mark.parametrize("scenario", ["throughput", "wait", "stream"])
def test_scenario_prints_one_json_line_of_figures(server: ServerProcess, scenario: str) -> None:
    code, lines, stderr = _bench(server.url, scenario)

    assert code == 0, stderr
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line["scenario"] == scenario
    assert line["target"] == server.url
    assert line["mode"] == "external"
    assert line["errors"] == 0
    if scenario == "throughput":
        assert line["total"] == RUNS
        assert line["concurrency"] == 3
        assert line["runs_per_s"] > 0
        assert line["elapsed_s"] > 0
    else:
        single = "sequential" if scenario == "wait" else "alone"
        _assert_latencies(line[single])
        _assert_latencies(line["concurrent"])
        assert line["concurrent"]["concurrency"] == 3


def test_session_scenario_prints_its_cost_beside_runs_stream(server: ServerProcess) -> None:
    code, lines, stderr = _bench(server.url, "session")

    assert code == 0, stderr
    (line,) = lines
    assert line["scenario"] == "session" and line["errors"] == 0
    assert line["session"]["errors"] == 0 and line["session"]["n"] > 0
    assert line["session_cpu_ms_per_run"] > 0 and line["runs_stream_cpu_ms_per_run"] > 0
    assert line["session_over_runs_stream"] == pytest.approx(
        line["session_cpu_ms_per_run"] / line["runs_stream_cpu_ms_per_run"], rel=0.01
    )


def test_unknown_assistant_is_reported_as_a_failure(server: ServerProcess) -> None:
    args = [sys.executable, "-m", "bench.run", "--url", server.url, "--scenario", "wait"]
    args += ["--runs", "2", "--assistant", "no-such-graph"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1
    line = json.loads(done.stdout)
    assert line["errors"] >= 1
    assert "failure" in line


def test_joins_scenario_counts_each_join_after_its_run(server: ServerProcess) -> None:
    code, lines, stderr = _bench(server.url, "joins")

    assert code == 0, stderr
    (line,) = lines
    assert line["scenario"] == "joins" and line["errors"] == 0
    assert line["total"] == RUNS and line["slower_than_2s"] == 0
    assert sum(line["after_end_distribution"].values()) == RUNS
    lags = [line[f"join_after_end_{p}_ms"] for p in ("p50", "p99", "p999", "max")]
    assert 0 <= lags[0] <= lags[1] <= lags[2] <= lags[3]


def test_several_urls_are_one_target(server: ServerProcess) -> None:
    urls = f"{server.url},{server.url}"
    code, lines, stderr = _bench(urls, "throughput")

    assert code == 0, stderr
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line["target"] == urls
    assert line["instances"] == 2
    assert line["total"] == RUNS
    assert line["errors"] == 0
    # The bench did not start this server, so it cannot know its settings.
    assert line["settings"] is None


def test_side_by_side_loads_two_deployments_at_once(server: ServerProcess) -> None:
    # The same server twice stands in for two deployments: each gets its own line.
    other = server.url + "/"
    code, lines, stderr = _bench(server.url, "throughput", "--against", other)

    assert code == 0, stderr
    assert len(lines) == 2, stderr
    assert [line["target"] for line in lines] == [server.url, server.url]
    for line in lines:
        assert line["side_by_side"] is True
        assert line["scenario"] == "throughput"
        assert line["total"] == RUNS
        assert line["errors"] == 0


def test_side_by_side_needs_running_deployments() -> None:
    args = [sys.executable, "-m", "bench.run", "--start", "dev", "--against", "http://x"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 2
    assert "--against compares two running deployments; it needs --url" in done.stderr


def test_recovery_refuses_a_server_it_cannot_kill(server: ServerProcess) -> None:
    args = [sys.executable, "-m", "bench.run", "--url", server.url, "--scenario", "recovery"]
    args += ["--runs", "1", "--warmup", "0"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1
    line = json.loads(done.stdout)
    assert line["scenario"] == "recovery"
    assert line["errors"] == 1
    assert "--start redis" in line["failure"]


def test_chaos_refuses_a_server_it_cannot_kill(server: ServerProcess) -> None:
    args = [sys.executable, "-m", "bench.run", "--url", server.url, "--scenario", "chaos"]
    args += ["--runs", "1", "--warmup", "0"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1
    line = json.loads(done.stdout)
    assert line["scenario"] == "chaos"
    assert line["errors"] == 1
    assert "--start redis" in line["failure"]


def test_the_bench_needs_nothing_from_the_test_extras() -> None:
    # A plain `pip install -e .` has no pytest: the bench must import without it.
    code = "import sys; sys.modules['pytest'] = None; import bench.run, bench.target"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
