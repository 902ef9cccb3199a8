"""Attacks on write tools, on DuckDB and PostgreSQL: stacked statements and injections in keys
and values, moves smuggled through arguments (another column, a value outside the enum, a
spelling, a row moved out of the caller's scope), confirmations replayed, forged, spent by
another user, on other arguments or another tool, and writers racing on one row. An attack
succeeds if any row ends in a state the caller could not have reached by a confirmed, allowed
move of a row in its own scope, or if any call that should be refused applies. The count is
docs/reliability.md's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from writeproject import (
    NORTH,
    NORTH2,
    SOUTH,
    Made,
    duckdb_project,
    ok,
    pg_project,
    session,
    tighten,
)

HOLD, RELEASE, MOVE = "hold_shipment", "release_shipment", "move_depot"
Attack = Callable[[Made], bool]
"""An attack: True when it succeeded (a change it should not have made, or a call applied)."""


def _extra(cfg: dict[str, Any]) -> None:
    """An action that changes the row filter's own column (a row moved out of scope must not
    be), and a role with the state masked."""
    actions = cfg["products"]["shipments"]["actions"]
    actions[MOVE] = {"set": ["depot"], "roles": ["dispatcher", "masked"]}
    cfg["policies"]["roles"]["masked"] = {"tools": ["*"], "masks": {"shipments.state": "redact"}}
    cfg["policies"]["users"]["disp.masked"] = {"role": "masked"}
    # a dispatcher who may not see weights: the hold's precondition reads them
    cfg["policies"]["roles"]["weightless"] = {"tools": ["*"], "masks": {
        "shipments.weight_kg": "null"}}
    cfg["policies"]["users"]["disp.weightless"] = {"role": "weightless"}
    actions["hold_shipment"]["roles"].append("weightless")


@pytest.fixture(params=["duckdb", "postgres"])
def made(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Made]:
    if request.param == "duckdb":
        with duckdb_project(tmp_path, _extra) as m:
            yield m
    else:
        with pg_project(tmp_path, request.getfixturevalue("pg_url"), _extra) as m:
            yield m


def _dry(made: Made, user: str, tool: str, args: dict[str, Any]) -> str:
    return str(ok(session(made.folder, user, lambda c: c.call_tool(tool, args)))[
        "confirmation"])


def _apply(made: Made, user: str, tool: str, args: dict[str, Any], token: str) -> Any:
    return session(made.folder, user, lambda c: c.call_tool(
        tool, {**args, "dry_run": False, "confirmation": token}))


def _call(made: Made, user: str, tool: str, args: dict[str, Any]) -> Any:
    return session(made.folder, user, lambda c: c.call_tool(tool, args))


def _changed_by(made: Made, act: Callable[[], Any]) -> bool:
    """Whether ``act`` changed any row, or was answered as applied."""
    before = made.states()
    result = act()
    applied = not result.is_error and bool((result.structured_content or {}).get("applied"))
    return applied or made.states() != before


def injected_key(value: Any) -> Attack:
    def attack(made: Made) -> bool:
        def go() -> Any:
            r = _call(made, NORTH, HOLD, {"shipment_id": value})
            if r.is_error:
                return r
            return _apply(made, NORTH, HOLD, {"shipment_id": value},
                          r.structured_content["confirmation"])
        return _changed_by(made, go)
    return attack


def smuggled(args: dict[str, Any], tool: str = HOLD) -> Attack:
    """A dry run and an apply with these arguments: success if a row leaves the states the
    action's moves reach (HELD for a hold), or moves at all where the call should fail."""
    def attack(made: Made) -> bool:
        before = made.states()
        r = _call(made, NORTH, tool, args)
        if not r.is_error:
            r = _apply(made, NORTH, tool, args, r.structured_content["confirmation"])
        after = made.states()
        moved = {k: v for k, v in after.items() if before.get(k) != v}
        return any(v != "HELD" for v in moved.values()) or (r.is_error and bool(moved))
    return attack


def replay_after_undo(made: Made) -> bool:
    """Hold S001, release it, then replay the hold's confirmation: it must not hold it again."""
    token = _dry(made, NORTH, HOLD, {"shipment_id": "S001"})
    ok(_apply(made, NORTH, HOLD, {"shipment_id": "S001"}, token))
    back = _dry(made, NORTH, RELEASE, {"shipment_id": "S001", "state": "PENDING"})
    ok(_apply(made, NORTH, RELEASE, {"shipment_id": "S001", "state": "PENDING"}, back))
    replay = _apply(made, NORTH, HOLD, {"shipment_id": "S001"}, token)
    fresh_key = session(made.folder, NORTH, lambda c: c.call_tool(HOLD, {
        "shipment_id": "S001", "dry_run": False, "confirmation": token,
        "idempotency_key": "a-new-key"}))
    return made.states()["S001"] != "PENDING" or not fresh_key.is_error or bool(
        (replay.structured_content or {}).get("applied") and not
        replay.structured_content.get("replayed"))


