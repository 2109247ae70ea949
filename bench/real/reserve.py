#!/usr/bin/env python3
"""The answer reserve on a real model: the real-model suite's tasks under a budget (or a
timeout) that about half of them hit, with the reserve on and off.

    python3 bench/real/reserve.py [--limit budget|time] [--repeat K] [--bin target/debug/subcontract]

What it does, all through `subcontract eval` on llama.cpp's server with the 1.5B model that
`local-model/install.py` installs into target/tmp (started here, one thread pair, stopped at the
end):

1. Each task of `bench/real/suite/specs/` once with no money limit, the local model priced at
   $2 / $8 per million input / output tokens (`--prices`), to learn what each task costs (and
   how long it takes).
2. One limit for every task, so that about half the tasks hit it: the median of the caps the
   tasks need (`[limits] max_cost_usd`; estimated, see `needs`), or of their wall times
   (`[limits] timeout_secs`, `--limit time`).
3. Each task under that limit, the reserve on (the default) and off (`answer_reserve = false`),
   K attempts each (temperature 0, so attempts mostly repeat one another).

Prints a table: per task and setting, attempts that ended with an output, of those how many
passed their graders, how many were cut short, and the outcomes of the rest. The eval reports
(JSON) stay under target/tmp/bench-reserve/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "bench/real/suite"


def tasks() -> dict[str, tuple[Path, Path, Path]]:
    """Each task: its spec file, cases file and workspace. The suite's eight graded tasks (one
    case each, 3 to 5 turns) and the research eval's three cases (`specs/research_topic.toml`
    over bench/real/eval/workspace, up to 8 turns), where a budget runs out mid-work."""
    out = {}
    for spec in sorted((SUITE / "specs").glob("*.toml")):
        ws = SUITE / "workspaces" / spec.stem
        out[spec.stem] = (spec, spec.with_suffix(".cases.jsonl"),
                          ws if ws.is_dir() else SUITE / "workspaces")
    out["research_topic"] = (ROOT / "specs/research_topic.toml",
                             ROOT / "bench/real/eval/research_topic.cases.jsonl",
                             ROOT / "bench/real/eval/workspace")
    return out
OUT = ROOT / "target/tmp/bench-reserve"
PRICES = '[prices."openai:local"]\ninput_per_mtok = "2"\noutput_per_mtok = "8"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    info = subprocess.run(
        [sys.executable, "local-model/install.py", "--model", "1.5b", "--dir", "target/tmp"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    paths = dict(line.split("=", 1) for line in info.split())
    port = free_port()
    log = open(OUT / "server.log", "w")
    server = subprocess.Popen(
        [paths["python"], "local-model/serve.py", "--model", paths["model"], "--port", str(port),
         "--threads", "2", "--ctx", "8192", "--verbosity", "0", "--stdin-lifeline",
         "--chat-template-file", "local-model/qwen-tool-calls.jinja"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                out = subprocess.run(["curl", "-sf", f"{base}/health"], capture_output=True)
                if out.returncode == 0:
                    return server, base
        except OSError:
            pass
        if server.poll() is not None:
            sys.exit(f"the model server exited; see {OUT / 'server.log'}")
        time.sleep(1)
    sys.exit("the model server did not become healthy in 300 s")


def with_limits(spec: str, extra: dict[str, str]) -> str:
    """The spec file's text with `extra` keys set in its [limits] table."""
    lines = spec.splitlines()
    try:
        start = lines.index("[limits]")
    except ValueError:
        lines += ["", "[limits]"]
        start = len(lines) - 1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    body = [l for l in lines[start + 1:end]
            if not any(re.match(rf"\s*{k}\s*=", l) for k in extra)]
    body += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines[:start + 1] + body + lines[end:]) + "\n"


def run_eval(bin_: str, base: str, name: str, spec_text: str, tag: str, repeat: int) -> dict:
    spec_file, cases, workspace = tasks()[name]
    d = OUT / tag
    d.mkdir(parents=True, exist_ok=True)
    spec = d / f"{name}.toml"
    spec.write_text(spec_text)
    report = d / f"{name}.json"
    cmd = [bin_, "eval", str(spec), "--cases", str(cases), "--workspace", str(workspace),
           "--model", "openai:local", "--base-url", f"{base}/v1",
           "--prices", str(OUT / "prices.toml"),
           "--repeat", str(repeat), "--format", "json", "--out", str(report), "-q"]
    env = dict(os.environ, SUBCONTRACT_API_KEY="local", OPENAI_API_KEY="local")
    t = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"eval {name} ({tag}) exited {done.returncode}: {done.stderr[-2000:]}")
    out = json.loads(report.read_text())
    print(f"  {tag:>30} {name:<16} {time.monotonic() - t:6.0f} s", flush=True)
    return out


