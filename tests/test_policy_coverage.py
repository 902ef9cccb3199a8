"""`tether ci` item 13, on both warehouses: a product that holds a row-filtered product's key
(by its key columns, its key's identifier scheme, or a declared relationship) must be filtered
for the same roles. Both warehouses hold; removing any such product's filter from a copy fails
the item, naming the product, the role and what it joins; and the gap was real: the role read
rows of the parent outside its scope through it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import copy_project, run_cli
from tether.config import Project, load_project
from tether.drift.publish import build
from tether.policy.coverage import gaps, links
from tether.policy.inherit import reads
from tether.profiling import profile_project


def rows(project: Project, user: str, product: str) -> int:
    """How many rows of ``product`` ``user`` reads through the one policy path."""
    from sqlglot import exp

    from tether.serve.executor import Executor

    ex = Executor(project, b"k" * 32)
    try:
        rel = ex.relation(user, product)
        src = ex.source(project.config.products[product].source)
        q = exp.select(exp.func("COUNT", exp.Star())).from_(rel.subquery("q"))
        return int(src.run(src.render(q), rel.params, 30)[0][0])
    finally:
        ex.close()


def coverage(d: Path) -> dict[str, str]:
    res = run_cli("ci", "--project", str(d), "--json")
    assert res.returncode in (0, 1), res.stderr
    item: dict[str, str] = json.loads(res.stdout)[12]
    assert item["item"] == 13
    return item


@pytest.mark.parametrize("which", ["demo", "second"])
def test_every_child_of_a_filtered_product_is_filtered(which: str, demo_dir: Path,
                                                       second_dir: Path, tmp_path: Path) -> None:
    src = demo_dir if which == "demo" else second_dir
    d = copy_project(src, tmp_path / which)
    build(load_project(d))
    assert coverage(d)["status"] == "holds"
    project = load_project(d)
    config = project.config
    columns = {p.product: [c.column.name for c in p.columns] for p in profile_project(project)}
    children = [(role, link) for role, r in config.policies.roles.items() if r.row_filters
                for link in links(config, columns)
                if link.parent in r.row_filters and link.child in r.row_filters]
    assert children, "each warehouse has a filtered product below a filtered product"
    tried = set()
    inherited: set[str] = set()
    raw = yaml.safe_load((d / "tether.yaml").read_text())
    for role, link in children:
        if (role, link.child) in tried:
            continue
        tried.add((role, link.child))
        cut = copy.deepcopy(raw)
        del cut["policies"]["roles"][role]["row_filters"][link.child]
        e = tmp_path / f"{which}-{role}-{link.child}"
        e.mkdir()
        (e / "tether.yaml").write_text(yaml.safe_dump(cut, sort_keys=False))
        edited = load_project(e)
        found = gaps(edited.config, columns)
        user = next(u for u, c in config.policies.users.items() if c.role == role)
        if reads(config, link.child, "duckdb"):
            # a product whose SQL reads a filtered product inherits its filter: no gap, and
            # the role reads no more of it without a filter of its own
            assert not [g for g in found if g.product == link.child]
            assert rows(edited, user, link.child) == rows(project, user, link.child)
            inherited.add(link.child)
            continue
        assert [(g.role, g.product) for g in found if g.product == link.child] == [
            (role, link.child)]
        # through the CLI: `tether ci` reads the columns from the last check's state
        (e / ".tether").mkdir()
        for f in (d / ".tether").iterdir():
            (e / ".tether" / f.name).write_bytes(f.read_bytes())
        item = coverage(e)
        assert item["status"] == "fails"
        assert f"{link.child} has no row filter for role {role}" in item["why"]
        # and the gap is real: a user of the role reads more of the child without its filter
        assert rows(edited, user, link.child) > rows(project, user, link.child)
    assert len(tried) - len(inherited) >= 2


def test_a_key_named_id_links_nothing_by_its_name() -> None:
    """Tables keyed `id` all "hold" each other's key by name; only a named key (or a scheme, or
    a declared relationship) makes one product the child of another."""
    from tether.config import TetherConfig

    def config(key: str, relationships: list[dict[str, str]]) -> TetherConfig:
        return TetherConfig.model_validate({
            "sources": {"main": {"url": "duckdb:///w.duckdb"}},
            "products": {"tickets": {"table": "tickets", "primary_key": [key]},
                         "notes": {"table": "notes", "primary_key": ["note_id"]}},
            "relationships": relationships,
            "policies": {"roles": {"r": {"row_filters": {"tickets": "region = {{ user.region }}"}}},
                         "users": {"u": {"role": "r", "region": "X"}}}})

    columns = {"tickets": ["id", "ticket_id", "region"], "notes": ["note_id", "id", "ticket_id"]}
    assert gaps(config("id", []), columns) == []
    assert [(g.role, g.product) for g in gaps(config("ticket_id", []), columns)] == [("r", "notes")]
    linked = gaps(config("id", [{"from": "notes.ticket_id", "to": "tickets.ticket_id"}]), columns)
    assert [(g.product, g.link.via) for g in linked] == [
        ("notes", "relationship notes.ticket_id -> tickets.ticket_id")]


def _coverage_config(products: dict[str, Any], filters: dict[str, str],
                     deny: list[str] | None = None, lineage: list[dict[str, str]] | None = None
                     ) -> Any:
    from tether.config import TetherConfig

    return TetherConfig.model_validate({
        "sources": {"main": {"url": "duckdb:///w.duckdb"}},
        "products": products, "lineage": lineage or [],
        "policies": {"roles": {"r": {"row_filters": filters,
                                     "tables": {"deny": deny or []}}},
                     "users": {"u": {"role": "r", "depot": "X"}}}})


DEPOTS = {"depots": {"table": "depots", "primary_key": ["depot_code"]},
          "shipments": {"table": "shipments", "primary_key": ["shipment_no"]},
          "parcels": {"table": "parcels", "primary_key": ["parcel_no"]},
          "scans": {"table": "scans", "primary_key": ["scan_no"]}}
DEPOT_COLUMNS = {"depots": ["depot_code", "city"], "shipments": ["shipment_no", "depot_code"],
                 "parcels": ["parcel_no", "shipment_no"], "scans": ["scan_no", "parcel_no"]}
OWN = "depot_code = {{ user.depot }}"


def test_scope_follows_a_chain_through_a_denied_product() -> None:
    """shipments filtered, parcels denied: scans (which hold the parcel key) still belong to
    shipments outside the scope, and are a gap."""
    config = _coverage_config(DEPOTS, {"shipments": OWN}, deny=["parcels"])
    found = {(g.product, g.parent_is) for g in gaps(config, DEPOT_COLUMNS)}
    assert ("scans", "denied") in found and not any(p == "parcels" for p, _ in found)


def test_holding_a_denied_products_key_is_no_gap() -> None:
    """depots denied, nothing filtered: shipments hold a depot's code, but holding a key is not
    reading the depot's rows (before, item 13 failed for ever, with no way to say so)."""
    config = _coverage_config(DEPOTS, {}, deny=["depots"])
    assert gaps(config, DEPOT_COLUMNS) == []
    # a filter elsewhere still scopes its own children
    config = _coverage_config(DEPOTS, {"shipments": OWN}, deny=["depots"])
    assert {g.product for g in gaps(config, DEPOT_COLUMNS)} == {"parcels"}


