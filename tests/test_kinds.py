"""Tool kinds are registered: every built-in kind declares its generation and its runner once,
and a kind added from outside tether (as a plugin would) is generated, checked and run through
the same policy path as the built-in ones, without an edit to tether."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

from conftest import copy_project, piped
from tether.config import load_project
from tether.profiling import profile_project
from tether.serve import runners as serve_kinds
from tether.serve.executor import Executor, jsonable
from tether.serve.kinds import Answered, Call, ToolError
from tether.toolgen import kinds as toolgen_kinds
from tether.toolgen.generate import GROUNDED, generate_grounded
from tether.toolgen.model import READ_ONLY, GeneratedTool, QueryPlan
from tether.toolgen.modes import GENERIC_KINDS
from tether.toolgen.shared import Ctx, closed, tool_meta

KIND = "row_count"


def _count_tools(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    """One tool per product: how many rows the caller may see of it."""
    out = []
    for product in sorted(ctx.profiles):
        meta = tool_meta(ctx, KIND, [], {}, [product], source_of_truth={}, canonical_ids={},
                         deprecated={}, limits={"max_rows": 1})
        out.append(GeneratedTool(
            name=f"how_many_{product}", description=f"How many {product} rows you may see.",
            input_schema=closed({}), annotations=dict(READ_ONLY), meta=meta,
            plan=QueryPlan(kind=KIND, product=product, source=ctx.project.source_name(product),
                           dialect=ctx.dialect(product))))
    return out


def _run_count(ex: Executor, call: Call) -> Answered:
    """Through the caller's entitled relation, like every built-in kind."""
    product = call.plan.product or ""
    src = ex.source(call.plan.source)
    query = exp.select(exp.Count(this=exp.Star()).as_("n")).from_(
        exp.to_table(ex.project.config.products[product].table or product).as_(product))
    secured, params = ex.secure(query, call.user)
    got = ex.fetch(src, src.render(secured), params, 1)
    rows = [{"n": jsonable(got.rows[0][0])}]
    return Answered(ex.result(call, rows, [product], paged=False),
                    ex.evidence(call, src, src.display(secured), params, [product]))


@pytest.fixture
def plugin() -> Any:
    kind = toolgen_kinds.register(toolgen_kinds.Kind(KIND, generate=_count_tools))
    runner = serve_kinds.register(serve_kinds.Runner(
        KIND, _run_count, opening=lambda plan, result: f"{result['rows'][0]['n']} rows"))
    yield kind
    toolgen_kinds.KINDS.pop(KIND)
    serve_kinds.RUNNERS.pop(runner.kind)


def test_every_built_in_kind_is_registered_on_both_sides() -> None:
    built_in = [k.name for k in GROUNDED] + [k.name for k in GENERIC_KINDS]
    assert built_in == ["list", "api", "metric", "write", "probe", "search", "rows", "describe",
                        "catalog",
                        "sql"]
    for name in built_in:
        assert toolgen_kinds.KINDS[name].name == name
        runner = serve_kinds.runner(name)
        assert runner is not None or toolgen_kinds.kind(name).over_listings, name
        # the server answers search itself; the generic listing runs its product's listing
        if name == "search":
            assert runner is not None and runner.run is None and runner.answer_here is not None
    assert serve_kinds.runner("rows") is None and toolgen_kinds.kind("rows").over_listings
    assert toolgen_kinds.kind("no such kind") == toolgen_kinds.Kind("no such kind")


def test_a_kind_added_from_outside_is_generated_and_run_through_the_policy_path(
        demo_dir: Path, tmp_path: Path, plugin: Any) -> None:
    d = copy_project(demo_dir, tmp_path / "plugin")
    project = load_project(d)
    profiles = {p.product: p for p in profile_project(project)}
    tools = {t.name: t for t in generate_grounded(project, profiles, (*GROUNDED, plugin))}
    assert "how_many_customers" in tools
    assert "how_many_customers" not in {t.name for t in generate_grounded(project, profiles)}
    ex = Executor(project, cursor_key=b"k" * 32)
    try:
        def count(user: str) -> tuple[int, Answered]:
            t = tools["how_many_customers"]
            answered = piped(ex).answer(Call(user, t.name, "1.0.0", t.wire(), t.plan, {}))
            return int(answered.result["rows"][0]["n"]), answered

        everyone, _ = count("fin.ana")
        emea, answered = count("mgr.emea")
        assert 0 < emea < everyone  # the regional manager's row filter applied
        assert answered.evidence.policy_predicates  # and stated in the evidence
        # the caller's region bound as a parameter, never written into the statement
        assert "EMEA" in answered.evidence.params.values()
        assert "EMEA" not in (answered.evidence.sql or "")
        t = tools["how_many_customers"]
        with pytest.raises(ToolError, match="unknown argument"):  # the same checks first
            piped(ex).answer(Call("fin.ana", t.name, "1.0.0", t.wire(), t.plan, {"region": "EMEA"}))
    finally:
        ex.close()
