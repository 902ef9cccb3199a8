"""Where a tool list comes from: the project, a JSON file or folder, or a live MCP server."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from tether.errors import ConfigError, SourceError
from tether.textfiles import JSONProblem, parse_json


def load_json_tools(path: Path) -> list[dict[str, Any]]:
    """A file holding a list of tools or a tools/list result, or a folder of <tool>.json files."""
    if not path.exists():
        raise ConfigError(f"{path} does not exist.",
                          hint="Give a tools JSON file or folder, stdio:'CMD', or an MCP URL.")
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    tools: list[dict[str, Any]] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{f} is not UTF-8 text.", where=f.name) from None
        try:
            data = parse_json(text)
        except JSONProblem as e:  # a syntax error, or nesting deeper than real files do
            raise ConfigError(f"{f} {e.reason}.", where=f"{f.name}:{e.line or 1}",
                              hint=e.hint or "Give a tools/list result, a list of tools, or "
                              "one tool.") from None
        if isinstance(data, dict) and "tools" in data:
            data = data["tools"]
        items = data if isinstance(data, list) else [data]
        for i, t in enumerate(items):
            if not isinstance(t, dict) or "name" not in t:
                raise ConfigError(f"{f}: item {i} is not a tool definition (no 'name').",
                                  where=f.name, hint="Each tool needs at least name and inputSchema.")
            tools.append(t)
    if not tools:
        raise ConfigError(f"no tool definitions found in {path}.")
    return tools


def load_server_tools(target: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """tools/list of a live MCP server: ``stdio:'CMD ARGS'`` or an http(s) URL."""
    try:
        return asyncio.run(asyncio.wait_for(_list(target), timeout))
    except TimeoutError:
        raise SourceError(f"{target}: no tools/list answer within {timeout:.0f}s.",
                          hint="Check that the command starts an MCP server on stdio.") from None
    except (OSError, ConnectionError) as e:
        raise SourceError(f"{target}: cannot reach the MCP server: {e}") from None
    except Exception as e:  # the SDK raises its own types for protocol failures
        if isinstance(e, SourceError | ConfigError):
            raise
        raise SourceError(f"{target}: the MCP server failed: {type(e).__name__}: {e}",
                          hint="Run the command by hand to see its error output.") from None


async def _list(target: str) -> list[dict[str, Any]]:
    from mcp import Client, StdioServerParameters

    server: Any
    if target.startswith("stdio:"):
        argv = shlex.split(target[len("stdio:"):])
        if not argv:
            raise ConfigError("stdio: needs a command, e.g. stdio:'uvx mcp-server-sqlite'.")
        server = StdioServerParameters(command=argv[0], args=argv[1:])
    else:
        server = target
    tools: list[dict[str, Any]] = []
    async with Client(server) as client:
        cursor: str | None = None
        while True:
            result = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                      for t in result.tools]
            cursor = getattr(result, "next_cursor", None)
            if not cursor:
                return tools


def read_call_log(path: Path) -> Counter[str]:
    """Calls per tool from a JSONL call log (one object with a `tool` key per line)."""
    counts: Counter[str] = Counter()
    if not path.is_file():
        raise ConfigError(f"call log {path} does not exist.")
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            counts[str(json.loads(line)["tool"])] += 1
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ConfigError(f"{path}: line {n} is not a call record with a 'tool' key.",
                              where=f"{path.name}:{n}") from None
    return counts
