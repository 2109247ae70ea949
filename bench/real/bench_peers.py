#!/usr/bin/env python3
"""The real-model suite through Pydantic AI and the OpenAI Agents SDK, on a running server.

    python bench/real/bench_peers.py --base-url http://127.0.0.1:8090/v1 [--json OUT]

Reads the same tasks as `tests/it/real_model.rs` (`bench/real/suite/`: a spec file, a cases
file and a workspace per task), with their contracts as written minus `x-grounded`: the same system
prompts, the input sent as compact JSON, the same two read-only tools (`read_file`, `grep`)
with the descriptions and argument schemas subcontract shows a model, the same limits (5 model
requests, 512 tokens a request, temperature 0) and the same graders. Setups:

- `pydantic-ai tool`: Pydantic AI's default tool output (the output as a final-result tool).
- `pydantic-ai native`: `NativeOutput` (the server's `json_schema` response format).
- `openai-agents`: the OpenAI Agents SDK over Chat Completions (native `json_schema` output).

Each framework is given the task's full output schema and checks every output against it
(`jsonschema`) before accepting it: Pydantic AI through an output validator that asks for a
repair (`ModelRetry`), the Agents SDK through its output schema's `validate_json`. An output
that still breaks the contract is counted as invalid. Prints one line per run and a summary
table per setup: tasks passed, invalid outputs, model requests, tokens, wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import jsonschema

HERE = Path(__file__).resolve().parent
MAX_REQUESTS = 5
MAX_TOKENS = 512

# The tools as subcontract shows them to a model (`src/tool/workspace/tools.rs`, schemas after
# `provider::shown::tool_schema`, which leaves out `end_line` and `max_matches`).
READ_FILE = {
    "name": "read_file",
    "description": "Read a text file of the workspace (path relative to its root), with line numbers, from start_line (default 1) on. Long files are cut with a note saying how to continue.",
    "schema": {
        "description": "Arguments of the `read_file` tool.",
        "type": "object",
        "properties": {
            "path": {"description": "Path of the file, relative to the workspace root (for example `src/lib.rs`).", "type": "string", "maxLength": 1024, "minLength": 1},
            "start_line": {"description": "First line to return, 1-based and inclusive. Defaults to 1.", "type": "integer", "minimum": 1, "default": 1},
        },
        "additionalProperties": False,
        "required": ["path"],
    },
}
GREP = {
    "name": "grep",
    "description": "Search the workspace's text files for a regular expression (Rust syntax), optionally only files matching path_glob (e.g. 'src/**/*.rs'); prints path:line: text per match. A path holding a control character, '\"', '\\' or ':' is shown as a JSON string, e.g. \"a\\nb.txt\":3: text.",
    "schema": {
        "description": "Arguments of the `grep` tool.",
        "type": "object",
        "properties": {
            "pattern": {"description": "Rust regex syntax, matched against each line separately\n(for example `fn\\s+main` or `(?i)todo`).", "type": "string", "maxLength": 500},
            "path_glob": {"description": "Only search files whose path relative to the root matches this glob\n(for example `src/**/*.rs`). `*` stays within one directory, `**`\ncrosses directories; a glob without `/` (such as `*.toml`) matches the\nfile name at any depth. Defaults to all files.", "type": "string", "maxLength": 200},
        },
        "additionalProperties": False,
        "required": ["pattern"],
    },
}
TOOLS = {"read_file": READ_FILE, "grep": GREP}


class Workspace:
    """The task's files in a temporary directory, read the way subcontract's tools read them."""

    def __init__(self, files: dict[str, str], tools: list[str]):
        self.tools = tools
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-real-")
        self.root = Path(self._tmp.name)
        for rel, body in files.items():
            p = self.root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(body)

    def _inside(self, rel: str) -> Path:
        p = (self.root / rel).resolve()
        if self.root.resolve() not in p.parents and p != self.root.resolve():
            raise ValueError(f"{rel}: outside the workspace")
        return p

    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        try:
            p = self._inside(path)
            lines = p.read_text().splitlines()
        except (OSError, ValueError) as e:
            return f"ERROR: cannot read {path}: {e}"
        start = start_line or 1
        end = min(end_line or len(lines), len(lines))
        out = "".join(f"{i:>5}| {lines[i - 1]}\n" for i in range(start, end + 1))
        if start > 1 or end < len(lines):
            out += f"(lines {start}-{end} of {len(lines)})\n"
        return out or "(empty file)\n"

    def grep(self, pattern: str, path_glob: str | None = None, max_matches: int | None = None) -> str:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            return f"ERROR: invalid pattern: {e}"
        limit = min(max_matches or 50, 200)
        out, matches, files, searched = [], 0, 0, 0
        first = None  # the first file searched: (its path, whether any line matched, all shown)
        for p in sorted(self.root.rglob("*")):
            rel = p.relative_to(self.root).as_posix()
            if not p.is_file() or (path_glob and not (p.match(path_glob) or Path(rel).match(path_glob))):
                continue
            searched += 1
            hit, unshown = False, False
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if rx.search(line) and matches < limit:
                    out.append(f"{rel}:{n}: {line}")
                    matches += 1
                    hit = True
                else:
                    unshown = True
            files += hit
            if first is None:
                first = (rel, hit, unshown)
        def plural(n, word):
            return f"{n} {word}" + ("" if n == 1 else ("es" if word == "match" else "s"))
        if matches:
            summary = f"({plural(matches, 'match')} in {plural(files, 'file')}; searched {plural(searched, 'file')})"
        else:
            summary = f"(no matches; searched {plural(searched, 'file')})"
        out.append(summary)
        # As subcontract's grep: a search of one file that left some of it unshown names the
        # read_file call that shows it, when the task offers read_file.
        if searched == 1 and first[2] and "read_file" in self.tools:
            call = json.dumps({"path": first[0]}, separators=(",", ":"))
            if first[1]:
                out.append("Only the matching lines are shown; to see the lines around them, "
                           f"read the file: read_file {call}.")
            else:
                out.append(f"No line matches; to see what the file holds, read it: read_file {call}.")
        return "\n".join(out) + "\n"

    def call(self, name: str, args: dict[str, Any]) -> str:
        return getattr(self, name)(**args)


def strip_grounded(schema: Any) -> Any:
    """The schema without its `x-grounded` keywords (the peers have no such check)."""
    if isinstance(schema, dict):
        return {k: strip_grounded(v) for k, v in schema.items() if k != "x-grounded"}
    if isinstance(schema, list):
        return [strip_grounded(v) for v in schema]
    return schema


def load_tasks() -> list[dict]:
    """The suite: each spec file with its one case and its workspace's files, in file order."""
    suite = HERE / "suite"
    tasks = []
    for path in sorted((suite / "specs").glob("*.toml")):
        spec = tomllib.loads(path.read_text())
        lines = [l for l in path.with_suffix(".cases.jsonl").read_text().splitlines() if l.strip()]
        assert len(lines) == 1, f"{path}: one case"
        case = json.loads(lines[0])
        ws = suite / "workspaces" / spec["name"]
        files = {str(f.relative_to(ws)): f.read_text() for f in sorted(ws.rglob("*")) if f.is_file()} if ws.is_dir() else {}
        tasks.append({"name": spec["name"], "system": spec["system"], "tools": spec.get("tools", []),
                      "input": case["input"], "expect": case.get("expect", {}), "files": files,
                      "output": strip_grounded(spec["output"])})
    return tasks


