#!/usr/bin/env python3
"""Side-by-side table: subcontract's bench_peers JSON next to the peers' JSON files.

Usage: bench/side_by_side.py SUBCONTRACT.json PYDANTIC_AI.json OPENAI_AGENTS.json
Prints a Markdown table (medians, with min..max) and subcontract's ratio to the faster peer.
"""
import json
import sys


def med(d, scen, metric):
    """The figure at `metric` (a dotted path) of `scen`, as {median, min, max}."""
    try:
        v = d["scenarios"][scen]
        for part in metric.split("."):
            v = v[part]
    except (KeyError, TypeError):
        return None
    return v if isinstance(v, dict) else {"median": v, "min": v, "max": v}


def fmt(v, digits):
    if v is None:
        return "-"
    return f"{v['median']:.{digits}f} [{v['min']:.{digits}f} .. {v['max']:.{digits}f}]"


def main():
    ours, pyd, oai = (json.load(open(p)) for p in sys.argv[1:4])
    rows = [
        ("S0 µs per 1-turn run", "s0", "us_per_model_turn", "us_per_model_turn", 1, "less"),
        ("S1 µs per model turn (21 turns, a tool call each)", "s1", "us_per_model_turn", "us_per_model_turn", 2, "less"),
        ("S2 µs per sub-agent call (3 tool turns + final)", "s2", "us_per_subagent_call", "us_per_subagent_call", 1, "less"),
        ("S2 µs per call, calls 91-100", "s2", "us_per_call_last10", "us_per_call_last10", 1, "less"),
        # Ours twice: model latency waited out exactly, and by tokio::time::sleep (1 ms ticks);
        # the peers wait with asyncio.sleep.
        ("S3 wall ms, K=50 unbounded (ideal 60)", "s3", "wall_ms", "wall_ms", 1, "less"),
        ("S3 same, our latency by tokio::time::sleep", "s3", "tokio_timer.wall_ms", "wall_ms", 1, "less"),
        ("S3b wall ms, K=50 cap 10 (ideal 300)", "s3b", "wall_ms", "wall_ms", 1, "less"),
        ("S3b same, our latency by tokio::time::sleep", "s3b", "tokio_timer.wall_ms", "wall_ms", 1, "less"),
        ("S4 µs parse + validate 2,039 B (ours: parse + JSON Schema)", "s4", "parse_and_schema_validate_us", "pydantic_validate_json_us", 2, "less"),
        ("S4 µs full output pipeline (ours: size, schema, typed decode, rules)", "s4", "full_output_pipeline_us", "pydantic_validate_json_us", 2, "less"),
    ]
    print("| scenario | subcontract | Pydantic AI | OpenAI Agents SDK | faster peer / subcontract |")
    print("|---|---|---|---|---|")
    for label, scen, ours_m, peer_m, digits, _ in rows:
        o, p, a = med(ours, scen, ours_m), med(pyd, scen, peer_m), med(oai, scen, peer_m)
        peers = [x["median"] for x in (p, a) if x]
        ratio = f"{min(peers) / o['median']:.1f}×" if o and peers and o["median"] > 0 else "-"
        print(f"| {label} | {fmt(o, digits)} | {fmt(p, digits)} | {fmt(a, digits)} | {ratio} |")
    for scen in ("s2", "s3"):
        o, p, a = (d["scenarios"].get(scen, {}).get("peak_rss_mb") for d in (ours, pyd, oai))
        f = lambda x: f"{x:.1f}" if isinstance(x, (int, float)) else "-"
        print(f"| peak RSS MB, {scen.upper()} process | {f(o)} | {f(p)} | {f(a)} | |")


if __name__ == "__main__":
    main()
