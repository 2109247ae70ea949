#!/usr/bin/env python3
"""Serve a GGUF model over HTTP on 127.0.0.1 with llama.cpp's own server (from `xllamacpp`).

    target/tmp/llm-venv/bin/python local-model/serve.py --model FILE --port 8090 \
        [--threads 2] [--ctx 8192] [--chat-template-file local-model/qwen-tool-calls.jinja]

Endpoints: `/v1/chat/completions` (OpenAI-compatible: tools, `tool_choice`, `response_format`),
`/v1/messages` (Anthropic-compatible), `/health`, `/v1/models`. Prints `listening ADDRESS` once
the model is loaded, then runs until SIGTERM or SIGINT, or until its standard input closes when
started with `--stdin-lifeline` (a test harness holds the pipe, so the server cannot outlive
it even when the harness is killed).

The sampling temperature is the server's default unless `--temp` is given: clients send their
own, and a harness that wants to measure them must not override them here.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--port", type=int, default=8090)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads for generation and prompts")
    ap.add_argument("--ctx", type=int, default=8192, help="context size in tokens")
    ap.add_argument("--chat-template-file", default="", help="a Jinja chat template to use "
                    "instead of the one inside the model file")
    ap.add_argument("--temp", type=float, default=None, help="override the default temperature")
    ap.add_argument("--verbosity", type=int, default=1)
    ap.add_argument("--stdin-lifeline", action="store_true",
                    help="stop when standard input reaches its end")
    a = ap.parse_args()

    import xllamacpp as xlc  # imported late so `--help` works without it

    p = xlc.CommonParams()
    p.model.path = a.model
    p.hostnames = ["127.0.0.1"]
    p.port = a.port
    p.n_ctx = a.ctx
    # One request at a time: the whole context for it, and no interleaving that would make
    # timings depend on what else is queued.
    p.n_parallel = 1
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.use_jinja = True  # tool calls and templates need the Jinja path
    p.warmup = False
    p.verbosity = a.verbosity
    if a.temp is not None:
        p.sampling.temp = a.temp
    if a.chat_template_file:
        with open(a.chat_template_file, encoding="utf-8") as f:
            p.chat_template = f.read()
    p.model_alias = {"local"}

    t0 = time.time()
    server = xlc.Server(p)
    print(f"listening {server.listening_address} (loaded in {time.time() - t0:.1f} s)", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if a.stdin_lifeline:
        def watch() -> None:
            while sys.stdin.buffer.read(4096):
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()
    stop.wait()
    print("stopping", flush=True)
    del server


if __name__ == "__main__":
    main()
