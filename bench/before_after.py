#!/usr/bin/env python3
"""Two builds of `bench_peers`, side by side in one run: each scenario run alternately by the
two binaries, ROUNDS rounds of 5 reps, so the machine's drift hits both alike.

Usage: bench/before_after.py BEFORE_BINARY AFTER_BINARY [ROUNDS] [SCENARIOS]
(SCENARIOS a comma-separated subset of s1,s2,s3,s4; all four by default)
(each built with `cargo build --release --example bench_peers` in a checkout of its commit).
Build both from the same `examples/bench_peers.rs`: when the benchmark itself changed between
the commits (its scenarios' tool arguments, say), copy the newer file into the older checkout
first, or the table compares two workloads, not two libraries.
Prints a Markdown table: medians of the rounds' medians [min .. max], and after / before taken
round by round.

Both binaries are dropped from the page cache first. Peak RSS counts the binary's own pages
that a run maps, and a file just written (a fresh build or copy) is mapped in larger pieces
than one read back from disk: a fresh copy of the very same binary peaked 1.1 MB higher in S2
(2026-12-03). Dropped alike, the two start alike.
"""
import json
import os
import statistics
import subprocess
import sys

METRICS = {
    "s1": ["us_per_model_turn", "peak_rss_mb"],
    "s2": ["us_per_call_last10", "peak_rss_mb"],
    "s3": ["wall_ms"],
    "s4": ["parse_and_schema_validate_us", "full_output_pipeline_us", "peak_rss_mb"],
}


def run(binary, scen):
    out = subprocess.run(
        [binary, "--scenario", scen, "--reps", "5"], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out[out.index("{"):])


def span(xs):
    return f"{statistics.median(xs):.3f} [{min(xs):.3f} .. {max(xs):.3f}]"


def drop_from_page_cache(path):
    # Only clean pages can go, hence the sync; no privileges needed for a file we can read.
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    only = sys.argv[4].split(",") if len(sys.argv) > 4 else list(METRICS)
    unknown = [s for s in only if s not in METRICS]
    if unknown:
        sys.exit(f"unknown scenario(s) {', '.join(unknown)}; these are {', '.join(METRICS)}")
    for binary in (before, after):
        drop_from_page_cache(binary)
    rows = {}
    for _ in range(rounds):
        for scen in only:
            metrics = METRICS[scen]
            for side, binary in (("before", before), ("after", after)):
                d = run(binary, scen)
                for m in metrics:
                    v = d[m]
                    v = v["median"] if isinstance(v, dict) else v
                    rows.setdefault((scen, m), {"before": [], "after": []})[side].append(v)
    print("| figure | before | after | after / before |")
    print("|---|---|---|---|")
    for (scen, m), v in rows.items():
        ratios = [a / b for a, b in zip(v["after"], v["before"])]
        print(f"| {scen} {m} | {span(v['before'])} | {span(v['after'])} | {span(ratios)} |")


if __name__ == "__main__":
    main()
