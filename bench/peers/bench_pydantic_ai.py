"""Framework-overhead benchmark for Pydantic AI (pydantic-ai-slim), no network.

Models are scripted with `FunctionModel` (async function => no thread hop). Each scripted
response carries a fixed `RequestUsage`, as a real provider would, so the framework's
token-estimation fallback is not exercised. Tools are `async def` (a plain `def` tool is
run in a worker thread by Pydantic AI, which would add a thread hop per call).

Run:  /tmp/peers-venv/bin/python bench/peers/bench_pydantic_ai.py [--reps 5] [--json /tmp/peers-results/pydantic_ai.json]
      /tmp/peers-venv/bin/python bench/peers/bench_pydantic_ai.py --scenario s1      # a single scenario
See README.md for what each scenario measures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

import common
from common import (
    CHILD_TOOL_TURNS,
    FAKE_INPUT_TOKENS,
    FAKE_OUTPUT_TOKENS,
    S1_TOOL_TURNS,
    S2_SUBAGENT_CALLS,
    S3_BOUND,
    S3_FANOUT,
    S3_LATENCY_S,
    SAMPLE_FINDINGS,
    SAMPLE_FINDINGS_JSON,
    TOOL_RESULT,
    ConcurrencyGauge,
    Findings,
    summarize,
)

# Pydantic AI's default UsageLimits has request_limit=50, checked against the (shared)
# RunUsage. S2 makes 101 parent + 400 child requests on one shared RunUsage, so every run
# here passes an explicit "no request limit".
NO_LIMITS = UsageLimits(request_limit=None)


def _usage() -> RequestUsage:
    return RequestUsage(input_tokens=FAKE_INPUT_TOKENS, output_tokens=FAKE_OUTPUT_TOKENS)


def _turn_index(messages: list[ModelMessage]) -> int:
    # History is [request, response, request, response, ..., request]: O(1) turn counter,
    # so the scripted model itself never scans the history.
    return (len(messages) - 1) // 2


def _final(info: AgentInfo, turn: int) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(info.output_tools[0].name, SAMPLE_FINDINGS_JSON, tool_call_id=f"c{turn}")],
        usage=_usage(),
    )


def make_tool_loop_model(tool_turns: int, latency_s: float = 0.0, gauge: ConcurrencyGauge | None = None) -> FunctionModel:
    """Scripted model: `tool_turns` turns each calling `lookup`, then the final output."""

    async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = _turn_index(messages)
        if latency_s and turn < tool_turns:
            if gauge:
                gauge.enter()
            await asyncio.sleep(latency_s)
            if gauge:
                gauge.exit()
        if turn < tool_turns:
            return ModelResponse(parts=[ToolCallPart("lookup", "{}", tool_call_id=f"c{turn}")], usage=_usage())
        return _final(info, turn)

    return FunctionModel(fn, model_name="scripted-tool-loop")


def make_worker_agent(tool_turns: int, latency_s: float = 0.0, gauge: ConcurrencyGauge | None = None, **agent_kw: Any) -> Agent[None, Findings]:
    agent: Agent[None, Findings] = Agent(
        make_tool_loop_model(tool_turns, latency_s, gauge),
        output_type=Findings,
        instructions="You are a research worker.",
        name="worker",
        **agent_kw,
    )

    @agent.tool_plain
    async def lookup() -> str:
        """Trivial local tool returning a constant."""
        return TOOL_RESULT

    return agent


def make_parent_agent(child: Agent[None, Findings], script: str, n_calls: int,
                      stamps: list[int] | None = None) -> Agent[None, Findings]:
    """Parent whose scripted model delegates to `child` via the `research` tool.

    script == 'sequential': one `research` call per turn, n_calls turns, then final output.
    script == 'fanout':     n_calls `research` calls in the first response, then final output.
    """

    async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if stamps is not None:
            stamps.append(time.perf_counter_ns())
        turn = _turn_index(messages)
        if script == "sequential":
            if turn < n_calls:
                return ModelResponse(
                    parts=[ToolCallPart("research", f'{{"query": "q{turn}"}}', tool_call_id=f"p{turn}")],
                    usage=_usage(),
                )
            return _final(info, turn)
        if turn == 0:
            return ModelResponse(
                parts=[ToolCallPart("research", f'{{"query": "q{k}"}}', tool_call_id=f"p{k}") for k in range(n_calls)],
                usage=_usage(),
            )
        return _final(info, turn)

    parent: Agent[None, Findings] = Agent(
        FunctionModel(fn, model_name=f"scripted-parent-{script}"),
        output_type=Findings,
        instructions="You are a lead researcher; delegate to the research tool.",
        name="parent",
    )

    @parent.tool
    async def research(ctx: RunContext[None], query: str) -> Findings:
        """Delegate a research question to the worker sub-agent."""
        # Documented agent-delegation pattern: the child shares the parent's RunUsage.
        r = await child.run(query, usage=ctx.usage, usage_limits=NO_LIMITS)
        return r.output

    return parent


# --------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------
def s1_turn_overhead(reps: int, runs_per_rep: int = 40, tool_turns: int = S1_TOOL_TURNS) -> dict[str, Any]:
    agent = make_worker_agent(tool_turns)
    turns = tool_turns + 1

    async def one() -> tuple[int, int]:
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        r = await agent.run("go", usage_limits=NO_LIMITS)
        dt = time.perf_counter_ns() - t0
        dc = time.process_time_ns() - c0
        assert r.output == SAMPLE_FINDINGS
        assert r.usage.requests == turns and r.usage.tool_calls == tool_turns, r.usage
        return dt, dc

    async def bench() -> dict[str, Any]:
        for _ in range(5):
            await one()  # warm-up (lazy schema building, first-run caches)
        rss_setup = common.rss_mb()
        per_rep, cpu_per_rep = [], []
        for _ in range(reps):
            runs = [await one() for _ in range(runs_per_rep)]
            per_rep.append(statistics.median(r[0] for r in runs) / turns / 1000)
            cpu_per_rep.append(statistics.median(r[1] for r in runs) / turns / 1000)
        return {
            "us_per_model_turn": summarize(per_rep),
            "cpu_us_per_model_turn": summarize(cpu_per_rep),
            "model_turns_per_run": turns,
            "runs_per_rep": runs_per_rep,
            "rss_after_setup_mb": rss_setup,
            "_table": [("us_per_model_turn", f"us / model turn ({turns} turns/run), wall", 1),
                       ("cpu_us_per_model_turn", "  same, process CPU time", 1)],
        }

    return asyncio.run(bench())


def s1t_turn_overhead_instrumented(reps: int) -> dict[str, Any]:
    # Same as S1 with instrumentation on for all agents (only opentelemetry-api is installed, no SDK,
    # so the tracer is a no-op): the cost of the instrumentation code paths with nothing exported.
    Agent.instrument_all(True)
    res = s1_turn_overhead(reps)
    res["_table"] = [("us_per_model_turn", "us / model turn, tracing on, nothing exported, wall", 1),
                     ("cpu_us_per_model_turn", "  same, process CPU time", 1)]
    return res


def s0_run_overhead(reps: int) -> dict[str, Any]:
    # A whole run that is a single model turn returning the final structured output:
    # the fixed per-run cost (run setup/teardown + 1 turn + output validation).
    res = s1_turn_overhead(reps, runs_per_rep=100, tool_turns=0)
    res["_table"] = [("us_per_model_turn", "us / run of 1 turn (final output only), wall", 1),
                     ("cpu_us_per_model_turn", "  same, process CPU time", 1)]
    return res


def s2_delegation(reps: int, runs_per_rep: int = 3) -> dict[str, Any]:
    child = make_worker_agent(CHILD_TOOL_TURNS)
    stamps: list[int] = []
    parent = make_parent_agent(child, "sequential", S2_SUBAGENT_CALLS, stamps=stamps)
    child_turns = CHILD_TOOL_TURNS + 1
    expected_requests = (S2_SUBAGENT_CALLS + 1) + S2_SUBAGENT_CALLS * child_turns
    expected_tool_calls = S2_SUBAGENT_CALLS + S2_SUBAGENT_CALLS * CHILD_TOOL_TURNS
    observed: dict[str, Any] = {}

    async def one() -> tuple[int, float, float, int]:
        stamps.clear()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        r = await parent.run("go", usage_limits=NO_LIMITS)
        dt = time.perf_counter_ns() - t0
        assert r.output == SAMPLE_FINDINGS
        observed["parent_result_usage"] = {"requests": r.usage.requests, "tool_calls": r.usage.tool_calls,
                                           "input_tokens": r.usage.input_tokens}
        assert r.usage.requests == expected_requests, (r.usage, expected_requests)
        assert r.usage.tool_calls == expected_tool_calls, (r.usage, expected_tool_calls)
        return (dt, *common.early_late_intervals_us(stamps), time.process_time_ns() - c0)

    async def bench() -> dict[str, Any]:
        await one()  # warm-up
        rss_setup = common.rss_mb()
        per_call, per_run_ms, early, late, cpu_call = [], [], [], [], []
        for _ in range(reps):
            runs = [await one() for _ in range(runs_per_rep)]
            m = statistics.median(r[0] for r in runs)
            per_call.append(m / S2_SUBAGENT_CALLS / 1000)
            per_run_ms.append(m / 1e6)
            early.append(statistics.median(r[1] for r in runs))
            late.append(statistics.median(r[2] for r in runs))
            cpu_call.append(statistics.median(r[3] for r in runs) / S2_SUBAGENT_CALLS / 1000)
        return {
            "us_per_subagent_call": summarize(per_call),
            "ms_per_parent_run": summarize(per_run_ms),
            "cpu_us_per_subagent_call": summarize(cpu_call),
            "us_per_call_first10": summarize(early),
            "us_per_call_last10": summarize(late),
            "subagent_calls": S2_SUBAGENT_CALLS,
            "model_turns_per_subagent_call": child_turns,
            "shared_usage_after_run": observed["parent_result_usage"],
            "usage_shared": "parent RunUsage includes child requests: "
                            f"{expected_requests} = {S2_SUBAGENT_CALLS + 1} parent + {S2_SUBAGENT_CALLS * child_turns} child",
            "rss_after_setup_mb": rss_setup,
            "_table": [
                ("us_per_subagent_call", f"us / sub-agent call ({child_turns} child turns + 1 parent turn), wall", 0),
                ("cpu_us_per_subagent_call", "  same, process CPU time", 0),
                ("ms_per_parent_run", f"ms / parent run (N={S2_SUBAGENT_CALLS})", 1),
                ("us_per_call_first10", "us / call, calls 1-10 (short parent history)", 0),
                ("us_per_call_last10", f"us / call, calls {S2_SUBAGENT_CALLS - 9}-{S2_SUBAGENT_CALLS} (long parent history)", 0),
            ],
        }

    return asyncio.run(bench())


def _s3(reps: int, runs_per_rep: int, bound: int | None) -> dict[str, Any]:
    gauge = ConcurrencyGauge()
    child_kw: dict[str, Any] = {}
    if bound is not None:
        # Pydantic AI bounds concurrent *runs of an agent* (Agent(max_concurrency=...)); there is no
        # per-response tool-call concurrency knob, so the cap is put on the child agent.
        child_kw["max_concurrency"] = bound
    child = make_worker_agent(CHILD_TOOL_TURNS, latency_s=S3_LATENCY_S, gauge=gauge, **child_kw)
    parent = make_parent_agent(child, "fanout", S3_FANOUT)
    waves = 1 if bound is None else -(-S3_FANOUT // bound)
    ideal_ms = waves * CHILD_TOOL_TURNS * S3_LATENCY_S * 1000

    async def one() -> tuple[int, int, int]:
        gauge.reset()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        r = await parent.run("go", usage_limits=NO_LIMITS)
        dt = time.perf_counter_ns() - t0
        assert r.output == SAMPLE_FINDINGS
        assert r.usage.requests == 2 + S3_FANOUT * (CHILD_TOOL_TURNS + 1), r.usage
        return dt, gauge.peak, time.process_time_ns() - c0

    async def bench() -> dict[str, Any]:
        await one()  # warm-up
        rss_setup = common.rss_mb()
        walls, overheads, peaks, cpus = [], [], [], []
        for _ in range(reps):
            runs = [await one() for _ in range(runs_per_rep)]
            m = statistics.median(r[0] for r in runs) / 1e6
            walls.append(m)
            overheads.append(m - ideal_ms)
            cpus.append(statistics.median(r[2] for r in runs) / 1e6)
            peaks.extend(r[1] for r in runs)
        label = "unbounded (default)" if bound is None else f"child Agent(max_concurrency={bound})"
        return {
            "wall_ms": summarize(walls),
            "overhead_ms_vs_ideal": summarize(overheads),
            "cpu_ms": summarize(cpus),
            "ideal_ms": ideal_ms,
            "peak_concurrent_child_model_calls": max(peaks),
            "fanout": S3_FANOUT,
            "latency_ms": S3_LATENCY_S * 1000,
            "rss_after_setup_mb": rss_setup,
            "_table": [
                ("wall_ms", f"wall ms, K={S3_FANOUT} {label}, ideal {ideal_ms:.0f} ms", 1),
                ("overhead_ms_vs_ideal", "wall - ideal (ms)", 1),
                ("cpu_ms", "process CPU ms during the run", 1),
                ("peak_concurrent_child_model_calls", "peak concurrent child model calls", 0),
            ],
        }

    return asyncio.run(bench())


def s3_fanout(reps: int) -> dict[str, Any]:
    return _s3(reps, runs_per_rep=3, bound=None)


def s3b_fanout_bounded(reps: int) -> dict[str, Any]:
    return _s3(reps, runs_per_rep=1, bound=S3_BOUND)


def s4_validation(reps: int) -> dict[str, Any]:
    res = common.s4_validation(reps)
    res["_table"] = [
        ("pydantic_validate_json_us", f"us / TypeAdapter.validate_json ({res['json_bytes']} B)", 2),
        ("jsonschema_py_validate_us", "us / python-jsonschema validate (json.loads incl.)", 1),
        ("json_loads_only_us", "us / json.loads alone", 2),
    ]
    return res


SCENARIOS = {
    "s0": s0_run_overhead,
    "s1": s1_turn_overhead,
    "s1t": s1t_turn_overhead_instrumented,
    "s2": s2_delegation,
    "s3": s3_fanout,
    "s3b": s3b_fanout_bounded,
    "s4": s4_validation,
}

if __name__ == "__main__":
    common.main("Pydantic AI", SCENARIOS, ["pydantic-ai-slim", "pydantic", "pydantic-core", "opentelemetry-api", "jsonschema"])
