#!/usr/bin/env python3
"""S4 against pydantic, interleaved: a fair ratio on a machine whose speed drifts.

S4 is a micro-benchmark of a few microseconds, and this machine's speed changes by up to 2x
over minutes, so figures taken minutes apart (the peers' run, then ours) can disagree with
each other more than the two libraries do. This runs the two alternately, ours then
pydantic's, each in a fresh process, and takes the ratio round by round.

Usage (from the repository root, after `cargo build --release --example bench_peers`):
    bench/s4_interleaved.py [ROUNDS] [PEERS_PYTHON]
PEERS_PYTHON is the peers' virtual environment's python (default /tmp/peers-venv/bin/python,
made by bench/peers/run_all.sh). Prints a Markdown table; the medians are the figures.
"""
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = os.path.join(ROOT, "target", "release", "examples", "bench_peers")
PEERS = os.path.join(ROOT, "bench", "peers")

PYDANTIC = """
import json, sys
sys.path.insert(0, %r)
import common
print(json.dumps(common.s4_validation(1)))
""" % PEERS


def ours():
    out = subprocess.run([OURS, "--scenario", "s4", "--reps", "1"], check=True,
                         capture_output=True, text=True).stdout
    d = json.loads(out)
    return (d["parse_and_schema_validate_us"]["median"], d["full_output_pipeline_us"]["median"])


def pydantic(python):
    out = subprocess.run([python, "-c", PYDANTIC], check=True, capture_output=True,
                         text=True, cwd=PEERS).stdout
    return json.loads(out.strip().splitlines()[-1])["pydantic_validate_json_us"]["median"]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    python = sys.argv[2] if len(sys.argv) > 2 else "/tmp/peers-venv/bin/python"
    rows = []
    for _ in range(rounds):
        a, b = ours()
        p = pydantic(python)
        rows.append((a, b, p, p / a, p / b))

    def fmt(i, digits):
        xs = [r[i] for r in rows]
        return f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f} .. {max(xs):.{digits}f}]"

    print(f"S4, {rounds} rounds, ours then pydantic's, each in a fresh process; "
          "median [min .. max]\n")
    print("| figure | value |")
    print("|---|---|")
    print(f"| ours: parse + JSON Schema validate, µs | {fmt(0, 2)} |")
    print(f"| ours: full output pipeline (size, schema, typed decode, rules), µs | {fmt(1, 2)} |")
    print(f"| pydantic `validate_json`, µs | {fmt(2, 2)} |")
    print(f"| pydantic / ours (parse + validate), per round | {fmt(3, 2)}× |")
    print(f"| pydantic / ours (full pipeline), per round | {fmt(4, 2)}× |")


if __name__ == "__main__":
    main()
