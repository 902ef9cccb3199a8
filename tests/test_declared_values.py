"""A value the governed definition names that the data does not hold (yet), on both warehouses:
a metric whose predicate lists dimension values accepts each of them as a filter (it matches no
row) instead of refusing it, while its enum stays the observed values and any other unknown
value is still refused. (In the demo's real-model run the model copied the backlog definition's
"NEW, PAID or ON_HOLD" into `status`; ON_HOLD has no row until the drift tour adds one, so the
call was refused and the model answered 0.)"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import call_tools
from tether.config import load_project
from tether.context.meta import enum_of
from tether.drift.publish import build
from tether.toolgen.generate import predicate_values


def governed_dimensions(project: Any) -> list[tuple[str, str, list[str]]]:
    """(metric, qualified dimension, the values its predicate names for it)."""
    out = []
    for name, m in project.config.metrics.items():
        named = predicate_values(m.predicate, "duckdb") if m.predicate else {}
        for dim in m.dimensions:
            if named.get(dim):
                out.append((name, dim, sorted(named[dim])))
    return out


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_value_the_definition_names_is_accepted_not_refused(
        which: str, demo_dir: Path, second_dir: Path, tmp_path: Path) -> None:
    src = demo_dir if which == "demo" else second_dir
    d = tmp_path / which
    d.mkdir()
    shutil.copy(src / "warehouse.duckdb", d / "warehouse.duckdb")
    shutil.copy(src / "tether.yaml", d / "tether.yaml")
    project = load_project(d)
    found = governed_dimensions(project)
    assert found, "each warehouse has a metric whose definition names its dimension's values"
    _, dim, named = found[0]
    table, column = dim.split(".")
    con = duckdb.connect(str(d / "warehouse.duckdb"))
    held = {r[0] for r in con.execute(f'SELECT DISTINCT "{column}" FROM "{table}"').fetchall()}
    gone = max(v for v in named if v in held)  # the data no longer holds it
    con.execute(f'DELETE FROM "{table}" WHERE "{column}" = ?', [gone])
    con.close()
    build(load_project(d))
    project = load_project(d)
    from tether.serve.server import TetherServer

    user = next(u for u, c in project.config.policies.users.items()
                if not project.config.policies.roles[c.role].row_filters
                and project.config.policies.roles[c.role].tools == ["*"])
    server = TetherServer(project, stdio_user=user)
    try:
        tool = next(v for v in server.current.values() if v.plan.kind == "metric"
                    and any(f.column == dim for f in v.plan.filters))
    finally:
        server.close()
    f = next(f for f in tool.plan.filters if f.column == dim)
    assert f.declared == [gone] or gone in f.declared
    assert gone not in (enum_of(tool.definition["inputSchema"]["properties"][f.param]) or [])
    rest = [v for v in named if v != gone and v in held]
    every, remaining, only, unknown = call_tools(project, user, [
        (tool.name, {f.param: named}), (tool.name, {f.param: rest}),
        (tool.name, {f.param: [gone]}), (tool.name, {f.param: ["NO-SUCH-VALUE"]})])
    assert not every.is_error, every.content[0].text
    assert every.structured_content["rows"] == remaining.structured_content["rows"]
    assert not only.is_error and not only.structured_content["rows"]
    assert unknown.is_error and "not allowed" in unknown.content[0].text