def grade(task: dict, output: Any) -> str | None:
    """None when the output is what the case expects, else the first failed grader: the
    graders of `subcontract eval` (fields, contains, matches, range, one_of)."""
    def at(ptr: str) -> Any:
        got: Any = output
        for part in ptr.strip("/").split("/") if ptr else []:
            got = got.get(part) if isinstance(got, dict) else (got[int(part)] if isinstance(got, list) and part.isdigit() and int(part) < len(got) else None)
        return got

    expect = task["expect"]
    for ptr, want in expect.get("fields", {}).items():
        if at(ptr) != want:
            return f"{ptr} is {json.dumps(at(ptr))}, expected {json.dumps(want)}"
    for ptr, subs in expect.get("contains", {}).items():
        got = at(ptr)
        text = (got if isinstance(got, str) else json.dumps(got)).lower()
        for sub in subs:
            if sub.lower() not in text:
                return f"{ptr} is {json.dumps(got)}, expected it to contain {sub!r}"
    for ptr, rx in expect.get("matches", {}).items():
        got = at(ptr)
        items = got if isinstance(got, list) else [got]
        if not items or not all(isinstance(i, str) and re.search(rx, i) for i in items):
            return f"{ptr} is {json.dumps(got)}, expected a match of /{rx}/"
    for ptr, (lo, hi) in expect.get("range", {}).items():
        got = at(ptr)
        if not (isinstance(got, (int, float)) and not isinstance(got, bool) and lo <= got <= hi):
            return f"{ptr} is {json.dumps(got)}, expected a number in [{lo}, {hi}]"
    for ptr, allowed in expect.get("one_of", {}).items():
        if at(ptr) not in allowed:
            return f"{ptr} is {json.dumps(at(ptr))}, expected one of {allowed}"
    return None


