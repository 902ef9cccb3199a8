"""`tether eval run`: each case against an MCP server, as the case's user, one trace per case.

The runner owns the MCP session (stdio or streamable HTTP, the official SDK client), the
identity (how ``as_user`` reaches the server: an environment variable, a header, or tether's
runner token), the simulated user, and the trace files. Agents only see :class:`AgentContext`.
A run folder is resumable: finished cases are skipped on the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import shlex
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.context.meta import ToolContext
from tether.errors import ConfigError, TetherError
from tether.eval.agents.base import Agent, AgentContext
from tether.eval.cases import Case
from tether.eval.simulator import UserSimulator
from tether.eval.trace import (
    Clarification,
    IndexEntry,
    ModelTurn,
    RunIndex,
    ToolCall,
    Trace,
)
from tether.textfiles import load_json, read_text

TRACES = "traces"
INDEX = "index.json"
SERVER_LOG = "server-stderr.log"


@dataclass
class Identity:
    """How as_user reaches the server (docs/eval.md, "Identity")."""

    via: str = "none"  # none | env:VAR | header:NAME | runner-token
    token_env: str = "TETHER_RUNNER_TOKEN"
    headers: dict[str, str] = field(default_factory=dict)  # extra headers for every request

    @classmethod
    def parse(cls, spec: str | None, target: str, headers: dict[str, str] | None = None,
              token_env: str = "TETHER_RUNNER_TOKEN") -> Identity:
        if not spec:
            spec = "env:TETHER_USER" if target.startswith("stdio:") else "none"
        ok = spec in ("none", "runner-token") or spec.startswith(("env:", "header:"))
        if not ok or spec in ("env:", "header:"):
            raise ConfigError(f"--as-user-via {spec!r} is not understood.",
                              hint="Use env:VAR (stdio), header:NAME (HTTP), runner-token "
                              "(tether over HTTP) or none.")
        if spec.startswith("env:") and not target.startswith("stdio:"):
            raise ConfigError(f"--as-user-via {spec} needs a stdio server; {target} is HTTP.",
                              hint="Use header:NAME or runner-token over HTTP.")
        if spec == "runner-token" and not os.environ.get(token_env):
            raise ConfigError(f"--as-user-via runner-token needs the runner token in ${token_env}.",
                              hint="Make one with `tether token add NAME --runner` and export it.")
        return cls(spec, token_env, dict(headers or {}))

    def env(self, user: str) -> dict[str, str]:
        return {self.via[4:]: user} if self.via.startswith("env:") else {}

    def http_headers(self, user: str) -> dict[str, str]:
        h = dict(self.headers)
        if self.via.startswith("header:"):
            h[self.via[7:]] = user
        elif self.via == "runner-token":
            h["Authorization"] = f"Bearer {os.environ[self.token_env]}"
            h["X-Tether-As-User"] = user
        return h


def parse_target(target: str) -> tuple[str, list[str] | str]:
    if target.startswith("stdio:"):
        argv = shlex.split(target[len("stdio:"):])
        if not argv:
            raise ConfigError("stdio: needs a command, e.g. stdio:'tether serve --project demo'.")
        return "stdio", argv
    if target.startswith(("http://", "https://")):
        return "http", target
    raise ConfigError(f"--server {target!r} is neither stdio:'CMD' nor an http(s) URL.",
                      hint="E.g. --server stdio:'tether serve --project demo-out' or "
                      "--server http://127.0.0.1:8765/mcp.")


@dataclass
class RunOptions:
    target: str
    server_name: str
    identity: Identity
    out: Path
    concurrency: int = 1
    max_turns: int = 6
    timeout_s: float = 120.0
    cases_file: str = ""
    recorded: Path | None = None  # a run folder whose traces the replay agent re-issues


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _load_index(out: Path, opts: RunOptions, agent: Agent) -> RunIndex:
    f = out / INDEX
    if f.exists() or f.is_symlink():  # a directory or binary file here is an error, not "new"
        text = read_text(f, "the run index", hint="Give a fresh --out folder.")
        try:
            idx = RunIndex.model_validate_json(text)
        except ValueError as e:
            raise ConfigError(f"{f} is not a tether run index: {str(e).splitlines()[0]}",
                              hint="Give a fresh --out folder.") from None
        if idx.server != opts.server_name or idx.agent != agent.name:
            raise ConfigError(
                f"{out} holds a run of server {idx.server!r} with agent {idx.agent!r}; this run "
                f"is {opts.server_name!r} with {agent.name!r}.",
                hint="Resume with the same --name and --agent, or give another --out folder.")
        return idx
    return RunIndex(run_id=f"{opts.server_name}-{uuid.uuid4().hex[:8]}", server=opts.server_name,
                    target=opts.target, agent=agent.name, model=agent.describe(),
                    cases_file=opts.cases_file, started_at=_now())


async def run_cases(cases: list[Case], agent: Agent, opts: RunOptions,
                    progress: Callable[[str], None] | None = None) -> RunIndex:
    """Run every case not already done in ``opts.out``; returns the index (also on disk).

    Cases of one user share one MCP session (a stdio server starts once per user, not per
    case); the users' sessions run concurrently, up to ``opts.concurrency``. A session that
    fails is reopened for the user's next case."""
    note = progress or (lambda _m: None)
    if opts.out.exists() and not opts.out.is_dir():
        raise ConfigError(f"--out {opts.out} is a file, not a run folder.",
                          hint="Give a folder (it is created when missing).")
    index = _load_index(opts.out, opts, agent)  # refuses a foreign index before writing anything
    traces = opts.out / TRACES
    if traces.exists() and not traces.is_dir():
        raise ConfigError(f"{traces} is a file; a run folder keeps its traces in a folder there.",
                          hint="Move the file away or give another --out folder.")
    traces.mkdir(parents=True, exist_ok=True)
    done = {e.case_id for e in index.entries if e.status == "done"
            and (opts.out / e.file).is_file()}
    index.entries = [e for e in index.entries if e.case_id in done]
    lock = asyncio.Lock()
    gate = asyncio.Semaphore(max(1, opts.concurrency))

    async def record(trace: Trace) -> None:
        name = f"{TRACES}/{_safe(trace.case_id)}.json"
        _write_atomic(opts.out / name, trace.model_dump_json(indent=1))
        async with lock:
            index.entries.append(IndexEntry(case_id=trace.case_id, file=name,
                                            status="error" if trace.error else "done",
                                            error=trace.error))
            index.entries.sort(key=lambda e: e.case_id)
            _write_atomic(opts.out / INDEX, index.model_dump_json(indent=1))
        note(f"{trace.case_id}: {'error: ' + trace.error if trace.error else 'done'}")

    async def user(group: list[Case]) -> None:
        async with gate:
            session: _Session | None = None
            try:
                for case in group:
                    if session is None:
                        session = _Session(opts, case.as_user)
                        try:
                            await session.open()
                        except Exception as e:  # the server did not start: this case's error
                            trace = _new_trace(case, agent, opts)
                            trace.error = _why(e)
                            trace.finished_at = _now()
                            await session.close()
                            session = None
                            await record(trace)
                            continue
                    changes = session.changes
                    trace = await run_case(case, agent, opts, session)
                    await record(trace)
                    # a list the case changed (a product mounted for its session) is not the
                    # next case's: each case starts from the list a new client sees
                    if (trace.error and session.broken) or session.changes != changes:
                        await session.close()
                        session = None
            finally:
                if session is not None:
                    await session.close()

    groups: dict[str, list[Case]] = {}
    for c in cases:
        if c.case_id in done:
            note(f"{c.case_id}: already done")
        else:
            groups.setdefault(c.as_user, []).append(c)
    await asyncio.gather(*(user(g) for g in groups.values()))
    index.finished_at = _now()
    _write_atomic(opts.out / INDEX, index.model_dump_json(indent=1))
    return index


