"""Arguments as models write them, on both test warehouses and both engines: an unknown name
that names exactly one parameter (its column, its identifier scheme, a glossary word for its
column, the name in another case style, or a part of its name) is used as that parameter, and a
value given to a parameter that does not hold it is moved to the one that does; the result says
so in `interpreted` / `moved_values` and in its sentence, and answers exactly what the call
written right answers. A name that could mean two parameters, or none, is refused with the
candidates. A caller's row filter holds through every interpretation: the interpreted call is
refused where the call written right is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conftest import call_tools, copy_project
from tether.config import load_project
from tether.context.meta import enum_of
from tether.drift.publish import build

WAREHOUSES = [("demo", "demo_dir"), ("demo", "pg_demo_dir"), ("second", "second_dir"),
              ("second", "pg_second_dir")]


@pytest.fixture(scope="module", params=WAREHOUSES, ids=lambda w: w[1])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[str, Any]]:
    which, fixture = request.param
    d = copy_project(request.getfixturevalue(fixture), tmp_path_factory.mktemp(fixture))
    build(load_project(d))
    yield which, load_project(d)


def _tool(project: Any, name: str) -> dict[str, Any]:
    import json

    return json.loads((project.root / "tools" / f"{name}.json").read_text())


def _first(project: Any, user: str, tool: str, column: str) -> Any:
    [r] = call_tools(project, user, [(tool, {"limit": 1})])
    assert not r.is_error, r.content
    return r.structured_content["rows"][0][column]


def _same(a: Any, b: Any) -> None:
    """Two results answer the same: rows, counts and window (beside what was interpreted)."""
    assert not a.is_error and not b.is_error, (a.content, b.content)
    x, y = dict(a.structured_content), dict(b.structured_content)
    for k in ("interpreted", "moved_values", "next_cursor"):
        x.pop(k, None)
        y.pop(k, None)
    assert x == y


def _cases(which: str, project: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(interpreted: (user, tool, given, right, said), refused: (user, tool, given, says),
    scoped: (user, tool, given, right))."""
    if which == "demo":
        uuid = _first(project, "fin.ana", "support_tickets_for_customer", "customer_id")
        return ([
            ("fin.ana", "support_tickets_for_customer", {"customer_id": uuid},
             {"canonical_customer_id": uuid}, {"interpreted": {"customer_id":
                                                               "canonical_customer_id"}}),
            ("fin.ana", "customers_by_region_and_segment", {"region": "EMEA", "limit": 3},
             {"sales_region": "EMEA", "limit": 3}, {"interpreted": {"region": "sales_region"}}),
            ("fin.ana", "orders_by_status_and_customer", {"salesRegion": "APAC", "limit": 2},
             {"sales_region": "APAC", "limit": 2},
             {"interpreted": {"salesRegion": "sales_region"}}),
            ("fin.ana", "orders_by_status_and_customer", {"status": "emea", "limit": 2},
             {"sales_region": "EMEA", "limit": 2}, {"moved_values": {"EMEA": "sales_region"}}),
            # a filter object, as models write one: opened, each name read as the others are
            ("fin.ana", "customers_by_region_and_segment",
             {"filter": {"region": "EMEA", "segment": ["SMB"]}, "limit": 3},
             {"sales_region": "EMEA", "segment": ["SMB"], "limit": 3},
             {"interpreted": {"filter.region": "sales_region", "filter.segment": "segment"}}),
            # a direction written where the sort key goes: the order it names (counts sorted)
            ("fin.ana", "customers_by_region_and_segment",
             {"count_by": "segment", "order_by": "desc"},
             {"count_by": "segment", "order": "desc"}, {"moved_values": {"desc": "order"}}),
            # a name that means no parameter, with a value only one parameter holds
            ("fin.ana", "customers_by_region_and_segment", {"pipeline": ["enterprise"],
                                                            "limit": 3},
             {"segment": ["ENTERPRISE"], "limit": 3}, {"interpreted": {"pipeline": "segment"}}),
            # a value repeated where it does not fit, beside the filter that holds it: dropped
            ("fin.ana", "customers_by_region_and_segment",
             {"sales_region": ["ENTERPRISE"], "segment": "enterprise", "limit": 3},
             {"segment": "ENTERPRISE", "limit": 3}, {"moved_values": {"ENTERPRISE": "segment"}}),
            # an id given to two parameters, missing one's format: the other reads it (a
            # country code's on DuckDB; PostgreSQL's orders hold no nested address to filter)
            *([("fin.ana", "orders_by_status_and_customer",
                {"ship_to_country": "A-1000000", "crm_account_id": "A-1000000", "limit": 2},
                {"crm_account_id": "A-1000000", "limit": 2},
                {"moved_values": {"A-1000000": "crm_account_id"}})]
              if "ship_to_country" in _tool(project, "orders_by_status_and_customer")[
                  "inputSchema"]["properties"] else []),
            # its own value in another case: spelled as the enum lists it
            ("fin.ana", "customers_by_region_and_segment", {"segment": ["smb"], "limit": 3},
             {"segment": ["SMB"], "limit": 3}, {"moved_values": {"SMB": "segment"}}),
            # a value that is no order id but the name of the parameter given beside it
            ("fin.ana", "orders_by_status_and_customer",
             {"order_id": "crm_account_id", "crm_account_id": "A-1000000", "limit": 2},
             {"crm_account_id": "A-1000000", "limit": 2},
             {"interpreted": {"order_id": "crm_account_id"}}),
            # a column named by some of its words where a cut is asked for: that cut
            ("fin.ana", "customers_by_region_and_segment", {"count_by": ["region"]},
             {"count_by": "sales_region"},
             {"interpreted": {"count_by region": "count_by sales_region"}}),
        ], [
            ("fin.ana", "customers_by_region_and_segment", {"count_by": "colour"},
             "is not allowed; allowed values"),
            ("fin.ana", "customers_by_region_and_segment", {"filter": {"colour": "red"}},
             "unknown argument(s) filter.colour"),
            # a restricted name inside an object is refused as at the top
            ("fin.ana", "customers_by_region_and_segment", {"filter": {"tax_id": "x"}},
             "is restricted"),
            ("fin.ana", "orders_by_status_and_customer", {"id": "x"}, "could mean"),
            ("fin.ana", "orders_by_status_and_customer", {"colour": "red"}, "unknown argument"),
        ], [
            ("mgr.emea", "customers_by_region_and_segment", {"region": "AMER"},
             {"sales_region": "AMER"}),
            ("mgr.emea", "orders_by_status_and_customer", {"status": "AMER"},
             {"sales_region": "AMER"}),
            ("mgr.emea", "customers_by_region_and_segment", {"region": "EMEA", "limit": 5},
             {"sales_region": "EMEA", "limit": 5}),
            ("mgr.emea", "customers_by_region_and_segment", {"filter": {"sales_region": "AMER"}},
             {"sales_region": "AMER"}),
            ("mgr.emea", "customers_by_region_and_segment", {"bucket": "amer"},
             {"sales_region": "AMER"}),
            ("mgr.emea", "orders_by_status_and_customer", {"status": "AMER",
                                                           "sales_region": "AMER"},
             {"sales_region": "AMER"}),
            ("mgr.emea", "orders_by_status_and_customer", {"order_id": "sales_region",
                                                           "sales_region": ["AMER"]},
             {"sales_region": ["AMER"]}),
        ])
    visits = _tool(project, "visits_by_clinic_kind_and_state")["inputSchema"]["properties"]
    districts = enum_of(visits["district"]) or []
    kinds = set(enum_of(visits["visit_kind"]) or [])
    state = next(s for s in enum_of(visits["visit_state"]) or [] if s not in kinds)
    member = _first(project, "aud.ines", "insurance_claims_by_member_and_state", "member_no")
    own = project.config.policies.users["lead.harbor"].attributes()["district"]
    other = next(d for d in districts if d != own)
    return ([
        ("aud.ines", "visits_by_clinic_kind_and_state", {"catchment": districts[0], "limit": 4},
         {"district": districts[0], "limit": 4}, {"interpreted": {"catchment": "district"}}),
        ("aud.ines", "patients_by_home_district", {"district": districts[1], "limit": 4},
         {"home_district": districts[1], "limit": 4},
         {"interpreted": {"district": "home_district"}}),
        ("aud.ines", "insurance_claims_by_member_and_state", {"memberNo": member},
         {"member_no": member}, {"interpreted": {"memberNo": "member_no"}}),
        ("aud.ines", "patients_by_home_district", {"count_by": "district"},
         {"count_by": "home_district"},
         {"interpreted": {"count_by district": "count_by home_district"}}),
        # one identifier word for another (id for no), inside a filter object too
        ("aud.ines", "insurance_claims_by_member_and_state", {"filter": {"member_id": member}},
         {"member_no": member}, {"interpreted": {"filter.member_id": "member_no"}}),
        ("aud.ines", "visits_by_clinic_kind_and_state", {"visit_kind": state, "limit": 3},
         {"visit_state": state, "limit": 3}, {"moved_values": {state: "visit_state"}}),
        ("aud.ines", "visits_by_clinic_kind_and_state",
         {"where": {"catchment": districts[0]}, "limit": 4},
         {"district": districts[0], "limit": 4},
         {"interpreted": {"where.catchment": "district"}}),
        ("aud.ines", "visits_by_clinic_kind_and_state",
         {"count_by": "district", "order_by": "ASC"},
         {"count_by": "district", "order": "asc"}, {"moved_values": {"asc": "order"}}),
        ("aud.ines", "visits_by_clinic_kind_and_state", {"bucket": state.lower(), "limit": 3},
         {"visit_state": state, "limit": 3}, {"interpreted": {"bucket": "visit_state"}}),
        # an id given to two parameters, missing one's format: the other reads it
        ("aud.ines", "visits_by_clinic_kind_and_state",
         {"clinic_code": member, "patient_uid": member, "limit": 3},
         {"patient_uid": member, "limit": 3}, {"moved_values": {member: "patient_uid"}}),
        # ... and beside others of that filter's values: both apply, so only it
        ("aud.ines", "visits_by_clinic_kind_and_state",
         {"visit_kind": [state], "visit_state": [state, *[
             s for s in enum_of(visits["visit_state"]) or [] if s != state][:2]], "limit": 3},
         {"visit_state": [state], "limit": 3}, {"moved_values": {state: "visit_state"}}),
        ("aud.ines", "visits_by_clinic_kind_and_state",
         {"visit_kind": [state], "visit_state": [state], "limit": 3},
         {"visit_state": [state], "limit": 3}, {"moved_values": {state: "visit_state"}}),
        # a value that is no key of its own but the name of a parameter given beside it
        ("aud.ines", "insurance_claims_by_member_and_state",
         {"claim_ref": "member_no", "member_no": member}, {"member_no": member},
         {"interpreted": {"claim_ref": "member_no"}}),
        ("aud.ines", "insurance_claims_by_member_and_state",
         {"visit_no": "member_no", "member_no": member}, {"member_no": member},
         {"interpreted": {"visit_no": "member_no"}}),
    ], [
        ("aud.ines", "insurance_claims_by_member_and_state", {"claim": "x"}, "could mean"),
        ("aud.ines", "visits_by_clinic_kind_and_state", {"wardrobe": 1}, "unknown argument"),
        ("aud.ines", "patients_by_home_district", {"where": {"national_id": "x"}},
         "is restricted"),
    ], [
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"catchment": other},
         {"district": other}),
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"visit_kind": other},
         {"district": other}),
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"catchment": own, "limit": 3},
         {"district": own, "limit": 3}),
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"filter": {"district": other}},
         {"district": other}),
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"bucket": other}, {"district": other}),
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"visit_kind": other,
                                                            "district": other},
         {"district": other}),
        ("lead.harbor", "visits_by_clinic_kind_and_state", {"clinic_code": "district",
                                                            "district": [other]},
         {"district": [other]}),
    ])