def invalid(task: dict, output: Any) -> str | None:
    errs = sorted(jsonschema.Draft202012Validator(task["output"]).iter_errors(output), key=str)
    return errs[0].message if errs else None


def counted(row: dict, requests: int, input_tokens: int, output_tokens: int) -> None:
    row.update(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens)


async def run_pydantic_ai(task: dict, ws: Workspace, base_url: str, native: bool, row: dict) -> Any:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent, ModelRetry, NativeOutput, StructuredDict
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import Tool
    from pydantic_ai.usage import RunUsage, UsageLimits

    client = AsyncOpenAI(base_url=base_url, api_key="local", max_retries=0, timeout=180)
    model = OpenAIChatModel("local", provider=OpenAIProvider(openai_client=client))
    out_type = StructuredDict(task["output"], name="output", description="The answer.")
    tools = []
    for name in task["tools"]:
        t = TOOLS[name]
        fn = (lambda n: (lambda **kw: ws.call(n, kw)))(name)
        tools.append(Tool.from_schema(fn, name=name, description=t["description"], json_schema=t["schema"]))
    agent = Agent(
        model,
        output_type=NativeOutput(out_type) if native else out_type,
        system_prompt=task["system"],
        tools=tools,
        model_settings=ModelSettings(temperature=0.0, max_tokens=MAX_TOKENS),
        retries=MAX_REQUESTS,
    )

    @agent.output_validator
    def check(output: Any) -> Any:
        why = invalid(task, output)
        if why:
            raise ModelRetry(f"The output breaks its schema: {why}")
        return output

    # Passed in, so that a run that ends without an output still reports what it used.
    usage = RunUsage()
    try:
        result = await agent.run(
            json.dumps(task["input"], separators=(",", ":")),
            usage_limits=UsageLimits(request_limit=MAX_REQUESTS),
            usage=usage,
        )
    finally:
        counted(row, usage.requests, usage.input_tokens, usage.output_tokens)
    return result.output


