"""`python -m bench.encryption`: the server's CPU per run with encryption at rest, as a ratio
to the same deployment without it, both loaded at the same moment on the same host.

Two deployments of one mode are started: one on Runyard's defaults, one with
LANGGRAPH_AES_KEY and LANGGRAPH_AES_JSON_KEYS=messages (checkpoints, writes, and the state's
messages wherever JSON is stored). `bench.run --url A --against B` runs the throughput
scenario on both at once with the `chat_state` graph (a reply as long as the question); the
last line printed is the ratio of their `cpu_ms_per_run`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench.run import DEFAULT_REDIS
from bench.target import started_deployment

AES = {
    "LANGGRAPH_AES_KEY": "bench-key-0123456789abcdef012345",
    "LANGGRAPH_AES_JSON_KEYS": "messages",
}


def main(argv: list[str] | None = None) -> int:
    """Start both deployments, load them side by side, print both lines and the ratio."""
    parser = argparse.ArgumentParser(prog="python -m bench.encryption", description=__doc__)
    parser.add_argument("--start", choices=["dev", "serve", "redis"], default="serve")
    parser.add_argument("--runs", type=int, default=300, help="runs per leg")
    parser.add_argument("--chars", type=int, default=2000, help="length of each question")
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args(argv)
    question = {"messages": [{"role": "user", "content": "q" * args.chars}]}
    with (
        started_deployment(args.start, 1, {}, DEFAULT_REDIS, False) as plain,
        started_deployment(args.start, 1, AES, DEFAULT_REDIS, False) as encrypted,
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.run",
                "--url",
                ",".join(plain.urls),
                "--against",
                ",".join(encrypted.urls),
                "--scenario",
                "throughput",
                "--assistant",
                "chat_state",
                "--input",
                json.dumps(question),
                "--runs",
                str(args.runs),
                "--concurrency",
                str(args.concurrency),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    sys.stderr.write(done.stderr)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for line in lines:
        print(json.dumps(line), flush=True)
    if len(lines) != 2 or any(line.get("errors") for line in lines):
        return 1
    off, on = (line["server"]["cpu_ms_per_run"] for line in lines)
    print(
        json.dumps(
            {
                "scenario": "encryption_cost",
                "mode": args.start,
                "runs": args.runs,
                "question_chars": args.chars,
                "cpu_ms_per_run_plain": off,
                "cpu_ms_per_run_aes": on,
                "cpu_ratio_aes_to_plain": round(on / off, 3) if off else None,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