def test_interpreted_arguments_answer_as_the_right_ones(built: tuple[str, Any]) -> None:
    which, project = built
    interpreted, refused, scoped = _cases(which, project)
    for user, tool, given, right, said in interpreted:
        a, b = call_tools(project, user, [(tool, given), (tool, right)])
        _same(a, b)
        for key, value in said.items():
            assert a.structured_content[key] == value, (tool, given)
        sentence = a.content[0].text
        for k, v in said.get("interpreted", {}).items():
            assert f"argument {k} read as {v}" in sentence, sentence
        for k, v in said.get("moved_values", {}).items():
            assert f"{k} read as a value of {v}" in sentence, sentence
    for user, tool, given, says in refused:
        [r] = call_tools(project, user, [(tool, given)])
        assert r.is_error and says in r.content[0].text, (tool, given, r.content)
        if says == "could mean":  # the candidates are named
            assert " or " in r.content[0].text
    # the caller's scope holds: refused where the right call is (a value outside the scope is
    # in no enum of the caller's tool, so it is not even moved), the same answer where not
    for user, tool, given, right in scoped:
        a, b = call_tools(project, user, [(tool, given), (tool, right)])
        assert a.is_error == b.is_error, (tool, given, a.content, b.content)
        if b.is_error:
            assert (b.meta or {}).get("tether/refusal"), b.content
            assert a.structured_content is None
            if (a.meta or {}).get("tether/refusal"):
                assert a.meta["tether/refusal"] == b.meta["tether/refusal"]
        else:
            _same(a, b)


