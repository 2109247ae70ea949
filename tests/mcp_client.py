"""Drives `subcontract mcp` with the official MCP Python SDK (a client we did not write).

Usage: mcp_client.py BINARY SPECS_DIR WORKSPACE TRACE_FILE

Prints one JSON object summarising what the server answered; tests/it/mcp.rs asserts on it.
Only the SDK's public client API is used: stdio_client + ClientSession.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def dump(model):
    """A pydantic model as the JSON the wire carried (camelCase keys)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def call_summary(result):
    d = dump(result)
    return {
        "isError": bool(d.get("isError", False)),
        "structuredContent": d.get("structuredContent"),
        "text": [c.get("text") for c in d.get("content", []) if c.get("type") == "text"],
        "meta": d.get("_meta"),
    }


async def main():
    binary, specs, workspace, trace = sys.argv[1:5]
    params = StdioServerParameters(
        command=binary,
        args=["mcp", specs, "--model", "example", "--workspace", workspace, "--trace", trace],
    )
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = dump(await session.initialize())
            out["protocolVersion"] = init.get("protocolVersion")
            out["serverInfo"] = init.get("serverInfo")
            out["capabilities"] = init.get("capabilities")

            tools = dump(await session.list_tools())
            out["tools"] = tools["tools"]

            progress = []

            async def on_progress(value, total, message):
                progress.append({"progress": value, "message": message})

            ok = await session.call_tool(
                "classify",
                {"sentence": "The app crashes when I click save."},
                progress_callback=on_progress,
            )
            out["ok"] = call_summary(ok)
            out["progress"] = progress

            out["wrapped"] = call_summary(
                await session.call_tool("headline", {"paragraph": "Some paragraph."})
            )

            out["bad_args"] = call_summary(
                await session.call_tool("classify", {"sentence": 42, "extra": True})
            )

            out["failing"] = call_summary(await session.call_tool("no_example", {"q": "why?"}))

            # A run that completes cut short (its one turn asks for the output alone).
            out["cut_short"] = call_summary(await session.call_tool("digest", {"folder": "."}))

            try:
                unknown = await session.call_tool("no_such_tool", {})
                out["unknown"] = {"raised": False, "result": call_summary(unknown)}
            except Exception as e:  # the SDK raises McpError for a JSON-RPC error
                out["unknown"] = {"raised": True, "error": str(e)}

            # Concurrent calls, answered in any order.
            many = await asyncio.gather(
                *[
                    session.call_tool("classify", {"sentence": f"Question number {i}?"})
                    for i in range(4)
                ]
            )
            out["concurrent"] = [call_summary(r) for r in many]

            out["after"] = call_summary(
                await session.call_tool("classify", {"sentence": "Please add dark mode."})
            )

    # A second connection on the modern (2026-07-28) lifecycle: `server/discover` and
    # per-request metadata instead of the `initialize` handshake. (No --trace: it would
    # truncate the first connection's.)
    modern = StdioServerParameters(command=binary, args=["mcp", specs, "--model", "example"])
    async with stdio_client(modern) as (read, write):
        async with ClientSession(read, write) as session:
            discovered = dump(await session.discover())
            out["modern"] = {
                "supportedVersions": discovered.get("supportedVersions"),
                "tools": [t.name for t in (await session.list_tools()).tools],
                "ok": call_summary(
                    await session.call_tool("classify", {"sentence": "Is it fast?"})
                ),
            }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
