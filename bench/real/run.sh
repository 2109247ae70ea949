#!/usr/bin/env bash
# The real-model suite side by side: subcontract, Pydantic AI and the OpenAI Agents SDK on the
# same llama.cpp server and model, the same tasks (bench/real/suite/), prompts, tools and
# limits. Usage: bench/real/run.sh   (from anywhere; writes target/tmp/bench-real/)
# REAL_MODEL: 1.5b (default) or 0.5b. REAL_VENV: the peers' virtual environment (default
# target/tmp/bench-real-venv, made on first use from bench/peers/requirements-lock.txt).
# One thing runs at a time (the machine has two cores): subcontract's suite (which starts its
# own server), then one server for the peers, with the same model, template and flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=target/tmp/bench-real
VENV="${REAL_VENV:-target/tmp/bench-real-venv}"
SIZE="${REAL_MODEL:-1.5b}"
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pydantic_ai, agents, jsonschema' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r bench/peers/requirements-lock.txt
fi
# The server and the model, into target/tmp once (prints python=… and model=…).
eval "$(python3 local-model/install.py --model "$SIZE" --dir target/tmp | sed 's/^/LLM_/')"

echo "== subcontract (tests/it/real_model.rs)"
SUBCONTRACT_REAL_MODEL="$SIZE" cargo test --all-features --test it real_model::the_suite \
  -- --nocapture 2>&1 | grep '^real model: |' | sed 's/^real model: //' | tee "$OUT/subcontract.log"
cp target/tmp/real-model/table.md "$OUT/subcontract.md"

echo "== Pydantic AI and the OpenAI Agents SDK"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server stops when this script's end of the pipe closes (--stdin-lifeline), however the
# script ends.
exec 3> >("$LLM_python" local-model/serve.py --model "$LLM_model" --port "$PORT" --threads 2 \
  --ctx 8192 --verbosity 0 --stdin-lifeline --chat-template-file local-model/qwen-tool-calls.jinja \
  > "$OUT/server.log" 2>&1)
for _ in $(seq 180); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 1
done
"$VENV/bin/python" bench/real/bench_peers.py --base-url "http://127.0.0.1:$PORT/v1" \
  --json "$OUT/peers.json" | tee "$OUT/peers.md"
echo
echo "== subcontract's summary"
sed -n '/^| template |/,$p' "$OUT/subcontract.md"