def test_a_value_the_parameter_takes_stays_though_it_names_another(
        built: tuple[str, Any]) -> None:
    """Text a parameter takes is its value even where it spells another parameter's name (a
    sort key naming the filter given beside it): nothing is read, the call answers as written."""
    which, project = built
    user, tool, column = (("fin.ana", "orders_by_status_and_customer", "status")
                          if which == "demo" else
                          ("aud.ines", "visits_by_clinic_kind_and_state", "visit_state"))
    value = enum_of(_tool(project, tool)["inputSchema"]["properties"][column])[0]
    [r] = call_tools(project, user, [(tool, {"order_by": column, column: [value], "limit": 3})])
    assert not r.is_error, r.content
    assert "interpreted" not in r.structured_content, r.structured_content
    shown = [row[column] for row in r.structured_content["rows"]]
    assert shown and set(shown) == {value}


def test_a_product_reached_by_discovery_interprets_too(built: tuple[str, Any]) -> None:
    """rows_from_data_product passes the product's arguments through the same reading."""
    which, project = built
    interpreted, _, scoped = _cases(which, project)
    user, tool, given, right, said = interpreted[1]
    product = _tool(project, tool)["_meta"]["tether/context"]["products"][0]
    [a] = call_tools(project, user, [
        ("rows_from_data_product", {"product": product, "arguments": given})],
        dedicated_tools="none")
    [b] = call_tools(project, user, [(tool, right)])
    _same(a, b)
    assert a.structured_content["interpreted"] == said["interpreted"]
    user, tool, given, right = scoped[0]
    product = _tool(project, tool)["_meta"]["tether/context"]["products"][0]
    [r] = call_tools(project, user, [
        ("rows_from_data_product", {"product": product, "arguments": given})],
        dedicated_tools="none")
    assert r.is_error and (r.meta or {}).get("tether/refusal"), r.content


def test_a_wrong_argument_to_a_product_by_name_gets_its_arguments_back(
        built: tuple[str, Any]) -> None:
    """rows_from_data_product with a wrong argument answers with the product's arguments as
    this caller has them (their scope's values only), so one more turn fixes the call."""
    which, project = built
    user, tool, column = (("mgr.emea", "customers_by_region_and_segment", "sales_region")
                          if which == "demo" else
                          ("lead.harbor", "visits_by_clinic_kind_and_state", "district"))
    product = _tool(project, tool)["_meta"]["tether/context"]["products"][0]
    own = project.config.policies.users[user].attributes()[
        "region" if which == "demo" else "district"]
    [r] = call_tools(project, user, [
        ("rows_from_data_product", {"product": product, "arguments": {"wardrobe": 1}})],
        dedicated_tools="none")
    text = r.content[0].text
    assert r.is_error and f"The arguments {product} takes for you: " in text, text
    assert f"{column} (one of {own})" in text, text  # the caller's values, no other scope's