async def run_openai_agents(task: dict, ws: Workspace, base_url: str, row: dict) -> Any:
    from agents import (Agent, AgentOutputSchemaBase, FunctionTool, ModelSettings,
                        OpenAIChatCompletionsModel, RunConfig, Runner, set_tracing_disabled)
    from agents.exceptions import AgentsException, ModelBehaviorError
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    class Schema(AgentOutputSchemaBase):
        def is_plain_text(self) -> bool:
            return False

        def name(self) -> str:
            return "output"

        def json_schema(self) -> dict[str, Any]:
            return task["output"]

        def is_strict_json_schema(self) -> bool:
            return False

        def validate_json(self, json_str: str) -> Any:
            try:
                v = json.loads(json_str)
            except json.JSONDecodeError as e:
                raise ModelBehaviorError(f"not JSON: {e}") from None
            why = invalid(task, v)
            if why:
                raise ModelBehaviorError(f"the output breaks its schema: {why}")
            return v

    def tool(name: str) -> FunctionTool:
        async def invoke(_ctx: Any, args: str) -> str:
            return ws.call(name, json.loads(args or "{}"))

        t = TOOLS[name]
        return FunctionTool(name=name, description=t["description"], params_json_schema=t["schema"],
                            on_invoke_tool=invoke, strict_json_schema=False)

    client = AsyncOpenAI(base_url=base_url, api_key="local", max_retries=0, timeout=180)
    agent = Agent(
        name=task["name"],
        instructions=task["system"],
        model=OpenAIChatCompletionsModel(model="local", openai_client=client),
        model_settings=ModelSettings(temperature=0.0, max_tokens=MAX_TOKENS),
        tools=[tool(n) for n in task["tools"]],
        output_type=Schema(),
    )
    try:
        result = await Runner.run(agent, json.dumps(task["input"], separators=(",", ":")),
                                  max_turns=MAX_REQUESTS, run_config=RunConfig(tracing_disabled=True))
    except AgentsException as e:
        # What a run that ended without an output used, when the SDK says.
        if e.run_data is not None:
            u = e.run_data.context_wrapper.usage
            counted(row, u.requests, u.input_tokens, u.output_tokens)
        raise
    u = result.context_wrapper.usage
    counted(row, u.requests, u.input_tokens, u.output_tokens)
    return result.final_output


SETUPS = {
    "pydantic-ai tool": lambda t, ws, b, row: run_pydantic_ai(t, ws, b, False, row),
    "pydantic-ai native": lambda t, ws, b, row: run_pydantic_ai(t, ws, b, True, row),
    "openai-agents": run_openai_agents,
}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", required=True, help="the server's OpenAI-compatible API root, with /v1")
    ap.add_argument("--setup", action="append", choices=sorted(SETUPS), help="only these (repeatable)")
    ap.add_argument("--json", type=Path, help="write every run here")
    a = ap.parse_args()
    tasks = load_tasks()
    from agents.exceptions import AgentsException
    from openai import APIError
    from pydantic_ai.exceptions import AgentRunError

    # A run that ends without an output is a result; anything else (a setup error) stops here.
    ended = (AgentRunError, AgentsException, APIError)
    rows = []
    for setup in a.setup or list(SETUPS):
        for task in tasks:
            ws = Workspace(task["files"], task["tools"])
            t0 = time.monotonic()
            row = {"setup": setup, "task": task["name"], "requests": 0, "input_tokens": 0, "output_tokens": 0}
            try:
                output = await SETUPS[setup](task, ws, a.base_url, row)
                why_invalid = invalid(task, output)
                if why_invalid:
                    row.update(result=f"invalid: {why_invalid}", passed=False, invalid=True)
                else:
                    wrong = grade(task, output)
                    row.update(result="pass" if wrong is None else f"wrong: {wrong}", passed=wrong is None, invalid=False)
                row["output"] = output
            except ended as e:
                row.update(result=f"{type(e).__name__}: {str(e)[:120]}", passed=False, invalid=False)
            row["wall_s"] = round(time.monotonic() - t0, 1)
            rows.append(row)
            print(f"| {setup} | {task['name']} | {row['result'][:140]} | {row['requests']} | "
                  f"{row['input_tokens']} + {row['output_tokens']} | {row['wall_s']} s |", flush=True)
    print("\n| framework / setup | passed | invalid outputs | requests | tokens (prompt + completion) | wall |")
    print("|---|---|---|---|---|---|")
    for setup in a.setup or list(SETUPS):
        of = [r for r in rows if r["setup"] == setup]
        print(f"| {setup} | {sum(r['passed'] for r in of)}/{len(of)} | {sum(r['invalid'] for r in of)} | "
              f"{sum(r['requests'] for r in of)} | {sum(r['input_tokens'] for r in of):,} + "
              f"{sum(r['output_tokens'] for r in of):,} | {sum(r['wall_s'] for r in of):.0f} s |")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
