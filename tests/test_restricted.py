"""Restricted columns, on both warehouses: named in one policy-sourced sentence of the probe's
description and nowhere else (schemas, probe results), not counted by the gate as exposure,
and refused with reason `restricted` whoever asks, by a tool argument, a count, a total or
run_sql."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from tether.config import Project
from tether.serve.pipeline import NoRestrictedName
from tether.serve.server import TetherServer
from tether.toolgen.generate import NOT_AVAILABLE, PROBE


def _restricted(server: TetherServer) -> dict[str, list[str]]:
    """{product: its restricted columns} as the server's policy path reads them."""
    out = {}
    ex = server.executor
    step = next(s for s in server.policy.pipeline.steps.before
                if isinstance(s, NoRestrictedName))
    for product in server.project.config.products:
        names = sorted(n for n in step.names(ex, product) if "." not in n)
        if names:
            out[product] = names
    return out


def _calls(server: TetherServer, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def go() -> list[Any]:
        async with Client(server.server) as c:
            return [await c.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


@pytest.mark.parametrize("which", ["demo", "second"])
def test_named_once_in_the_probe_and_nowhere_else(which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    for user in project.config.policies.users:
        server = TetherServer(project, stdio_user=user)
        try:
            hidden = _restricted(server)
            assert hidden, "each warehouse restricts at least one column"
            shown = {v.name: v.definition for v in server.visible(user)}
            probes = _calls(server, [(PROBE, {"product": p}) for p in hidden
                                     if p in shown[PROBE]["inputSchema"]["properties"]
                                     ["product"]["enum"]])
        finally:
            server.close()
        probe = shown[PROBE]
        said = [s for s in probe["description"].split(". ") if s.startswith(NOT_AVAILABLE)]
        assert len(said) == 1, probe["description"]
        assert probe["_meta"]["tether/context"]["sources"][said[0].rstrip(".") + "."] == "policy"
        for product, columns in hidden.items():
            for column in columns:
                assert f"{product}.{column}" in said[0]
        # the sentence's provenance (in _meta, never shown to a model) is the sentence itself
        sources = dict(probe["_meta"]["tether/context"]["sources"])
        sources.pop(said[0].rstrip(".") + ".")
        rest = json.dumps({**probe, "description": probe["description"].replace(said[0], ""),
                           "_meta": {**probe["_meta"], "tether/context": {
                               **probe["_meta"]["tether/context"], "sources": sources}}})
        for name, definition in shown.items():
            text = rest if name == PROBE else json.dumps(definition)
            for columns in hidden.values():
                for column in columns:
                    assert column not in text.lower(), (user, name, column)
        for r in probes:
            assert not r.is_error
            names = {c["name"].lower() for c in r.structured_content["columns"]}
            assert not names & {c for cols in hidden.values() for c in cols}


@pytest.mark.parametrize("which", ["demo", "second"])
def test_asking_for_one_is_refused_by_every_path(which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    checked = 0
    for user in project.config.policies.users:
        server = TetherServer(project, stdio_user=user)
        generic = TetherServer(project, mode="generic", stdio_user=user)
        try:
            hidden = _restricted(server)
            asks: list[tuple[str, dict[str, Any]]] = []
            for v in server.visible(user):
                if v.plan.kind != "list" or v.plan.product not in hidden:
                    continue
                for column in hidden[v.plan.product]:
                    asks.append((v.name, {column: "x"}))
                    props = v.definition["inputSchema"]["properties"]
                    if "count_by" in props:
                        asks.append((v.name, {"count_by": column}))
                    if "sum_and_average_of" in props:
                        asks.append((v.name, {"sum_and_average_of": column}))
            results = _calls(server, asks)
            config = project.config
            sql = [("run_sql", {"sql": f"SELECT {column} FROM {config.products[p].table}"})
                   for p, columns in hidden.items() for column in columns
                   if config.products[p].table
                   and "run_sql" in {v.name for v in generic.visible(user)}]
            sql_results = _calls(generic, sql)
        finally:
            server.close()
            generic.close()
        for (name, args), r in zip(asks + sql, results + sql_results, strict=True):
            assert r.is_error and r.content[0].text.startswith("Not permitted"), (user, name, args)
            refusal = (r.meta or {}).get("tether/refusal") or {}
            assert refusal.get("reason") in ("restricted", "denied_table"), (name, args, refusal)
            checked += refusal.get("reason") == "restricted"
    assert checked >= 4