def key_reused(made: Made) -> bool:
    """An idempotency key used for S001 used again for S002: not the first result, no write."""
    token = _dry(made, NORTH, HOLD, {"shipment_id": "S001"})
    ok(session(made.folder, NORTH, lambda c: c.call_tool(HOLD, {
        "shipment_id": "S001", "dry_run": False, "confirmation": token,
        "idempotency_key": "k1"})))
    other = _dry(made, NORTH, HOLD, {"shipment_id": "S002"})
    r = session(made.folder, NORTH, lambda c: c.call_tool(HOLD, {
        "shipment_id": "S002", "dry_run": False, "confirmation": other,
        "idempotency_key": "k1"}))
    return not r.is_error or made.states()["S002"] != "PACKED"


def token_elsewhere(user: str, tool: str, args: dict[str, Any]) -> Attack:
    """A confirmation made by the north dispatcher for S001's hold, spent otherwise."""
    def attack(made: Made) -> bool:
        token = _dry(made, NORTH, HOLD, {"shipment_id": "S001"})
        return _changed_by(made, lambda: _apply(made, user, tool, args, token))
    return attack


def forged(mangle: Callable[[str], str]) -> Attack:
    def attack(made: Made) -> bool:
        token = mangle(_dry(made, NORTH, HOLD, {"shipment_id": "S002"}))
        return _changed_by(made, lambda: _apply(made, NORTH, HOLD, {"shipment_id": "S002"},
                                                token))
    return attack


def out_of_scope_move(made: Made) -> bool:
    """Move a north row to the south depot: the row would leave the caller's own scope."""
    return _changed_by(made, lambda: _apply(made, NORTH, MOVE, {"shipment_id": "S001",
                                                               "depot": "SOUTH"},
                                            _dry(made, NORTH, MOVE, {"shipment_id": "S001",
                                                                     "depot": "SOUTH"})))


def masked_state(made: Made) -> bool:
    """A role that reads the state masked may not change it (nor learn it from a dry run)."""
    r = _call(made, "disp.masked", HOLD, {"shipment_id": "S001"})
    return not r.is_error or "PENDING" in r.content[0].text


def masked_precondition(made: Made) -> bool:
    """A precondition over a column masked for the caller: its outcome row by row would say
    what the weight is (S004's is 0); the call is refused before any row is read."""
    r = _call(made, "disp.weightless", HOLD, {"shipment_id": "S004"})
    return not r.is_error or "S004" in r.content[0].text


def racing(n: int) -> Attack:
    """n writers at once on one row, each with its own fresh confirmation: one may apply."""
    def attack(made: Made) -> bool:
        users = [NORTH, NORTH2] * n
        tokens = [_dry(made, users[i], HOLD, {"shipment_id": "S007"}) for i in range(n)]
        out: list[Any] = [None] * n
        gate = threading.Barrier(n)

        def go(i: int) -> None:
            async def steps(c: Any) -> Any:
                gate.wait()
                return await c.call_tool(HOLD, {"shipment_id": "S007", "dry_run": False,
                                                "confirmation": tokens[i],
                                                "idempotency_key": f"race-{i}"})
            out[i] = session(made.folder, users[i], steps)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        applied = sum(1 for r in out if r is not None and not r.is_error)
        return applied != 1 or made.states()["S007"] != "HELD"
    return attack


def pinned_after_tightening(key: str) -> Attack:
    """After the approved tightening, a caller pins the hold's old version (1.0.0, inside its
    deprecation window) for the dry run and the apply: S002 is PACKED (a move 2.0.0 no longer
    allows), S001 is worth 40 EUR (a precondition 2.0.0 added). Neither may be held."""
    def attack(made: Made) -> bool:
        tighten(made)
        pin = {"tether/pin": "1.0.0"}

        async def steps(c: Any) -> Any:
            dry = await c.call_tool(HOLD, {"shipment_id": key}, meta=pin)
            if dry.is_error:
                return dry
            return await c.call_tool(HOLD, {"shipment_id": key, "dry_run": False,
                                            "confirmation": dry.structured_content[
                                                "confirmation"]}, meta=pin)
        return _changed_by(made, lambda: session(made.folder, NORTH, steps))
    return attack


def confirmed_before_tightening(made: Made) -> bool:
    """A dry run made under 1.0.0, spent after 2.0.0 (which forbids the move) is current."""
    token = _dry(made, NORTH, HOLD, {"shipment_id": "S002"})
    tighten(made)
    return _changed_by(made, lambda: _apply(made, NORTH, HOLD, {"shipment_id": "S002"}, token))


