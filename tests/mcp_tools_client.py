"""Drives `subcontract mcp` serving specs whose sub-agents use MCP tools, with the official MCP
Python SDK (a client we did not write).

Usage: mcp_tools_client.py BINARY SPECS_DIR ENV_JSON TOOL ARGS_JSON [FLAG...]

Starts `BINARY mcp SPECS_DIR FLAG...` with the variables of ENV_JSON (the SDK passes a minimal
environment otherwise), lists its tools, calls TOOL with ARGS_JSON once (or, when ARGS_JSON is
a list, once per element, in order, in the same session) and prints one JSON object;
tests/it/mcp_commands.rs asserts on it. Only the SDK's public client API is used.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    binary, specs, env, tool, args = sys.argv[1:6]
    env = {**{k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}, **json.loads(env)}
    params = StdioServerParameters(command=binary, args=["mcp", specs, *sys.argv[6:]], env=env)
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["tools"] = [t.name for t in (await session.list_tools()).tools]
            args = json.loads(args)
            calls = []
            for a in args if isinstance(args, list) else [args]:
                result = await session.call_tool(tool, a)
                d = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                calls.append({
                    "isError": bool(d.get("isError", False)),
                    "structuredContent": d.get("structuredContent"),
                    "text": [c.get("text") for c in d.get("content", []) if c.get("type") == "text"],
                })
            if isinstance(args, list):
                out["calls"] = calls
            else:
                out.update(calls[0])
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
