#!/usr/bin/env bash
# Run both framework benchmarks one after the other (never concurrently: the machine has
# 2 cores) and print a side-by-side table. Usage: bench/peers/run_all.sh [REPS]   (default 5)
# PEERS_VENV: the virtual environment (default /tmp/peers-venv; made on first use from
#             requirements-lock.txt). PEERS_OUT: where results go (default /tmp/peers-results).
# Both default outside the repository.
set -euo pipefail
cd "$(dirname "$0")"
REPS="${1:-5}"
VENV="${PEERS_VENV:-/tmp/peers-venv}"
OUT="${PEERS_OUT:-/tmp/peers-results}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r requirements-lock.txt
fi
PY="$VENV/bin/python"
mkdir -p "$OUT"
$PY bench_pydantic_ai.py --reps "$REPS" --json "$OUT/pydantic_ai.json"
$PY bench_openai_agents.py --reps "$REPS" --json "$OUT/openai_agents.json"
$PY compare.py "$OUT/pydantic_ai.json" "$OUT/openai_agents.json"
# Interleaved A/B of S0-S3 in one process: a fairer ratio under machine-speed drift.
$PY bench_ab.py --reps 7 --json "$OUT/ab.json"
