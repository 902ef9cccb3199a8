"""Write tools on DuckDB and PostgreSQL (a writer role of its own; the serving role only reads):
the generated definition (destructive, the target an enum of the states the moves reach, the
preconditions, consequences and roles said), the dry run (rows before and after, preconditions,
a metric's change computed, nothing changed), the real call only with a fresh confirmation of
the same user, arguments and rows, one transaction, a write outside the caller's row filter or
a forbidden move refused, a replayed idempotency key applied once, undo restoring the before
values, the call log and the registry keeping before and after, and a process killed in the
middle of a write leaving nothing half-applied."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tether.config import load_project
from tether.errors import ConfigError
from tether.registry import open_registry
from tether.registry.writes import writes
from writeproject import (
    NORTH,
    NORTH2,
    SOUTH,
    VIEWER,
    Made,
    duckdb_project,
    ok,
    pg_project,
    refused,
    session,
    tighten,
)


@pytest.fixture(params=["duckdb", "postgres"])
def made(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Made]:
    if request.param == "duckdb":
        with duckdb_project(tmp_path) as m:
            yield m
    else:
        with pg_project(tmp_path, request.getfixturevalue("pg_url")) as m:
            yield m


HOLD = "hold_shipment"
RELEASE = "release_shipment"


def test_the_definition_says_what_it_does_and_only_its_roles_see_it(made: Made) -> None:
    async def steps(c: Any) -> Any:
        return {t.name: t for t in (await c.list_tools()).tools}

    tools = session(made.folder, NORTH, steps)
    hold = tools[HOLD]
    assert hold.annotations.destructive_hint is True
    assert hold.annotations.read_only_hint is False
    assert hold.annotations.idempotent_hint is True
    props = hold.input_schema["properties"]
    assert props["state"]["enum"] == ["HELD"]
    assert props["dry_run"]["default"] is True
    assert {"confirmation", "idempotency_key", "shipment_id"} <= set(props)
    assert tools[RELEASE].input_schema["properties"]["state"]["enum"] == ["PACKED", "PENDING"]
    text = hold.description
    for said in ("PACKED -> HELD", "PENDING -> HELD", "weight_kg > 0", "open_value",
                 "pickup list", "dispatcher", "dry_run", "release_shipment undoes it",
                 "2 other state values in the data have no move out"):
        assert said in text, said
    # a role the action does not name never sees it, though its tool globs match
    viewer = session(made.folder, VIEWER, steps)
    assert HOLD not in viewer and RELEASE not in viewer and "open_value" in viewer

    async def call(c: Any) -> Any:
        return await c.call_tool(HOLD, {"shipment_id": "S001"})
    assert "unknown tool" in refused(session(made.folder, VIEWER, call))[0]
    # the key list's bound is said and enforced by the server, not put in the schema as
    # maxItems (a constrained decoder expands that into nested rules: llama.cpp's limit)
    keys = props["shipment_id"]
    assert "maxItems" not in keys and "list of up to 50" in keys["description"]
    # nor any bounded repeat: maxLength, or {m,n} in a pattern (llama.cpp's server died on them)
    assert not re.search(r'maxLength|\{\d+,\d+\}', json.dumps(hold.input_schema))

    async def too_many(c: Any) -> Any:
        return await c.call_tool(HOLD, {"shipment_id": [f"S{n:03d}" for n in range(1, 52)]})
    assert "at most 50 rows a call" in refused(session(made.folder, NORTH, too_many))[0]

    async def long_key(c: Any) -> Any:
        return await c.call_tool(HOLD, {"shipment_id": "S001", "idempotency_key": "k" * 201})
    assert "at most 200 characters" in refused(session(made.folder, NORTH, long_key))[0]


def test_dry_run_apply_replay_and_undo(made: Made) -> None:
    before = made.states()

    async def steps(c: Any) -> Any:
        dry = ok(await c.call_tool(HOLD, {"shipment_id": ["S001", "S002"]}))
        assert made.states() == before  # a dry run changes nothing
        applied = await c.call_tool(HOLD, {"shipment_id": ["S001", "S002"], "dry_run": False,
                                           "confirmation": dry["confirmation"],
                                           "idempotency_key": "ticket-77"})
        again = await c.call_tool(HOLD, {"shipment_id": ["S001", "S002"], "dry_run": False,
                                         "confirmation": dry["confirmation"],
                                         "idempotency_key": "ticket-77"})
        return dry, applied, again

    dry, applied, again = session(made.folder, NORTH, steps)
    assert dry["dry_run"] is True and dry["applied"] is False
    assert dry["rows"] == [{"shipment_id": "S001", "state": "PENDING"},
                           {"shipment_id": "S002", "state": "PACKED"}]  # as they are
    assert [(r["key"]["shipment_id"], r["before"], r["after"]) for r in dry["changes"]] == [
        ("S001", {"state": "PENDING"}, {"state": "HELD"}),
        ("S002", {"state": "PACKED"}, {"state": "HELD"})]
    assert dry["preconditions"] == [{"rule": "weight_kg > 0", "before": "holds",
                                     "after": "holds", "rows": 2}]
    # the metric downstream, computed over the two rows: 40 + 60 EUR leave it
    assert dry["consequences"][0] == ("2 shipments leave the metric open_value; it falls by "
                                      "100.00 (from 100.00 to 0.00 EUR over these rows).")
    assert "pickup list" in dry["consequences"][1]
    result = ok(applied)
    assert result["applied"] is True and result["write_id"]
    assert applied.content[0].text.startswith("Applied hold_shipment to 2 rows")
    after = made.states()
    assert after == {**before, "S001": "HELD", "S002": "HELD"}
    replay = ok(again)
    assert replay["replayed"] is True and replay["write_id"] == result["write_id"]
    assert made.states() == after
    # the evidence is the UPDATE that ran, with the caller's row filter in its WHERE
    evidence = applied.meta["tether/evidence"]
    assert evidence["sql"].startswith("UPDATE") and evidence["params"]["u_depot"] == "NORTH"
    # the registry keeps the write once, with before and after; the call log names it
    project = load_project(made.folder)
    registry = open_registry(project)
    try:
        kept = [w for w in writes(registry) if w["tool"] == HOLD]
        assert len(kept) == 1 and kept[0]["status"] == "applied"
        assert kept[0]["body"]["changes"] == result["changes"]
        assert "confirmation" not in kept[0]["arguments"]
        logged = [json.loads(c["details"] or "{}").get("write") for c in registry.calls()
                  if c["tool"] == HOLD]
    finally:
        registry.close()
    applied_logs = [w for w in logged if w and w.get("applied")]
    assert applied_logs and applied_logs[0]["changes"][0]["before"] == {"state": "PENDING"}
    # undo: the inverse calls the result names put every row back as it was
    assert sorted((u["tool"], u["arguments"]["state"]) for u in result["undo"]) == [
        (RELEASE, "PACKED"), (RELEASE, "PENDING")]

    async def undo(c: Any) -> Any:
        for u in result["undo"]:
            d = ok(await c.call_tool(u["tool"], u["arguments"]))
            ok(await c.call_tool(u["tool"], {**u["arguments"], "dry_run": False,
                                             "confirmation": d["confirmation"]}))
    session(made.folder, NORTH, undo)
    assert made.states() == before


def _versions(folder: Path, tool: str) -> list[str]:
    registry = open_registry(load_project(folder))
    try:
        return [v.version for v in registry.versions(tool)]
    finally:
        registry.close()


def test_a_pin_keeps_the_shape_never_the_rules(made: Made) -> None:
    """After a reviewed tightening, a call pinned to the hold's first version runs under the
    current version's moves and preconditions (and says so); once the arguments changed too, a
    pinned write is refused, naming the current version."""
    tighten(made)
    first, current = _versions(made.folder, HOLD)
    made.sql("UPDATE shipments SET value_eur = 20 WHERE shipment_id = 'S001'")
    pin = {"tether/pin": first}

    async def steps(c: Any) -> Any:
        packed = await c.call_tool(HOLD, {"shipment_id": "S007"}, meta=pin)
        dear = await c.call_tool(HOLD, {"shipment_id": "S002"}, meta=pin)
        dry = await c.call_tool(HOLD, {"shipment_id": "S001"}, meta=pin)
        applied = await c.call_tool(HOLD, {"shipment_id": "S001", "dry_run": False,
                                           "confirmation": ok(dry)["confirmation"]}, meta=pin)
        return packed, dear, applied

    packed, dear, applied = session(made.folder, NORTH, steps)
    text, reason = refused(packed)
    assert reason == "forbidden_transition" and "Allowed moves: PENDING -> HELD" in text
    assert "PACKED -> HELD" not in text.split("Allowed moves:")[1]
    assert refused(dear)[1] == "forbidden_transition"
    result = ok(applied)
    assert result["applied"] is True
    assert result["pinned"]["asked"] == first and result["pinned"]["ran"] == current
    assert applied.meta["tether/evidence"]["version"] == current
    assert made.states()["S001"] == "HELD"

    def sets_depot(actions: dict[str, Any]) -> None:  # the write takes another argument now
        for name in (HOLD, RELEASE):
            actions[name]["set"] = ["state", "depot"]
    tighten(made, sets_depot)
    newest = _versions(made.folder, HOLD)[-1]
    text, reason = refused(session(made.folder, NORTH, lambda c: c.call_tool(
        HOLD, {"shipment_id": "S002"}, meta={"tether/pin": current})))
    assert reason == "superseded" and f"superseded by {newest}" in text
    assert made.states()["S002"] == "PACKED"


def test_a_key_named_many_times_is_one_row_and_stored_once(made: Made) -> None:
    """100,000 copies of one key name one row: the dry run, the apply and the registry's record
    of the write hold it once (a few hundred bytes, not 600 KB)."""
    many = {"shipment_id": ["S001"] * 100_000}

    async def steps(c: Any) -> Any:
        dry = ok(await c.call_tool(HOLD, many))
        return dry, ok(await c.call_tool(HOLD, {**many, "dry_run": False,
                                                "confirmation": dry["confirmation"]}))

    dry, applied = session(made.folder, NORTH, steps)
    assert dry["row_count"] == 1 and dry["apply_with"]["shipment_id"] == ["S001"]
    assert applied["applied"] is True and made.states()["S001"] == "HELD"
    registry = open_registry(load_project(made.folder))
    try:
        (kept,) = [w for w in writes(registry) if w["tool"] == HOLD]
    finally:
        registry.close()
    assert kept["arguments"]["shipment_id"] == ["S001"]
    assert len(json.dumps(kept["arguments"])) < 200


def test_outside_the_row_filter_or_absent_is_one_refusal(made: Made) -> None:
    before = made.states()

    async def steps(c: Any) -> Any:
        return [await c.call_tool(HOLD, {"shipment_id": key}) for key in
                ("S005", "S999", ["S001", "S006"])]

    results = session(made.folder, NORTH, steps)
    texts = []
    for r in results:
        text, reason = refused(r)
        assert reason == "outside_entitlement" and text.startswith("Not permitted:")
        texts.append(text.replace("S005", "X").replace("S999", "X").replace("S006", "X"))
    assert texts[0] == texts[1]  # a row of another depot reads as one that does not exist
    # the south dispatcher may: the row filter, not the tool, decides
    dry = session(made.folder, SOUTH, lambda c: c.call_tool(HOLD, {"shipment_id": "S005"}))
    assert ok(dry)["changes"][0]["key"] == {"shipment_id": "S005"}
    # a north confirmation cannot be spent on a south row, nor by the south dispatcher
    assert made.states() == before


def test_a_forbidden_move_is_refused_with_the_allowed_ones(made: Made) -> None:
    async def steps(c: Any) -> Any:
        return [await c.call_tool(HOLD, {"shipment_id": "S003"}),
                await c.call_tool(RELEASE, {"shipment_id": "S001", "state": "PACKED"}),
                await c.call_tool(HOLD, {"shipment_id": "S001", "state": "DELIVERED"}),
                await c.call_tool(HOLD, {"shipment_id": "S004"})]

    delivered, not_held, outside_enum, no_weight = session(made.folder, NORTH, steps)
    text, reason = refused(delivered)
    assert reason == "forbidden_transition"
    assert "nothing moves a row out of DELIVERED" in text and "PENDING -> HELD" in text
    text, reason = refused(not_held)
    assert reason == "forbidden_transition" and "HELD -> PENDING, PACKED" in text
    text, _ = refused(outside_enum)  # the schema: HELD is the only state it moves to
    assert "DELIVERED" in text and "HELD" in text
    text, reason = refused(no_weight)
    assert reason == "precondition_failed" and "weight_kg > 0" in text and "S004" in text


def test_confirmation_bound_to_user_arguments_rows_and_time(made: Made,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    before = made.states()

    async def dry(c: Any) -> Any:
        return ok(await c.call_tool(HOLD, {"shipment_id": "S001"}))["confirmation"]

    token = session(made.folder, NORTH, dry)

    def apply(user: str, args: dict[str, Any]) -> Any:
        return session(made.folder, user, lambda c: c.call_tool(
            HOLD, {"dry_run": False, "confirmation": token, **args}))

    def reason(r: Any) -> tuple[str, str | None]:
        text, why = refused(r)
        return text, why

    assert reason(apply(NORTH, {"shipment_id": "S001", "confirmation": ""}))[1] == \
        "confirmation_required"
    text, why = reason(apply(NORTH, {"shipment_id": "S002"}))
    assert why == "confirmation_invalid" and "other arguments" in text
    text, why = reason(apply(NORTH2, {"shipment_id": "S001"}))  # same depot, another user
    assert why == "confirmation_invalid" and "another user" in text
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert reason(apply(NORTH, {"shipment_id": "S001", "confirmation": forged}))[1] == \
        "confirmation_invalid"
    made.sql("UPDATE shipments SET weight_kg = 2.75 WHERE shipment_id = 'S001'")
    text, why = reason(apply(NORTH, {"shipment_id": "S001"}))  # the rows moved since
    assert why == "confirmation_invalid" and "changed since the dry run" in text
    made.sql("UPDATE shipments SET weight_kg = 2.5 WHERE shipment_id = 'S001'")
    import tether.serve.write as write

    real = time.time
    monkeypatch.setattr(write.time, "time", lambda: real() + 301)  # past its 300 s
    text, why = reason(apply(NORTH, {"shipment_id": "S001"}))
    assert why == "confirmation_invalid" and "past its time" in text
    monkeypatch.setattr(write.time, "time", real)
    assert made.states() == before
    ok(apply(NORTH, {"shipment_id": "S001"}))  # the same token, fresh and matching: applies
    assert made.states() == {**before, "S001": "HELD"}


def test_two_writers_race_on_one_row_and_one_wins(made: Made) -> None:
    async def dry(c: Any) -> Any:
        return ok(await c.call_tool(HOLD, {"shipment_id": "S007"}))["confirmation"]

    tokens = [session(made.folder, NORTH, dry), session(made.folder, NORTH2, dry)]
    out: list[Any] = [None, None]
    gate = threading.Barrier(2)

    def go(i: int, user: str) -> None:
        async def steps(c: Any) -> Any:
            gate.wait()
            return await c.call_tool(HOLD, {"shipment_id": "S007", "dry_run": False,
                                            "confirmation": tokens[i]})
        out[i] = session(made.folder, user, steps)

    threads = [threading.Thread(target=go, args=(i, u)) for i, u in enumerate((NORTH, NORTH2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    won = [r for r in out if not r.is_error]
    lost = [r for r in out if r.is_error]
    assert len(won) == 1 and len(lost) == 1, [r.content[0].text for r in out]
    assert refused(lost[0])[1] in ("confirmation_invalid", "forbidden_transition")
    assert made.states()["S007"] == "HELD"


def test_replicas_apply_one_confirmation_once(made: Made) -> None:
    """Two servers on one registry (PostgreSQL's, for the PostgreSQL project) given the same
    confirmation at once: one applies it; the other answers with that write or says it is being
    applied; the registry holds one write."""
    token = ok(session(made.folder, NORTH, lambda c: c.call_tool(
        HOLD, {"shipment_id": "S002"})))["confirmation"]
    out: list[Any] = [None, None]
    gate = threading.Barrier(2)

    def go(i: int) -> None:
        async def steps(c: Any) -> Any:
            gate.wait()
            return await c.call_tool(HOLD, {"shipment_id": "S002", "dry_run": False,
                                            "confirmation": token})
        out[i] = session(made.folder, NORTH, steps)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    first = [r for r in out if not r.is_error and not r.structured_content.get("replayed")]
    assert len(first) == 1, [r.content[0].text for r in out]
    other = next(r for r in out if r is not first[0])
    assert (not other.is_error and other.structured_content["replayed"]) or refused(other)[1] in (
        "write_in_progress", "confirmation_invalid")
    registry = open_registry(load_project(made.folder))
    try:
        assert [w["status"] for w in writes(registry) if w["tool"] == HOLD] == ["applied"]
    finally:
        registry.close()
    assert made.states()["S002"] == "HELD"


def test_a_write_killed_before_its_commit_leaves_nothing(made: Made, tmp_path: Path) -> None:
    """The server runs as its own process with the SQL log on a named pipe: each statement's
    log line waits for this test to read it, so once the UPDATE has run (its line read, the
    next one not), the process is SIGKILLed inside its transaction."""
    before = made.states()
    keys = ["S001", "S002", "S007"]
    token = session(made.folder, NORTH, lambda c: c.call_tool(HOLD, {"shipment_id": keys}))
    token = ok(token)["confirmation"]
    fifo = tmp_path / "sql.fifo"
    os.mkfifo(fifo)
    env = {**os.environ, "TETHER_SQL_LOG": str(fifo)}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "tether"), "serve", "--project",
                             str(made.folder), "--as-user", NORTH],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    seen: list[str] = []
    updated = threading.Event()

    def drain() -> None:  # each open of the pipe lets one statement (or a few) through
        while not updated.is_set() and proc.poll() is None:
            fd = os.open(fifo, os.O_RDONLY)
            try:
                data = b""
                while chunk := os.read(fd, 65536):
                    data += chunk
                    if b'"sql": "UPDATE' in data:  # closed at once: the next statement waits
                        updated.set()
                        break
            finally:
                os.close(fd)
            seen.extend(json.loads(x)["sql"] for x in data.decode().splitlines() if x.strip())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    assert proc.stdin is not None
    for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "killer", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": HOLD, "arguments": {"shipment_id": keys, "dry_run": False,
                                            "confirmation": token}}}):
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
    try:
        assert updated.wait(60), seen
        time.sleep(0.5)  # the UPDATE runs; its next statement waits on the pipe, uncommitted
        assert proc.poll() is None
        if made.engine == "postgres":  # the UPDATE ran: its transaction is open, uncommitted
            assert _open_write(made) == "idle in transaction"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        updated.set()
    held = {**before, **dict.fromkeys(keys, "HELD")}
    if made.engine == "postgres":  # it had written, uncommitted, when it was killed
        assert made.states() == before  # nothing of it: not one row of three
    else:  # all of it or nothing: a kill that came after the COMMIT left all three
        assert made.states() in (before, held)
        if made.states() == held:
            return
    # and the rows are free again: the same write, confirmed afresh, applies whole
    async def again(c: Any) -> Any:
        d = ok(await c.call_tool(HOLD, {"shipment_id": keys}))
        return ok(await c.call_tool(HOLD, {"shipment_id": keys, "dry_run": False,
                                           "confirmation": d["confirmation"],
                                           "idempotency_key": "after-the-kill"}))
    assert session(made.folder, NORTH, again)["row_count"] == 3
    assert made.states() == held


def _open_write(made: Made) -> str | None:
    """What the writer role's session is doing (PostgreSQL)."""
    import psycopg

    cfg = yaml.safe_load((made.folder / "tether.yaml").read_text())
    role = cfg["sources"]["main"]["writer_url"].split("://", 1)[1].split("@", 1)[0]
    assert made.url is not None
    with psycopg.connect(made.url, autocommit=True) as c:
        rows = c.execute("SELECT state FROM pg_stat_activity WHERE usename = %s AND "
                         "backend_xid IS NOT NULL", (role,)).fetchall()
    return rows[0][0] if rows else None


def test_run_sql_never_writes(made: Made) -> None:
    from tether.drift.publish import build

    before = made.states()
    build(load_project(made.folder), mode="generic")
    import anyio
    from mcp import Client

    from tether.serve.server import TetherServer

    server = TetherServer(load_project(made.folder), mode="generic", stdio_user=NORTH)

    async def go() -> list[Any]:
        async with Client(server.server) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert HOLD not in names
            return [await c.call_tool("run_sql", {"sql": q}) for q in (
                "UPDATE shipments SET state = 'HELD'",
                "SELECT 1; UPDATE shipments SET state = 'HELD'",
                "WITH x AS (UPDATE shipments SET state = 'HELD' RETURNING 1) SELECT * FROM x")]
    try:
        results = anyio.run(go)
    finally:
        server.close()
    assert all(r.is_error for r in results)
    assert made.states() == before


@pytest.mark.parametrize("change, says", [
    (lambda a: a["hold_shipment"].update(inverse="nothing_like_it"), "names inverse"),
    (lambda a: a["release_shipment"]["transitions"]["state"].update(HELD=["PENDING"]),
     "cannot undo 'hold_shipment'"),
    (lambda a: a["hold_shipment"].update(roles=["nobody"]), "unknown role 'nobody'"),
    (lambda a: a["hold_shipment"].update(set=["shipment_id"]), "part of the primary key"),
    (lambda a: a["hold_shipment"].update(require=["(SELECT 1) = 1"]), "not a query"),
    (lambda a: a["hold_shipment"].update(require=["sum(weight_kg) > 0"]), "aggregates"),
    (lambda a: a["hold_shipment"].update(require=["weight_kg > 0; COMMIT"]), "several"),
    (lambda a: a["hold_shipment"].update(require=["pg_sleep(1) IS NOT NULL"]), "allow-list"),
    (lambda a: a["hold_shipment"]["transitions"].update(depot={"NORTH": ["SOUTH"]}),
     "which it does not set"),
])
def test_an_action_that_cannot_work_is_a_config_error(tmp_path: Path, change: Any,
                                                      says: str) -> None:
    with duckdb_project(tmp_path) as made:
        path = made.folder / "tether.yaml"
        cfg = yaml.safe_load(path.read_text())
        change(cfg["products"]["shipments"]["actions"])
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        with pytest.raises(ConfigError) as e:
            load_project(made.folder)
        assert says in str(e.value) and "tether.yaml:" in e.value.paragraph()


def test_no_writer_url_is_a_config_error(tmp_path: Path) -> None:
    with duckdb_project(tmp_path) as made:
        path = made.folder / "tether.yaml"
        cfg = yaml.safe_load(path.read_text())
        del cfg["sources"]["main"]["writer_url"]
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        with pytest.raises(ConfigError, match="no writer_url"):
            load_project(made.folder)
        # a writer on an engine writes are not applied on (Spark here) is refused at load too
        cfg["sources"]["main"]["writer_url"] = "sc://127.0.0.1:15002"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        with pytest.raises(ConfigError, match="speaks 'sc'; writes are applied on a DuckDB"):
            load_project(made.folder)


def _checked(folder: Path) -> dict[str, dict[str, Any]]:
    from conftest import run_cli

    r = run_cli("check", "--project", str(folder), "--json")
    assert r.returncode in (0, 10, 11), (r.stdout, r.stderr)
    return {t["tool"]: t for t in json.loads(r.stdout)["tools"]}


def test_drift_a_new_state_is_wording_a_changed_precondition_waits_for_a_person(
        tmp_path: Path) -> None:
    with duckdb_project(tmp_path) as made:
        # a state the data did not hold: the tool says nothing moves a row out of it (patch)
        made.sql("INSERT INTO shipments VALUES ('S009', 'NORTH', 'LOST', 1.0, 3.0)")
        hold = _checked(made.folder)[HOLD]
        assert (hold["outcome"], hold["change_level"], hold["change_kind"]) == (
            "published", "patch", "wording")
        listed = session(made.folder, NORTH, lambda c: c.list_tools())
        text = next(t for t in listed.tools if t.name == HOLD).description
        # the depot row filter scopes the values: how many, never which
        assert "3 other state values in the data have no move out" in text
        # a changed precondition: semantic, a named reviewer; the running tool keeps the old
        path = made.folder / "tether.yaml"
        cfg = yaml.safe_load(path.read_text())
        cfg["products"]["shipments"]["actions"][HOLD]["require"] = ["weight_kg > 1"]
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        hold = _checked(made.folder)[HOLD]
        assert (hold["outcome"], hold["change_kind"]) == ("pending", "semantic"), hold
        listed = session(made.folder, NORTH, lambda c: c.list_tools())
        assert "weight_kg > 0" in next(t for t in listed.tools if t.name == HOLD).description
        # roles widened: the same, and the widened role does not see it meanwhile
        cfg["products"]["shipments"]["actions"][HOLD]["require"] = ["weight_kg > 0"]
        cfg["products"]["shipments"]["actions"][HOLD]["roles"] = ["dispatcher", "viewer"]
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        hold = _checked(made.folder)[HOLD]
        assert (hold["outcome"], hold["change_kind"]) == ("pending", "semantic"), hold
        viewer = session(made.folder, VIEWER, lambda c: c.list_tools())
        assert HOLD not in {t.name for t in viewer.tools}
        # a consequence's words: wording, published at once
        cfg["products"]["shipments"]["actions"][HOLD]["roles"] = ["dispatcher"]
        cfg["products"]["shipments"]["actions"][HOLD]["consequences"] = [
            "the nightly invoice run skips held shipments"]
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        hold = _checked(made.folder)[HOLD]
        assert (hold["outcome"], hold["change_kind"]) == ("published", "wording"), hold


def test_a_duckdb_writer_gets_its_turn_under_steady_reads() -> None:
    """Readers that keep coming do not starve a writer; a thread already reading reads again
    while the writer waits (no deadlock); a reading started after the writer asked waits."""
    from tether.sources.duckdb import Turns

    turns = Turns()
    stop = threading.Event()
    order: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            with turns.reading():
                time.sleep(0.01)
                with turns.reading():  # nested: never waits on the waiting writer
                    time.sleep(0.001)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    started = time.monotonic()
    with turns.writing(5.0):
        order.append("wrote")
        waited = time.monotonic() - started
    stop.set()
    for t in threads:
        t.join(5)
    assert order == ["wrote"] and waited < 1.0, waited