def _safe(case_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in case_id)


def _why(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return _why(e.exceptions[0])
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"


def _new_trace(case: Case, agent: Agent, opts: RunOptions) -> Trace:
    return Trace(case_id=case.case_id, server=opts.server_name, target=opts.target,
                 agent=agent.name, model=agent.describe(), as_user=case.as_user,
                 user_role=case.user_role, question=case.question, case=case,
                 started_at=_now())


class _Session:
    """One MCP client session as one user: stdio (the user in the environment) or HTTP."""

    def __init__(self, opts: RunOptions, user: str):
        self.opts, self.user = opts, user
        self.stack = AsyncExitStack()
        self.client: Any = None
        self.tools: list[dict[str, Any]] = []
        self.broken = False
        self.changes = 0  # tools/list_changed notices received (either protocol era)
        self.listed_at = 0  # ... when the tools were last listed
        self.instructions: str | None = None  # the server's, from its initialize result

    async def _notice(self, message: Any) -> None:
        """A handshake-era server's notification: a changed tool list is counted."""
        import mcp_types as types

        if isinstance(message, types.ToolListChangedNotification):
            self.changes += 1

    async def _listen(self) -> None:
        """A 2026-07-28 server's events: every ToolsListChanged is counted (a server that
        offers no subscriptions/listen sends none)."""
        try:
            async with self.client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self.changes += 1
        except Exception:  # no listen on this server or in this era: nothing to count
            return

    async def list_tools(self) -> list[dict[str, Any]]:
        self.listed_at = self.changes
        listed = await self.client.list_tools(cache_mode="refresh")
        self.tools = [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                      for t in listed.tools]
        return self.tools

    async def relist(self) -> list[dict[str, Any]] | None:
        """The tools again if the server said its list changed since they were listed, as a
        real client does on tools/list_changed; else None."""
        await asyncio.sleep(0)  # a notice written just before the call's result is read first
        return await self.list_tools() if self.changes != self.listed_at else None

    async def open(self) -> None:
        from mcp import Client, StdioServerParameters

        kind, where = parse_target(self.opts.target)
        server: Any
        if kind == "stdio":
            from mcp.client.stdio import stdio_client

            assert isinstance(where, list)
            env = dict(os.environ) | self.opts.identity.env(self.user)
            # the server's own logging goes to a file in the run folder, not over our output
            errlog = self.stack.enter_context(
                open(self.opts.out / SERVER_LOG, "a", encoding="utf-8"))  # noqa: SIM115
            server = stdio_client(StdioServerParameters(command=where[0], args=where[1:],
                                                        env=env), errlog=errlog)
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await self.stack.enter_async_context(
                httpx2.AsyncClient(headers=self.opts.identity.http_headers(self.user),
                                   timeout=self.opts.timeout_s))
            server = streamable_http_client(str(where), http_client=http)
        self.client = await asyncio.wait_for(self.stack.enter_async_context(
            Client(server, message_handler=self._notice)), self.opts.timeout_s)
        self.instructions = getattr(self.client, "instructions", None)
        listener = asyncio.create_task(self._listen())
        self.stack.push_async_callback(_cancelled, listener)
        await self.list_tools()

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # a dead server's pipes may fail to close
            await self.stack.aclose()


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def run_case(case: Case, agent: Agent, opts: RunOptions, session: _Session) -> Trace:
    trace = _new_trace(case, agent, opts)
    try:
        await asyncio.wait_for(_drive(case, agent, opts, trace, session), opts.timeout_s)
    except TimeoutError:
        trace.error = f"the case ran longer than {opts.timeout_s:g}s"
        session.broken = True
    except Exception as e:  # a server or agent failure is recorded in the trace, not fatal
        trace.error = _why(e)
        session.broken = session.broken or not isinstance(e, TetherError)
    trace.finished_at = _now()
    return trace


async def _drive(case: Case, agent: Agent, opts: RunOptions, trace: Trace,
                 session: _Session) -> None:
    client = session.client
    trace.tools = list(session.tools)
    versions = {t["name"]: ToolContext.of(t).version for t in trace.tools}

    async def relist() -> list[dict[str, Any]] | None:
        """The list again when the server changed it; a tool first seen here joins the trace's
        tools (the labeller reads a called tool's definition there)."""
        listed = await session.relist()
        for t in listed or []:
            if t["name"] not in versions:
                trace.tools.append(t)
                versions[t["name"]] = ToolContext.of(t).version
        return listed
    simulator = UserSimulator(case)

    async def call_tool(name: str, arguments: dict[str, Any], turn: int) -> ToolCall:
        t0 = time.perf_counter()
        record = ToolCall(index=len(trace.tool_calls), turn=turn, name=name,
                          arguments=dict(arguments), tool_version=versions.get(name))
        try:
            result = await client.call_tool(name, arguments)
            texts = [getattr(c, "text", "") for c in result.content
                     if getattr(c, "type", "") == "text"]
            record.text = "\n".join(texts) if texts else None
            record.structured = result.structured_content
            record.is_error = bool(result.is_error)
            meta = getattr(result, "meta", None)
            record.meta = dict(meta) if meta else None
        except Exception as e:  # a protocol error is the call's result, as a model sees it
            record.is_error = True
            record.text = f"{type(e).__name__}: {e}"
        record.latency_ms = round((time.perf_counter() - t0) * 1000, 3)
        trace.tool_calls.append(record)
        return record

    def ask_user(question: str, turn: int) -> str:
        reply, source = simulator.answer(question)
        trace.clarifications.append(Clarification(turn=turn, question=question, answer=reply,
                                                  answered_from=source))
        return reply

    def record_turn(turn: ModelTurn) -> None:
        trace.turns.append(turn)

    recorded: dict[str, Any] = {}
    if opts.recorded is not None:
        f = opts.recorded / TRACES / f"{_safe(case.case_id)}.json"
        if f.exists():
            recorded = _recorded(f)
    ctx = AgentContext(case=case, tools=list(session.tools), call_tool=call_tool,
                       ask_user=ask_user, record_turn=record_turn, max_turns=opts.max_turns,
                       trace=recorded, relist=relist, instructions=session.instructions)
    answer = await agent.run(ctx)
    trace.final_answer = answer.text
    trace.answer = answer.value
    if answer.model:
        trace.model = answer.model


def _recorded(f: Path) -> dict[str, Any]:
    """A recorded trace for the replay agent; a directory, binary or non-JSON file is this
    case's error (a TetherError naming the file), not the run's."""
    hint = "Record the run again (`tether eval run --out DIR`) and replay that folder."
    text = read_text(f, "the recorded trace", error=TetherError, hint=hint)
    data = load_json(text, str(f), "the recorded trace", error=TetherError, hint=hint)
    if not isinstance(data, dict):
        raise TetherError("the recorded trace is not a JSON trace object.", where=str(f),
                          hint=hint)
    return data
