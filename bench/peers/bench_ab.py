"""Interleaved A/B run of S0, S1, S2 and S3 for both frameworks in ONE process.

The machine is a shared 2-core VM whose speed drifts by up to 2x while other jobs run. The
per-framework scripts run one framework after the other, so each can land in a different
noise regime. This script alternates the two frameworks block by block (ABBA order) inside one
event loop, so both see the same conditions. It then reports each framework's median
[min .. max] and the per-rep ratio OpenAI-Agents / Pydantic-AI.

It measures wall time only. Peak RSS comes from the per-framework scripts: here both frameworks
share one process.

Run:  /tmp/peers-venv/bin/python bench/peers/bench_ab.py [--reps 7] [--json /tmp/peers-results/ab.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any, Awaitable, Callable

from agents import Runner

import bench_openai_agents as oai
import bench_pydantic_ai as pai
import common
from common import CHILD_TOOL_TURNS, S1_TOOL_TURNS, S2_SUBAGENT_CALLS, S3_FANOUT, SAMPLE_FINDINGS, summarize


def build() -> dict[str, dict[str, tuple[Callable[[], Awaitable[Any]], float]]]:
    """scenario -> framework -> (coroutine factory for one run, divisor turning ns/run into the unit)."""
    out: dict[str, dict[str, tuple[Callable[[], Awaitable[Any]], float]]] = {}

    p0, p1 = pai.make_worker_agent(0), pai.make_worker_agent(S1_TOOL_TURNS)
    o0, o1 = oai.make_worker_agent(0), oai.make_worker_agent(S1_TOOL_TURNS)
    p2 = pai.make_parent_agent(pai.make_worker_agent(CHILD_TOOL_TURNS), "sequential", S2_SUBAGENT_CALLS)
    o2 = oai.make_parent_agent(oai.make_worker_agent(CHILD_TOOL_TURNS), "sequential", S2_SUBAGENT_CALLS)
    g = common.ConcurrencyGauge()
    p3 = pai.make_parent_agent(pai.make_worker_agent(CHILD_TOOL_TURNS, latency_s=common.S3_LATENCY_S, gauge=g), "fanout", S3_FANOUT)
    o3 = oai.make_parent_agent(oai.make_worker_agent(CHILD_TOOL_TURNS, latency_s=common.S3_LATENCY_S, gauge=g), "fanout", S3_FANOUT)

    async def prun(agent: Any) -> None:
        r = await agent.run("go", usage_limits=pai.NO_LIMITS)
        assert r.output == SAMPLE_FINDINGS

    async def orun(agent: Any, max_turns: int) -> None:
        r = await Runner.run(agent, "go", max_turns=max_turns, run_config=oai.RUN_CONFIG)
        assert r.final_output == SAMPLE_FINDINGS

    out["s0 us/run (1 turn)"] = {"Pydantic AI": (lambda: prun(p0), 1e3), "OpenAI Agents SDK": (lambda: orun(o0, 2), 1e3)}
    t = S1_TOOL_TURNS + 1
    out[f"s1 us/model turn ({t} turns)"] = {"Pydantic AI": (lambda: prun(p1), t * 1e3),
                                          "OpenAI Agents SDK": (lambda: orun(o1, t + 1), t * 1e3)}
    out["s2 us/sub-agent call"] = {"Pydantic AI": (lambda: prun(p2), S2_SUBAGENT_CALLS * 1e3),
                                   "OpenAI Agents SDK": (lambda: orun(o2, S2_SUBAGENT_CALLS + 2), S2_SUBAGENT_CALLS * 1e3)}
    out["s3 wall ms (K=50, ideal 60)"] = {"Pydantic AI": (lambda: prun(p3), 1e6), "OpenAI Agents SDK": (lambda: orun(o3, 4), 1e6)}
    return out


RUNS_PER_BLOCK = {"s0": 60, "s1": 12, "s2": 1, "s3": 2}


async def main_async(reps: int) -> dict[str, Any]:
    table = build()
    res: dict[str, Any] = {}
    for scen, fws in table.items():
        names = list(fws)
        for fn, _ in fws.values():  # warm-up both
            for _ in range(2):
                await fn()
        per: dict[str, list[float]] = {n: [] for n in names}
        n_runs = RUNS_PER_BLOCK[scen[:2]]
        for rep in range(reps):
            order = names if rep % 2 == 0 else names[::-1]
            for n in order:
                fn, div = fws[n]
                ts = []
                for _ in range(n_runs):
                    t0 = time.perf_counter_ns()
                    await fn()
                    ts.append(time.perf_counter_ns() - t0)
                per[n].append(statistics.median(ts) / div)
        ratios = [b / a for a, b in zip(per[names[0]], per[names[1]])]
        res[scen] = {n: summarize(v) for n, v in per.items()}
        res[scen]["ratio OpenAI/Pydantic"] = summarize(ratios)
        print(f"  done {scen}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    import os
    cal0, load0 = common.calibration_ms(), os.getloadavg()[0]
    res = asyncio.run(main_async(a.reps))
    cal1 = common.calibration_ms()
    cols = ["Pydantic AI", "OpenAI Agents SDK", "ratio OpenAI/Pydantic"]
    rows = [[scen] + [common.fmt(d[c], 2 if c.startswith("ratio") else 0) for c in cols] for scen, d in res.items()]
    hdr = ["interleaved A/B, median [min .. max] over reps"] + cols
    w = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)))
    print(f"reps={a.reps}; calibration (pure-Python 1e6-add loop) before/after: {cal0} / {cal1} ms; load avg at start {load0:.2f}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"reps": a.reps, "calibration_ms_before_after": [cal0, cal1], "loadavg_at_start": load0,
                       "versions": common.versions(["pydantic-ai-slim", "openai-agents", "pydantic", "pydantic-core"]),
                       "results": res}, f, indent=2)


if __name__ == "__main__":
    main()