def released_elsewhere(made: Made) -> bool:
    """Hold S001 (PENDING), then release it to PACKED: an inverse returns a row to the state it
    came from, never to another state its moves allow."""
    ok(_apply(made, NORTH, HOLD, {"shipment_id": "S001"},
              _dry(made, NORTH, HOLD, {"shipment_id": "S001"})))
    args = {"shipment_id": "S001", "state": "PACKED"}

    def go() -> Any:
        r = _call(made, NORTH, RELEASE, args)
        if r.is_error:
            return r
        return _apply(made, NORTH, RELEASE, args, r.structured_content["confirmation"])
    go()
    return made.states()["S001"] != "HELD"


def confirmation_in_a_list(made: Made) -> bool:
    """A confirmation is a string: one wrapped in a list is no confirmation."""
    token = _dry(made, NORTH, HOLD, {"shipment_id": "S002"})
    return _changed_by(made, lambda: _apply(made, NORTH, HOLD, {"shipment_id": "S002"},
                                            [token]))  # type: ignore[arg-type]


def _flip(token: str) -> str:
    return token[:20] + ("A" if token[20] != "A" else "B") + token[21:]


ATTACKS: dict[str, Attack] = {
    "stacked statements in a key": injected_key(
        "S001'; UPDATE shipments SET state = 'DELIVERED'; --"),
    "boolean injection in a key": injected_key("S001' OR '1'='1"),
    "a key list over the cap": injected_key([f"S{i:03d}" for i in range(60)]),
    "an object for a key": injected_key({"$ne": ""}),
    "a NUL in a key": injected_key("S001\x00"),
    "a south key among north ones": injected_key(["S001", "S005"]),
    "stacked statements in the target": smuggled({"shipment_id": "S001",
                                                 "state": "HELD'; DROP TABLE shipments; --"}),
    "a target outside the enum": smuggled({"shipment_id": "S001", "state": "DELIVERED"}),
    "the target in lower case": smuggled({"shipment_id": "S002", "state": "held"}),
    "a move from a state with none": smuggled({"shipment_id": "S003"}),
    "the release's move through the hold": smuggled({"shipment_id": "S008",
                                                    "state": "PENDING"}),
    "another column set beside": smuggled({"shipment_id": "S001", "depot": "SOUTH"}),
    "the column named as the argument": smuggled({"shipment_id": "S001", "status": "DELIVERED"}),
    "a set object": smuggled({"shipment_id": "S001", "set": {"state": "DELIVERED"}}),
    "dry_run as text": smuggled({"shipment_id": "S001", "dry_run": "false",
                                 "confirmation": "x"}),
    "a precondition that fails after": smuggled({"shipment_id": "S004"}),
    "a confirmation replayed after undo": replay_after_undo,
    "a confirmation spent by another user": token_elsewhere(NORTH2, HOLD, {"shipment_id": "S001"}),
    "a confirmation spent by another depot": token_elsewhere(SOUTH, HOLD, {"shipment_id": "S001"}),
    "a confirmation on more rows": token_elsewhere(NORTH, HOLD, {"shipment_id": ["S001",
                                                                                 "S002"]}),
    "a confirmation on another row": token_elsewhere(NORTH, HOLD, {"shipment_id": "S002"}),
    "a confirmation on another tool": token_elsewhere(NORTH, RELEASE, {"shipment_id": "S001",
                                                                       "state": "PENDING"}),
    "an idempotency key reused for other rows": key_reused,
    "a forged confirmation": forged(_flip),
    "a truncated confirmation": forged(lambda t: t[:-6]),
    "a confirmation of another project's key": forged(
        lambda t: "AAAAAAAAAAAAAAAAAAAAAA" + t[22:]),
    "a row moved out of the caller's scope": out_of_scope_move,
    "a masked column changed": masked_state,
    "a precondition over a masked column": masked_precondition,
    "a confirmation in other characters": forged(lambda t: t.replace("-", "\u2010", 1)),
    "a confirmation with a non-ASCII letter": forged(lambda t: t[:-1] + "\u00e9"),
    "a pinned old version's move": pinned_after_tightening("S002"),
    "a pinned old version past a new precondition": pinned_after_tightening("S001"),
    "a confirmation made before a tightening": confirmed_before_tightening,
    "an inverse to a state the row never came from": released_elsewhere,
    "a confirmation in a list": confirmation_in_a_list,
    "two writers on one row": racing(2),
    "four writers on one row": racing(4),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_write_attack_fails(made: Made, name: str) -> None:
    assert ATTACKS[name](made) is False, name
