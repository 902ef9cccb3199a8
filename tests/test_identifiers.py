"""Any identifier, on both warehouses: an identifier parameter takes every scheme its crosswalk
holds, recognises the scheme by its pattern, resolves it in the same query under the caller's
policy and says how it read it; a value of no scheme is an error naming the schemes and the
tool that maps them. The entities are read from each warehouse's own crosswalk tool."""

from __future__ import annotations

import pytest

from conftest import call_tools
from tether.config import Project
from tether.serve.server import TetherServer


@pytest.mark.parametrize("which", ["demo", "second"])
def test_every_scheme_of_an_entity_gives_the_same_rows(which: str,
                                                       built_both: dict[str, Project]) -> None:
    project = built_both[which]
    config = project.config
    checked = 0
    for user in config.policies.users:
        server = TetherServer(project, stdio_user=user)
        try:
            tools = {v.name: v for v in server.visible(user)}
        finally:
            server.close()
        for v in tools.values():
            for f in v.plan.filters:
                if not f.routes or f.resolver not in tools:
                    continue
                # entities as the crosswalk tool shows them to this user: each with every id
                crosswalk = tools[str(f.resolver)]
                (listed,) = call_tools(project, user, [(crosswalk.name, {"limit": 5})])
                assert not listed.is_error, listed.content
                own = next(r for r in f.routes if not r.via)
                take = next(r.take for r in f.routes if r.via)
                for entity in listed.structured_content["rows"][:3]:
                    values = {own.scheme: entity[str(take)]} | {
                        r.scheme: entity[str(r.match)] for r in f.routes if r.via}
                    results = call_tools(project, user, [(v.name, {f.param: value, "limit": 200})
                                                     for value in values.values()])
                    first = results[0]
                    assert not first.is_error, (v.name, first.content)
                    for (scheme, value), r in zip(values.items(), results, strict=True):
                        assert not r.is_error, (user, v.name, scheme, r.content)
                        assert r.structured_content["rows"] == first.structured_content["rows"]
                        how = r.structured_content["identifiers"][f.param]
                        assert how["scheme"] == scheme and how["given"] == value
                        if scheme != own.scheme:
                            assert how["resolved_through"]
                            assert f"read as a {scheme}" in r.content[0].text
                            evidence = (r.meta or {})["tether/evidence"]
                            assert how["resolved_through"] in evidence["tables"]
                    checked += 1
    assert checked >= 3


@pytest.mark.parametrize("which", ["demo", "second"])
def test_an_id_of_no_scheme_names_the_schemes_and_the_resolver(which: str,
                                                               built_both: dict[str, Project]) -> None:
    project = built_both[which]
    user = next(iter(project.config.policies.users))
    server = TetherServer(project, stdio_user=user)
    try:
        found = [(v.name, f) for v in server.visible(user) for f in v.plan.filters if f.routes]
    finally:
        server.close()
    assert found
    results = call_tools(project, user, [(name, {f.param: "no-such-id-of-any-kind"})
                                     for name, f in found])
    for (name, f), r in zip(found, results, strict=True):
        text = r.content[0].text
        assert r.is_error and "is none of the ids it takes" in text, (name, text)
        assert all(route.scheme in text for route in f.routes)
        assert str(f.resolver) in text


def _absent_like(value: str, pattern: str, taken: set[str]) -> str:
    """A value that fits ``pattern`` like ``value`` does and is none of ``taken``."""
    import re

    for i in range(len(value) - 1, -1, -1):
        for ch in "0123456789abcdef":
            if ch == value[i] or (value[i].isdigit() != ch.isdigit() and not value[i].isalnum()):
                continue
            candidate = value[:i] + ch + value[i + 1:]
            if candidate not in taken and re.fullmatch(pattern, candidate):
                return candidate
    raise AssertionError(f"no free value like {value}")


@pytest.mark.parametrize("which", ["demo", "second"])
def test_an_id_that_names_no_entity_says_so(which: str, built_both: dict[str, Project]) -> None:
    """An id that fits a scheme but names no entity the caller may see: an empty result whose
    reason (and answer sentence) says the id matches no entity, not a true zero."""
    project = built_both[which]
    user = next(u for u, c in project.config.policies.users.items()
                if not project.config.policies.roles[c.role].row_filters)
    server = TetherServer(project, stdio_user=user)
    try:
        tools = {v.name: v for v in server.visible(user)}
    finally:
        server.close()
    checked = 0
    for v in tools.values():
        for f in v.plan.filters:
            if not f.routes or f.resolver not in tools:
                continue
            (listed,) = call_tools(project, user, [(str(f.resolver), {"limit": 200})])
            rows = listed.structured_content["rows"]
            for route in f.routes:
                column = route.match if route.via else next(r.take for r in f.routes if r.via)
                taken = {str(r[str(column)]) for r in rows}
                value = _absent_like(str(rows[0][str(column)]), str(route.pattern), taken)
                (r,) = call_tools(project, user, [(v.name, {f.param: value})])
                assert not r.is_error, r.content
                reason = r.structured_content.get("empty_reason", "")
                if r.structured_content["rows"]:  # a crosswalk longer than a page: skip
                    continue
                assert "matches no entity" in reason, (v.name, route.scheme, reason)
                assert reason in r.content[0].text
                checked += 1
    assert checked >= 2