def test_a_composite_key_held_in_part_links() -> None:
    products = {"lines": {"table": "lines", "primary_key": ["order_no", "line_no"]},
                "returns": {"table": "returns", "primary_key": ["return_no"]}}
    columns = {"lines": ["order_no", "line_no", "depot_code"],
               "returns": ["return_no", "order_no"]}
    config = _coverage_config(products, {"lines": OWN})
    found = gaps(config, columns)
    assert [(g.product, g.link.via) for g in found] == [
        ("returns", "order_no, part of the key of lines")]


def test_a_childs_unrelated_filter_does_not_stand_in_for_the_parents() -> None:
    unrelated = _coverage_config(DEPOTS, {"shipments": OWN, "parcels": "parcel_no > 0"})
    found = [g for g in gaps(unrelated, DEPOT_COLUMNS) if g.product == "parcels"]
    assert found and found[0].unrelated == "parcel_no > 0"
    assert "does not follow the filter on shipments" in found[0].sentence()
    related = _coverage_config(DEPOTS, {
        "shipments": OWN, "parcels": "shipment_no IN (SELECT s.shipment_no FROM shipments s "
                                     "WHERE s.depot_code = {{ user.depot }})"})
    assert not [g for g in gaps(related, DEPOT_COLUMNS) if g.product == "parcels"]


def test_lineage_and_sql_make_children_and_sql_inherits() -> None:
    products = dict(DEPOTS) | {
        "daily": {"table": "daily", "primary_key": ["day"]},
        "copy": {"sql": "WITH x AS (SELECT * FROM shipments) SELECT * FROM x"}}
    columns = DEPOT_COLUMNS | {"daily": ["day", "n"], "copy": ["shipment_no", "depot_code"]}
    config = _coverage_config(products, {"shipments": OWN, "parcels": "shipment_no IN (SELECT "
                                         "s.shipment_no FROM shipments s WHERE s.depot_code = "
                                         "{{ user.depot }})", "scans": "parcel_no IN (SELECT "
                                         "p.parcel_no FROM parcels p JOIN shipments s ON "
                                         "s.shipment_no = p.shipment_no WHERE s.depot_code = "
                                         "{{ user.depot }})"},
                              lineage=[{"from": "shipments", "to": "daily",
                                        "via": "transform:rollup"}])
    found = {g.product: g for g in gaps(config, columns)}
    assert "daily" in found and "downstream of it in the lineage" in found["daily"].link.via
    assert "copy" not in found  # it reads shipments through the policy: inherits its filter
