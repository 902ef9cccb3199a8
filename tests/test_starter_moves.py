"""`tether init` proposes a write action's state machine where the data keeps a history: the
moves each status-like column made, value after value per entity along the ordering key column,
counted in the engine; written as comments marked `# inferred: confirm` (a write needs a writer
DSN and a person's word). On a made-up history, on the demo's subscription spells (compared with
the same moves counted by SQL written here), and never for a table without a history."""

from __future__ import annotations

from pathlib import Path

import duckdb
import yaml

from conftest import run_cli


def _init(tmp_path: Path, db: Path) -> str:
    r = run_cli("init", str(tmp_path / "proj"), "--source", f"duckdb:///{db}")
    assert r.returncode == 0, r.stdout + r.stderr
    return (tmp_path / "proj" / "tether.yaml").read_text()


def test_moves_along_a_history_become_a_proposed_state_machine(tmp_path: Path) -> None:
    db = tmp_path / "tickets.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE ticket_events (ticket_ref VARCHAR, step INTEGER, "
                    "phase VARCHAR, agent VARCHAR)")
        rows = []
        for t, path in enumerate([["OPEN", "WORKING", "DONE"], ["OPEN", "DONE"],
                                  ["OPEN", "WORKING", "OPEN", "WORKING", "DONE"]]):
            rows += [(f"T{t}", i, phase, f"a{(t + i) % 20}") for i, phase in enumerate(path)]
        con.executemany("INSERT INTO ticket_events VALUES (?, ?, ?, ?)", rows)
        con.execute("CREATE TABLE agents (agent VARCHAR PRIMARY KEY, team VARCHAR)")
        con.executemany("INSERT INTO agents VALUES (?, ?)", [("a1", "X"), ("a2", "Y")])
    text = _init(tmp_path, db)
    assert ("    # phase moved in the data (per ticket_ref, in step order): OPEN -> DONE (1), "
            "OPEN -> WORKING (3), WORKING -> DONE (2), WORKING -> OPEN (1)") in text
    assert "#     transitions: {phase: {OPEN: [DONE, WORKING], WORKING: [DONE, OPEN]}}" in text
    assert "agent moved" not in text  # 20 values: not a status
    block = text.split("  agents:\n", 1)[1].split("\n\n", 1)[0]
    assert "moved in the data" not in block and "actions" not in block  # a key of one column
    # the proposal, uncommented with a writer and a role, is an action tether.yaml accepts
    cfg = yaml.safe_load(text)
    lines = text.split("    # actions:\n", 1)[1].splitlines()[:4]
    action = yaml.safe_load("\n".join(x[len("    # "):].split("  # inferred")[0] for x in lines))
    action["change_phase"]["roles"] = ["everyone"]
    cfg["products"]["ticket_events"]["actions"] = action
    cfg["sources"]["main"]["writer_url"] = cfg["sources"]["main"]["url"]
    cfg["policies"] = {"roles": {"everyone": {"tools": ["*"]}},
                       "users": {"u": {"role": "everyone"}}}
    (tmp_path / "proj" / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = run_cli("build", "--project", str(tmp_path / "proj"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "proj" / "tools" / "change_phase.json").is_file()


def test_the_demo_subscription_spells(demo_dir: Path, tmp_path: Path) -> None:
    db = demo_dir / "warehouse.duckdb"
    text = _init(tmp_path, db)
    with duckdb.connect(str(db), read_only=True) as con:
        moves = con.execute(
            "SELECT prev, status, count(*) FROM (SELECT status, lag(status) OVER (PARTITION BY "
            "subscription_id ORDER BY spell_no) AS prev FROM subscriptions) WHERE prev IS NOT "
            "NULL AND prev <> status GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    said = ", ".join(f"{a} -> {b} ({n})" for a, b, n in moves)
    assert ("    # status moved in the data (per subscription_id, in spell_no order): "
            + said) in text
    for table in ("orders", "customers", "deals"):  # keys of one column: no history
        block = text.split(f"  {table}:\n", 1)[1].split("\n\n", 1)[0]
        assert "moved in the data" not in block, table


def test_values_that_go_back_as_often_as_forth_are_no_history(tmp_path: Path) -> None:
    """The lines of one order, each its own thing, in line order: a column whose values vary
    from line to line, as often back as forth, is no status and no move is proposed; beside it
    a status that moves one way in the same table is."""
    db = tmp_path / "lines.duckdb"
    kinds = ["KEEP", "SWAP", "DROP"]
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE crate_lines (crate_ref VARCHAR, line_no INTEGER, "
                    "packing VARCHAR, stage VARCHAR)")
        rows = [(f"C{c}", i, kinds[(c * 7 + i * i) % 3], ["NEW", "PACKED", "SENT"][min(i, 2)])
                for c in range(200) for i in range(4)]
        con.executemany("INSERT INTO crate_lines VALUES (?, ?, ?, ?)", rows)
    text = _init(tmp_path, db)
    assert "packing moved" not in text
    assert ("    # stage moved in the data (per crate_ref, in line_no order): NEW -> PACKED "
            "(200), PACKED -> SENT (200)") in text
