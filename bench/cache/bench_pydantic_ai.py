#!/usr/bin/env python3
"""Pydantic AI on the billing mocks of `examples/bench_cache.rs` (same scripted model, same
prompts, same tool results): scenario A (one sub-agent, 6 turns, 6,000-token system prompt,
2,000-token file reads) and B (a host fanning out to 3 siblings of one spec, 4 turns each),
with each of Pydantic AI's cache settings, reporting USD billed, USD if uncached and the
saving as the mock billed them.

Usage: bench_pydantic_ai.py --anthropic URL --openai URL [--json FILE]
(`bench/cache/run.sh` starts the mocks and a pinned Pydantic AI.)
"""
import argparse
import asyncio
import json
import time
import urllib.request

from pydantic import BaseModel, Field
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

SYSTEM_BYTES = 24_000  # 6,000 tokens
FILE_BYTES = 8_000  # 2,000 tokens


def long_text(topic: str, size: int) -> str:
    """The same text as billing_mock::long_text."""
    out, i = [], 0
    total = 0
    while total < size:
        line = f"{topic} {i:05d}: the quick brown fox jumps over the lazy dog.\n"
        out.append(line)
        total += len(line)
        i += 1
    return "".join(out)[:size]


class Summary(BaseModel):
    summary: str = Field(max_length=500)


def mock(url: str, path: str, method: str = "GET") -> dict:
    root = url.removesuffix("/v1")
    req = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def agents(model, settings):
    reader = Agent(
        model,
        instructions=long_text("reader rules", SYSTEM_BYTES),
        output_type=Summary,
        model_settings=settings,
        name="reader",
    )

    @reader.tool_plain
    def read_file(path: str) -> str:
        """Reads a file of the workspace."""
        return long_text(path, FILE_BYTES)

    host = Agent(
        model,
        instructions=long_text("host rules", 2_000),
        output_type=str,
        model_settings=settings,
        name="host",
    )

    @host.tool
    async def reader_tool(ctx: RunContext[None], question: str) -> str:
        """Reads files and summarises them."""
        r = await reader.run(question, usage=ctx.usage)
        return r.output.model_dump_json()

    return reader, host


async def scenario(url, model, settings, fan_out):
    mock(url, "/_mock/reset", "POST")
    reader, host = agents(model, settings)
    t0 = time.perf_counter()
    if fan_out:
        await host.run("Delegate the reading.")
    else:
        await reader.run("read 5 files")
    wall = time.perf_counter() - t0
    bill = mock(url, "/_mock/bill")
    billed, uncached = float(bill["usd"]), float(bill["uncached_usd"])
    return {
        "usd_billed": bill["usd"],
        "usd_uncached": bill["uncached_usd"],
        "saving_pct": round((1 - billed / uncached) * 1000) / 10 if uncached else 0.0,
        "calls": len(bill["calls"]),
        "wall_ms": round(wall * 1000),
    }


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anthropic", required=True)
    ap.add_argument("--openai", required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    anthropic = AnthropicModel(
        "claude-sonnet-4-5", provider=AnthropicProvider(base_url=a.anthropic, api_key="sk-bench")
    )
    openai = OpenAIChatModel("gpt-4.1", provider=OpenAIProvider(base_url=a.openai, api_key="sk-bench"))
    both = dict(anthropic_cache_instructions=True, anthropic_cache_tool_definitions=True)
    variants = [
        ("anthropic", a.anthropic, anthropic, "no cache settings", AnthropicModelSettings()),
        ("anthropic", a.anthropic, anthropic, "instructions + tools + messages",
         AnthropicModelSettings(**both, anthropic_cache_messages=True)),
        ("anthropic", a.anthropic, anthropic, "instructions + tools + automatic",
         AnthropicModelSettings(**both, anthropic_cache=True)),
        ("openai", a.openai, openai, "no cache key", OpenAIChatModelSettings()),
        ("openai", a.openai, openai, "prompt_cache_key",
         OpenAIChatModelSettings(openai_prompt_cache_key="bench-reader")),
    ]
    out = {}
    print("| provider | settings | scenario | USD billed | USD if uncached | saving | calls | wall ms |")
    print("|---|---|---|---|---|---|---|---|")
    for provider, url, model, label, settings in variants:
        for key, name, fan_out in [("a", "A", False), ("b", "B", True)]:
            f = await scenario(url, model, settings, fan_out)
            out[f"{provider}.{key}.{label}"] = f
            print(f"| {provider} | {label} | {name} | {float(f['usd_billed']):.6f} | "
                  f"{float(f['usd_uncached']):.6f} | {f['saving_pct']}% | {f['calls']} | {f['wall_ms']} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
