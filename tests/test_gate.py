"""One gate for every publisher: a change that exposes a restricted column is blocked wherever
it comes from (tether check, tether build, a review approval, a version written into the
registry by anything else), and a running server never serves it."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from conftest import copy_project, free_port, http_process, run_cli
from tether.config import load_project
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.drift.publish import build
from tether.registry import NewVersion, open_registry

TETHER = str(Path(sys.executable).parent / "tether")
TOOL = "customers_by_region_and_segment"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    d = tmp_path / "gate"
    init_demo(d, scale=0.05)
    assert build(load_project(d)).exit_code == 0
    return d


def _listing(url: str, token: str) -> tuple[dict[str, Any], Any]:
    async def go() -> tuple[dict[str, Any], Any]:
        from mcp.client.streamable_http import streamable_http_client

        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(url, http_client=http)) as c:  # type: ignore[arg-type]
            tools = {t.name: t for t in (await c.list_tools(cache_mode="refresh")).tools}
            return tools, await c.call_tool(TOOL, {"limit": 5})

    return anyio.run(go)


def _exposing(definition: dict[str, Any], plan: dict[str, Any]) -> tuple[dict[str, Any],
                                                                        dict[str, Any]]:
    """The published customers tool rewritten to return tax_id: what a buggy or hostile
    publisher would write straight into the registry."""
    d, p = copy.deepcopy(definition), copy.deepcopy(plan)
    d["outputSchema"]["properties"]["rows"]["items"]["properties"]["tax_id"] = {"type": "string"}
    d["_meta"]["tether/context"]["source_of_truth"]["tax_id"] = "customers.tax_id"
    d["_meta"]["tether/context"]["version"] = "9.0.0"
    p["select"] = p["select"].replace('SELECT ', 'SELECT "customers"."tax_id", ', 1)
    return d, p


def test_a_blocked_change_stays_unpublished_and_a_running_server_never_serves_it(
        demo: Path) -> None:
    token = run_cli("token", "add", "fin.ana", "--project", str(demo)).stdout.strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [TETHER, "serve", "--project", str(demo), "--transport", "http", "--port", str(port)]
    with http_process(argv, port, timeout=30):
        tools, first = _listing(url, token)
        before = tools[TOOL].meta["tether/context"]["version"]
        assert not first.is_error and "tax_id" not in json.dumps(first.structured_content)

        apply(demo, "unmask-tax-id")  # someone lifts the restriction in tether.yaml
        checked = run_cli("check", "--project", str(demo), "--json")
        assert checked.returncode == 12, checked.stderr
        built = run_cli("build", "--project", str(demo), "--json")
        assert built.returncode == 12, built.stdout + built.stderr
        outcome = {t["name"]: t["outcome"] for t in json.loads(built.stdout)["tools"]}
        assert outcome[TOOL] == "blocked"
        assert "tax_id" not in (demo / "tools" / f"{TOOL}.json").read_text()

        # and a version written into the registry by any other road is withheld by the server
        registry = open_registry(load_project(demo))
        try:
            current = registry.current()[TOOL]
            definition, plan = _exposing(current.definition, current.plan)
            registry.publish([NewVersion(TOOL, "9.0.0", definition, plan)], "bypass",
                             load_project(demo).now())
        finally:
            registry.close()
        deadline = time.monotonic() + 3.0  # the server polls the registry every 0.5 s
        while time.monotonic() < deadline:
            tools, result = _listing(url, token)
            assert tools[TOOL].meta["tether/context"]["version"] == before
            assert "tax_id" not in json.dumps(tools[TOOL].model_dump(by_alias=True))
            assert not result.is_error and "tax_id" not in json.dumps(result.structured_content)
            time.sleep(0.3)


def test_build_routes_a_breaking_change_to_review_like_check(demo: Path) -> None:
    apply(demo, "rename")  # orders.currency -> currency_code: breaking
    res = run_cli("build", "--project", str(demo), "--json")
    assert res.returncode == 11, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["exit_code"] == 11 and data["reviews"]
    assert {t["outcome"] for t in data["tools"]} >= {"pending"}
    again = run_cli("build", "--project", str(demo), "--json")  # the same candidate waits once
    assert again.returncode == 11 and json.loads(again.stdout)["reviews"] == []


def test_approving_a_review_after_the_policy_moved_is_blocked(demo: Path) -> None:
    from tether.drift.check import Blocked, check, decide

    apply(demo, "rename")
    result = check(load_project(demo))
    review = result.reviews[0]
    # the column the pending change reads becomes restricted before anyone approves it
    p = demo / "tether.yaml"
    p.write_text(p.read_text().replace('restricted: [customers.tax_id, "*.ssn*"]',
                                       'restricted: [customers.tax_id, "*.ssn*", '
                                       'orders.currency_code]'))
    with pytest.raises(Blocked, match="restricted"):
        decide(load_project(demo), review, True, "fin.ana")
    registry = open_registry(load_project(demo))
    try:
        status = {r["id"]: r["status"] for r in registry.reviews()}
        held = [t["name"] for r in registry.reviews() if r["id"] == review
                for t in r["body"]["tools"]]
        current = registry.current()
    finally:
        registry.close()
    assert status[review] == "blocked" and held
    for name in held:  # still the version from before the change
        assert current[name].version == "1.0.0"
        assert "currency_code" not in json.dumps(current[name].definition)


@pytest.mark.parametrize(("edit", "says", "key"), [
    (("    sup.sam: {role: support_agent}", "    sup.sam: {role: support_agent}"),
     None, None),
    (("masks: {customers.email: redact}", "masks: {customers.emial: redact}"),
     "names no column of customers", "masks"),
    (('restricted: [customers.tax_id, "*.ssn*"]', 'restricted: [customers.taxid, "*.ssn*"]'),
     "names no column of customers", "restricted"),
    (('orders: "sales_region = {{ user.region }}"', 'orders: "sales_regoin = {{ user.region }}"'),
     "does not compile", "orders"),
    (('orders: "sales_region = {{ user.region }}"', 'orders: "sales_region = = {{ user.region }}"'),
     "does not", "orders"),
    # the freshness condition and a per-row unit are checked against the source too
    (("freshness: {column: loaded_at}",
      'freshness: {column: loaded_at, where: "loaded_at <= {{ clock }} AND lodaed_at > 0"}'),
     "freshness condition of", "freshness"),
    (("quantity: {unit: count}", "quantity: {unit_column: curency}"),
     "declares column 'curency'", "unit_column"),
])
def test_a_policy_naming_something_missing_fails_closed(demo_dir: Path, tmp_path: Path,
                                                        edit: tuple[str, str], says: str | None,
                                                        key: str | None) -> None:
    d = copy_project(demo_dir, tmp_path / "typo")
    p = d / "tether.yaml"
    text = p.read_text()
    assert edit[0] in text
    p.write_text(text.replace(edit[0], edit[1]))
    res = run_cli("build", "--project", str(d))
    if says is None:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 2, res.stdout + res.stderr
    assert says in res.stderr and "Traceback" not in res.stderr
    line = next(i for i, x in enumerate(p.read_text().splitlines(), 1) if edit[1] in x)
    assert f"tether.yaml:{line}" in res.stderr, res.stderr
    assert not (d / "tools").exists()  # nothing published
    served = run_cli("serve", "--project", str(d), "--as-user", "fin.ana")
    assert served.returncode == 2 and "Traceback" not in served.stderr


def test_a_mask_on_an_unknown_product_is_a_load_error(demo_dir: Path, tmp_path: Path) -> None:
    d = copy_project(demo_dir, tmp_path / "typo")
    p = d / "tether.yaml"
    p.write_text(p.read_text().replace("masks: {customers.email: redact}",
                                       "masks: {custmers.email: redact}"))
    res = run_cli("tools", "--project", str(d))
    assert res.returncode == 2 and "unknown product 'custmers'" in res.stderr
    assert "Did you mean 'customers'" in res.stderr
