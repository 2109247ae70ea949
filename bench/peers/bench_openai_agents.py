"""Framework-overhead benchmark for the OpenAI Agents SDK (openai-agents), no network.

The model is `ScriptedModel`, a direct subclass of `agents.models.interface.Model` whose
`get_response` returns pre-scripted output items (function calls / a final JSON message)
without any HTTP client. Each response carries a fixed `Usage`. Tools are `async def`
(a plain `def` function tool is run via `asyncio.to_thread` by the SDK).

Tracing: the SDK traces by default (with an OpenAI exporter). All main scenarios run with
`RunConfig(tracing_disabled=True)`; scenario `s1t` runs S1 with tracing enabled but the
trace processors replaced by an empty list, i.e. the span bookkeeping cost with nothing
exported (and no network).

Run:  /tmp/peers-venv/bin/python bench/peers/bench_openai_agents.py [--reps 5] [--json /tmp/peers-results/openai_agents.json]
      /tmp/peers-venv/bin/python bench/peers/bench_openai_agents.py --scenario s1      # a single scenario
See README.md for what each scenario measures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any, Callable

from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from agents import Agent, RunConfig, Runner, function_tool
from agents.agent_output import AgentOutputSchema, AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.run_config import ToolExecutionConfig
from agents.tool import Tool
from agents.tracing import set_trace_processors
from agents.usage import Usage

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

RUN_CONFIG = RunConfig(tracing_disabled=True)


def _usage() -> Usage:
    return Usage(
        requests=1,
        input_tokens=FAKE_INPUT_TOKENS,
        output_tokens=FAKE_OUTPUT_TOKENS,
        total_tokens=FAKE_INPUT_TOKENS + FAKE_OUTPUT_TOKENS,
    )


def _call(name: str, args: str, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments=args, status="completed"
    )


def _final_message(turn: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{turn}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=SAMPLE_FINDINGS_JSON, annotations=[])],
    )


Script = Callable[[int], Any]  # turn index -> list of output items (sync) or awaitable of it


class ScriptedModel(Model):
    """A network-free `Model`: the response is a pure function of the turn index.

    The turn index is derived in O(1) from the input length: the input is
    [user, (function_call, function_call_output) * completed_calls], and every scripted
    response of a sequential script holds exactly one call.
    """

    def __init__(self, script: Callable[[int], list[Any]], latency_s: float = 0.0,
                 sleep_turns: int = 0, gauge: ConcurrencyGauge | None = None, fanout_parent: bool = False,
                 stamps: list[int] | None = None):
        self.script = script
        self.latency_s = latency_s
        self.sleep_turns = sleep_turns
        self.gauge = gauge
        self.fanout_parent = fanout_parent
        self.stamps = stamps

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        if self.stamps is not None:
            self.stamps.append(time.perf_counter_ns())
        n = 1 if isinstance(input, str) else len(input)
        turn = 0 if n == 1 else (1 if self.fanout_parent else (n - 1) // 2)
        if self.latency_s and turn < self.sleep_turns:
            if self.gauge:
                self.gauge.enter()
            await asyncio.sleep(self.latency_s)
            if self.gauge:
                self.gauge.exit()
        return ModelResponse(output=self.script(turn), usage=_usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("streaming is not used by this benchmark")


@function_tool
async def lookup() -> str:
    """Trivial local tool returning a constant."""
    return TOOL_RESULT


def tool_loop_script(tool_turns: int) -> Callable[[int], list[Any]]:
    def script(turn: int) -> list[Any]:
        if turn < tool_turns:
            return [_call("lookup", "{}", f"c{turn}")]
        return [_final_message(turn)]

    return script


def make_worker_agent(tool_turns: int, latency_s: float = 0.0, gauge: ConcurrencyGauge | None = None) -> Agent[Any]:
    return Agent(
        name="worker",
        instructions="You are a research worker.",
        model=ScriptedModel(tool_loop_script(tool_turns), latency_s=latency_s, sleep_turns=tool_turns, gauge=gauge),
        tools=[lookup],
        output_type=Findings,  # default: strict JSON schema, validated with pydantic
    )


def make_parent_agent(child: Agent[Any], script: str, n_calls: int, stamps: list[int] | None = None) -> Agent[Any]:
    research = child.as_tool(
        tool_name="research",
        tool_description="Delegate a research question to the worker sub-agent.",
    )

    if script == "sequential":
        def parent_script(turn: int) -> list[Any]:
            if turn < n_calls:
                return [_call("research", f'{{"input": "q{turn}"}}', f"p{turn}")]
            return [_final_message(turn)]
        model = ScriptedModel(parent_script, stamps=stamps)
    else:
        def parent_script(turn: int) -> list[Any]:
            if turn == 0:
                return [_call("research", f'{{"input": "q{k}"}}', f"p{k}") for k in range(n_calls)]
            return [_final_message(turn)]
        model = ScriptedModel(parent_script, fanout_parent=True, stamps=stamps)

    return Agent(
        name="parent",
        instructions="You are a lead researcher; delegate to the research tool.",
        model=model,
        tools=[research],
        output_type=Findings,
    )


# --------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------
def s1_turn_overhead(reps: int, runs_per_rep: int = 40, run_config: RunConfig = RUN_CONFIG,
                     label: str = "", tool_turns: int = S1_TOOL_TURNS) -> dict[str, Any]:
    agent = make_worker_agent(tool_turns)
    turns = tool_turns + 1

    async def one() -> tuple[int, int]:
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        r = await Runner.run(agent, "go", max_turns=turns + 1, run_config=run_config)
        dt = time.perf_counter_ns() - t0
        dc = time.process_time_ns() - c0
        assert r.final_output == SAMPLE_FINDINGS, r.final_output
        u = r.context_wrapper.usage
        assert u.requests == turns, u
        return dt, dc

    async def bench() -> dict[str, Any]:
        for _ in range(5):
            await one()  # warm-up
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
            "_table": [("us_per_model_turn", label or f"us / model turn ({turns} turns/run), wall", 1),
                       ("cpu_us_per_model_turn", "  same, process CPU time", 1)],
        }

    return asyncio.run(bench())


def s1t_turn_overhead_traced(reps: int) -> dict[str, Any]:
    # Tracing on (the SDK default) but with no processors: spans are built, nothing is exported.
    set_trace_processors([])
    return s1_turn_overhead(reps, run_config=RunConfig(tracing_disabled=False),
                            label="us / model turn, tracing on, nothing exported, wall")


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
    observed: dict[str, Any] = {}

    async def one() -> tuple[int, float, float, int]:
        stamps.clear()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        r = await Runner.run(parent, "go", max_turns=S2_SUBAGENT_CALLS + 2, run_config=RUN_CONFIG)
        dt = time.perf_counter_ns() - t0
        assert r.final_output == SAMPLE_FINDINGS
        u = r.context_wrapper.usage
        observed["u"] = {"requests": u.requests, "input_tokens": u.input_tokens}
        assert u.requests == expected_requests, (u.requests, expected_requests)
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
            "shared_usage_after_run": observed["u"],
            "usage_shared": "parent context_wrapper.usage includes child requests: "
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
    child = make_worker_agent(CHILD_TOOL_TURNS, latency_s=S3_LATENCY_S, gauge=gauge)
    parent = make_parent_agent(child, "fanout", S3_FANOUT)
    run_config = RUN_CONFIG if bound is None else RunConfig(
        tracing_disabled=True, tool_execution=ToolExecutionConfig(max_function_tool_concurrency=bound)
    )
    waves = 1 if bound is None else -(-S3_FANOUT // bound)
    ideal_ms = waves * CHILD_TOOL_TURNS * S3_LATENCY_S * 1000

    async def one() -> tuple[int, int, int]:
        gauge.reset()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        r = await Runner.run(parent, "go", max_turns=4, run_config=run_config)
        dt = time.perf_counter_ns() - t0
        assert r.final_output == SAMPLE_FINDINGS
        assert r.context_wrapper.usage.requests == 2 + S3_FANOUT * (CHILD_TOOL_TURNS + 1), r.context_wrapper.usage
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
        label = "unbounded (default)" if bound is None else f"max_function_tool_concurrency={bound}"
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
    # The SDK's own final-output path: AgentOutputSchema.validate_json (pydantic underneath).
    schema = AgentOutputSchema(Findings)
    assert schema.validate_json(SAMPLE_FINDINGS_JSON) == SAMPLE_FINDINGS
    vals = [common.time_us_per_call(lambda: schema.validate_json(SAMPLE_FINDINGS_JSON), 20000) for _ in range(reps)]
    res["sdk_output_schema_validate_json_us"] = summarize(vals)
    res["_table"] = [
        ("pydantic_validate_json_us", f"us / TypeAdapter.validate_json ({res['json_bytes']} B)", 2),
        ("sdk_output_schema_validate_json_us", "us / AgentOutputSchema.validate_json (SDK path)", 2),
        ("jsonschema_py_validate_us", "us / python-jsonschema validate (json.loads incl.)", 1),
        ("json_loads_only_us", "us / json.loads alone", 2),
    ]
    return res


SCENARIOS = {
    "s0": s0_run_overhead,
    "s1": s1_turn_overhead,
    "s1t": s1t_turn_overhead_traced,
    "s2": s2_delegation,
    "s3": s3_fanout,
    "s3b": s3b_fanout_bounded,
    "s4": s4_validation,
}

if __name__ == "__main__":
    common.main("OpenAI Agents SDK", SCENARIOS, ["openai-agents", "openai", "pydantic", "pydantic-core", "jsonschema"])
