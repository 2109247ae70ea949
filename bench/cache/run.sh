#!/usr/bin/env bash
# Prompt caching, subcontract and Pydantic AI side by side on the same billing mocks.
# Usage: bench/cache/run.sh   (from anywhere; writes target/tmp/bench-cache/*.json)
# CACHE_VENV: the virtual environment (default target/tmp/bench-cache-venv, made on first use
# with the pinned Pydantic AI of requirements-lock.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=target/tmp/bench-cache
VENV="${CACHE_VENV:-target/tmp/bench-cache-venv}"
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pydantic_ai, anthropic, openai' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r bench/cache/requirements-lock.txt
fi
cargo build -q --example bench_cache
BIN=target/debug/examples/bench_cache
"$BIN" --json "$OUT/subcontract.json"
echo
"$BIN" serve anthropic 18471 >/dev/null &
A=$!
"$BIN" serve openai 18472 >/dev/null &
O=$!
trap 'kill $A $O 2>/dev/null || true' EXIT
for port in 18471 18472; do
  for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    sleep 0.1
  done
done
"$VENV/bin/python" bench/cache/bench_pydantic_ai.py \
  --anthropic http://127.0.0.1:18471 --openai http://127.0.0.1:18472/v1 \
  --json "$OUT/pydantic_ai.json"