def attempts(report: dict) -> list[dict]:
    return report["cases"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", choices=["budget", "time"], default="budget")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--bin", default="target/debug/subcontract")
    ap.add_argument("--tasks", help="comma-separated task names (default: all)")
    ap.add_argument("--settings", default="on,off", help="the reserve settings to run: on, off or both")
    ap.add_argument("--caps", help="comma-separated money limits, instead of the estimated median")
    ap.add_argument("--reuse", action="store_true",
                    help="take the reports of an earlier run where there are any, instead of running again")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "prices.toml").write_text(PRICES)
    bin_ = str(ROOT / args.bin)
    names = args.tasks.split(",") if args.tasks else list(tasks())
    # Two busy cores: a cold prompt can take minutes, and the limit measured is money.
    slow = {"timeout_secs": "600"}
    server = None

    def report(tag: str, n: str, text: str, repeat: int) -> dict:
        nonlocal server, base
        kept = OUT / tag / f"{n}.json"
        if args.reuse and kept.is_file() and kept.stat().st_size > 0:
            return json.loads(kept.read_text())
        if server is None:
            server, base = start_server()
        return run_eval(bin_, base, n, text, tag, repeat)

    base = ""
    try:
        print("1. each task unlimited", flush=True)
        free = {}
        for n in names:
            text = with_limits(tasks()[n][0].read_text(), slow)
            free[n] = report("unlimited", n, text, 1)
        everything = [a for r in free.values() for a in attempts(r)]
        if args.limit == "budget":
            # A run is stopped by its cap when a call's worst case does not fit what is left,
            # not when its spend reaches it, and a worst case counts every prompt byte as a
            # token: the cap a case needs is about its cost plus its last call's worst case
            # (the eval report has no per-call figures, so that call's prompt is estimated as
            # 1.5 times the mean prompt, at 4 bytes a token).
            def needs(a: dict) -> float:
                mean = a["input_tokens"] / max(1, a["turns"])
                last = mean * 1.5 if a["turns"] > 1 else mean
                return a["cost_usd"] + (4 * last * 2 + 512 * 8) / 1e6
            limits = ([float(c) for c in args.caps.split(",")] if args.caps
                      else [statistics.median(needs(a) for a in everything)])
            key = "max_cost_usd"
            shown = [f'"{c:.6f}"' for c in limits]
        else:
            limits = [max(1, round(statistics.median(a["wall_ms"] / 1000 for a in everything)))]
            key = "timeout_secs"
            shown = [str(c) for c in limits]
        print(f"2. the limits: {key} = {', '.join(shown)}", flush=True)
        print("3. each task under each, the reserve on and off", flush=True)
        rows = []
        for value in shown:
            for n in names:
                text = tasks()[n][0].read_text()
                for setting, extra in [("on", {}), ("off", {"answer_reserve": "false"})]:
                    if setting not in args.settings.split(","):
                        continue
                    limits_set = {**slow, key: value, **extra}
                    tag = f"{key}={value.strip(chr(34))}/reserve-{setting}"
                    r = report(tag, n, with_limits(text, limits_set), args.repeat)
                    rows.append((value.strip('"'), n, setting, attempts(r)))
    finally:
        if server is not None:
            server.stdin.close()
            server.wait(timeout=60)

    print()
    print(f"Prices $2 / $8 per Mtok in / out; {args.repeat} attempt(s) per case and setting;")
    print("unlimited: passed / cases, cut short (by turns), USD spent.")
    print()
    print(f"| {key} | task | unlimited | reserve | outputs | passed | cut short | other outcomes |")
    print("|---|---|---|---|---|---|---|---|")
    totals = {}
    for value, n, setting, atts in rows:
        outputs = [a for a in atts if a["outcome"] == "completed"]
        passed = sum(a["passed"] for a in outputs)
        cut = ", ".join(a["cut_short"] for a in outputs if a.get("cut_short")) or "–"
        other = ", ".join(sorted(a["outcome"] for a in atts if a["outcome"] != "completed")) or "–"
        f = attempts(free[n])
        fcut = sum(1 for a in f if a.get("cut_short"))
        fp = sum(a["passed"] for a in f)
        spent = sum(a["cost_usd"] for a in f)
        print(f"| {value} | {n} | {fp}/{len(f)}, {fcut}, {spent:.4f} | {setting} "
              f"| {len(outputs)}/{len(atts)} | {passed} | {cut} | {other} |")
        t = totals.setdefault((value, setting), [0, 0, 0])
        t[0] += len(outputs)
        t[1] += len(atts)
        t[2] += passed
    for (value, setting), (o, a, p) in totals.items():
        print(f"| {value} | **all** | | {setting} | {o}/{a} | {p} | | |")


if __name__ == "__main__":
    main()
