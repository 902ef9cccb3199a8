"""Running the corpus against a target (a warehouse on one engine) at library level, as the server
calls the executor, and judging each outcome with the independent oracle."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attacks.corpus import ATTACKS, SKIP, Attack, Warehouse, fill
from attacks.oracle import REASONS, Engine, EngineError, Oracle, Policy, text_of
from conftest import piped, with_serve, without_named_restrictions
from tether.config import Project, load_project
from tether.keyfile import load_secret
from tether.policy import table_allowed, tool_visible
from tether.profiling import profile_product
from tether.serve import pagination, peruser
from tether.serve.executor import Call, Executor, ToolError
from tether.toolgen import GeneratedTool, generate

PROBE = "explain_data_product"
GRANT = '"explain_data_product"]'
_TRACEBACK = re.compile(r"Traceback \(most recent|File \"[^\"]+\", line \d+|<[\w.]+ object at "
                        r"0x|\b(?:Key|Attribute|Type|Index|Name|Recursion|Assertion)Error\b")

DENY = {
    "demo": ("      masks: {customers.email: redact}",
             "      tables: {deny: [deals, pipeline_snapshot]}\n"),
    "clinic": ("      masks:\n        patients.contact_email: redact",
               "      tables: {deny: [claims, clinic_rota]}\n"),
}


def prepare(src: Path, dst: Path, warehouse: Warehouse, timeout: float = 1.0) -> Path:
    """A copy of a project for attacking: its DuckDB path made absolute, the generic tools
    granted to the masked role (to test masks through run_sql), some products denied to that
    role (to test denied tables), and a short statement timeout."""
    dst.mkdir(parents=True, exist_ok=True)
    text = (src / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{src / 'warehouse.duckdb'}")
    assert text.count(GRANT) == 1
    text = text.replace(GRANT, '"explain_data_product", "run_sql", "list_tables", '
                               '"describe_table"]')
    anchor, deny = DENY[warehouse.key]
    assert text.count(anchor) == 1
    text = text.replace(anchor, deny + anchor)
    text = with_serve(text, statement_timeout_seconds=timeout)
    (dst / "tether.yaml").write_text(text)
    load_secret(dst / ".tether" / "mask.key")  # made once, before anyone reads it
    return dst


@dataclass
class Outcome:
    """What one call answered: a result, or a tool error (with its refusal), or a crash."""

    result: dict[str, Any] | None = None
    error: str | None = None
    refusal: dict[str, Any] | None = None
    crash: str | None = None
    seconds: float = 0.0

    @property
    def label(self) -> str:
        if self.crash:
            return "crash"
        if self.refusal is not None:
            return f"refused:{self.refusal.get('reason')}"
        return "error" if self.error is not None else "ok"


@dataclass
class Record:
    id: str
    category: str
    target: str
    user: str
    outcome: str
    verdict: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Target:
    name: str
    warehouse: Warehouse
    dir: Path
    project: Project
    ex: Executor
    tools: dict[str, GeneratedTool]
    oracle: Oracle
    names: dict[str, str]
    tmp: Path
    shaped: dict[Any, Any] = field(default_factory=dict)

    def close(self) -> None:
        self.ex.close()
        self.oracle.owner.close()
        if self.oracle.rerun_engine is not self.oracle.owner:
            self.oracle.rerun_engine.close()


def open_target(name: str, warehouse: Warehouse, project_dir: Path, tmp: Path,
                owner_url: str | None = None) -> Target:
    """A prepared project, its executor and tools, and the oracle over its warehouse (as the
    owner; re-runs as the project's own connection user)."""
    project = load_project(project_dir)
    ex = Executor(project, pagination.load_key(project_dir / ".tether" / "cursor.key"))
    ex.keys()
    profiles = {n: profile_product(project, n) for n in project.config.products}
    tools = {t.name: t for t in generate(project, profiles, "grounded")}
    tools |= {t.name: t for t in generate(project, {}, "generic")}
    policy = Policy(project_dir)
    url, schema = policy.url, policy.schema
    if url.startswith("duckdb:"):
        owner = Engine("duckdb", url.split(":///", 1)[1])
        rerun = owner
    else:
        owner = Engine("postgres", owner_url or url, schema)
        rerun = Engine("postgres", url, schema)
    oracle = Oracle(project_dir, owner, rerun)
    names = dict(warehouse.names)
    for key, q in warehouse.samples.items():
        names[key] = str(owner.run(q, max_rows=1)[1][0][0])
    names |= {"schema": owner.schema, "tmp": str(tmp),
              "tmp_table": f"attack_into_{secrets.token_hex(4)}"}
    return Target(name, warehouse, project_dir, project, ex, tools, oracle, names, tmp)


# --- one call ------------------------------------------------------------------------------------


def definitions(t: Target, user: str) -> Outcome:
    """The tool definitions the user is shown (their tool globs, products they may read)."""
    config = t.project.config
    shown = []
    for name, g in sorted(t.tools.items()):
        products = g.meta.get("tether/context", {}).get("products", [])
        if tool_visible(config, user, name) and (g.plan.kind == "probe" or all(
                table_allowed(config, user, p) for p in products if p in config.products)):
            wire = peruser.shaped(t.ex, user, g.wire(), g.plan, t.shaped)
            shown.append(without_named_restrictions(wire) if g.plan.kind == "probe" else wire)
    return Outcome(result={"tools": shown})


def call(t: Target, user: str, tool: str, args: dict[str, Any], version: str = "1.0.0"
         ) -> Outcome:
    if tool == "definitions":
        return definitions(t, user)
    name = PROBE if tool == "probe" else tool
    g = t.tools.get(name)
    if g is None:
        return Outcome(error=f"no tool {name} here")
    started = time.perf_counter()
    try:
        definition = peruser.shaped(t.ex, user, g.wire(), g.plan, t.shaped)  # as served
        o = Outcome(result=piped(t.ex).run(Call(user, name, version, definition, g.plan, args)))
    except ToolError as e:
        o = Outcome(error=str(e), refusal=e.refusal)
    except Exception as e:  # a crash is what the corpus looks for
        o = Outcome(crash=f"{type(e).__name__}: {e}"[:300])
    o.seconds = time.perf_counter() - started
    return o


def clean(o: Outcome) -> list[str]:
    """A tool error is clean: no traceback; policy refusals say "Not permitted:" with a reason
    from the fixed list and nothing else in the refusal; other errors do not claim to be one."""
    out = []
    if o.crash:
        return [f"crash: {o.crash}"]
    if o.error is None:
        return []
    if _TRACEBACK.search(o.error):
        out.append(f"traceback text in the error: {o.error[:200]}")
    if o.refusal is not None:
        if not o.error.startswith("Not permitted:"):
            out.append("a refusal whose text does not start with 'Not permitted:'")
        if o.refusal.get("reason") not in REASONS or set(o.refusal) != {"reason", "detail"}:
            out.append(f"a refusal outside the fixed form: {o.refusal}")
    elif o.error.startswith("Not permitted:"):
        out.append("'Not permitted:' without a refusal reason")
    return out


def meets(o: Outcome, expect: str | None) -> bool:
    if expect is None:
        return True
    if expect == "ok":
        return o.result is not None
    if expect == "rejected":
        return o.error is not None
    if expect == "error":
        return o.error is not None and o.refusal is None
    if expect == "refused":
        return o.refusal is not None
    return o.refusal is not None and o.refusal.get("reason") == expect


def judge(t: Target, user: str, tool: str, args: dict[str, Any], o: Outcome,
          deterministic: bool = True) -> list[str]:
    """Everything wrong with one outcome: unclean errors, forbidden values, results that differ
    from the entitled re-run, and engine errors the entitled query does not raise."""
    problems = clean(o)
    written = json.dumps(args, ensure_ascii=False)
    said = text_of(o.result) if o.result is not None else f"{o.error} {text_of(o.refusal)}"
    problems += t.oracle.scan(user, said, written)
    name = PROBE if tool == "probe" else tool
    g = t.tools.get(name)
    kind = g.plan.kind if g is not None else ""
    if o.result is not None:
        if kind == "sql" and deterministic:
            problems += t.oracle.judge_rows(str(args["sql"]), user, o.result)
        elif kind == "list":
            problems += t.oracle.judge_listing(user, g.plan.product or "", o.result)
        elif kind == "probe":
            problems += t.oracle.judge_probe(user, str(args["product"]), o.result)
        elif kind == "catalog":
            problems += t.oracle.judge_catalog(user, o.result)
    elif kind == "sql" and o.error and o.error.startswith("the query failed:") and deterministic:
        problems += t.oracle.judge_error_side_channel(str(args["sql"]), user)
    return problems


# --- cursors -------------------------------------------------------------------------------------


def cursor_attack(t: Target, user: str, variant: str) -> tuple[str, dict[str, Any], Outcome]:
    """(tool, args, outcome) of one cursor variant, after a first page as ``user``."""
    n = t.names
    tool, args = n["t_p"], {"limit": 3}
    first = call(t, user, tool, args)
    assert first.result is not None and first.result.get("next_cursor"), first
    cursor = str(first.result["next_cursor"])
    key = (t.dir / ".tether" / "cursor.key").read_text().strip()
    if variant == "continue":
        return tool, {**args, "cursor": cursor}, call(t, user, tool, {**args, "cursor": cursor})
    if variant == "other_user":
        return tool, {**args, "cursor": cursor}, call(t, t.warehouse.users["open"], tool,
                                                      {**args, "cursor": cursor})
    forged: str
    if variant == "tampered":
        mid = len(cursor) // 2
        forged = cursor[:mid] + ("A" if cursor[mid] != "A" else "B") + cursor[mid + 1:]
    elif variant == "wrong_key":
        forged = pagination.encode(os.urandom(32), user, tool, "1.0.0", args, [n["other_pk"]])
    elif variant == "insider_key":
        forged = pagination.encode(bytes.fromhex(key), user, tool, "1.0.0", args,
                                   [n["other_pk"]])
    elif variant == "type_confusion":
        forged = pagination.encode(bytes.fromhex(key), user, tool, "1.0.0", args,
                                   [{"n": "not a number"}])
    elif variant == "other_args":
        other = {**args, n["a_p"]: n["other"], "cursor": cursor}
        return tool, other, call(t, user, tool, other)
    elif variant == "other_tool":
        return n["t_fact"], {**args, "cursor": cursor}, call(t, user, n["t_fact"],
                                                            {**args, "cursor": cursor})
    elif variant == "other_version":
        return tool, {**args, "cursor": cursor}, call(t, user, tool, {**args, "cursor": cursor},
                                                      version="9.9.9")
    elif variant == "garbage":
        forged = "!!!not-base64!!!"
    else:
        forged = "A" * 20_000
    return tool, {**args, "cursor": forged}, call(t, user, tool, {**args, "cursor": forged})


# --- the corpus ----------------------------------------------------------------------------------


def applicable(a: Attack, names: dict[str, str]) -> bool:
    try:
        fill(a.tool, names)
        fill(a.args, names)
    except KeyError:
        return False
    return True


def run_attack(t: Target, a: Attack, role: str) -> Record | None:
    if not applicable(a, t.names):
        return None
    expect = a.expect[role]
    user = t.warehouse.users[role]
    if a.tool.startswith("cursor:"):
        tool, args, o = cursor_attack(t, user, a.tool.split(":", 1)[1])
    else:
        tool, args = fill(a.tool, t.names), fill(a.args, t.names)
        o = call(t, user, tool, args)
    problems = judge(t, user, tool, args, o, a.deterministic)
    if not meets(o, expect):
        problems.insert(0, f"expected {expect}, got {o.label}: {(o.error or '')[:160]}")
    return Record(a.id, a.category, t.name, user, o.label, "FAIL" if problems else "pass",
                  problems, o.seconds)


def run_corpus(t: Target, attacks: list[Attack] | None = None) -> list[Record]:
    out = []
    for a in attacks if attacks is not None else ATTACKS:
        for role in a.expect:
            if a.expect[role] == SKIP:
                continue
            r = run_attack(t, a, role)
            if r is not None:
                out.append(r)
    return out


def table(records: list[Record]) -> str:
    """A compact table of records (the failures, on failure)."""
    lines = [f"{'attack':28} {'target':16} {'user':12} {'outcome':30} problems"]
    for r in records:
        lines.append(f"{r.id:28} {r.target:16} {r.user:12} {r.outcome:30} "
                     f"{'; '.join(r.problems)[:400]}")
    return "\n".join(lines)


def summary(records: list[Record]) -> str:
    by = Counter((r.category, r.outcome.split(":")[0]) for r in records)
    cats = sorted({r.category for r in records})
    return ", ".join(f"{c}: " + "/".join(f"{k} {by[(c, k)]}" for k in ("ok", "refused", "error",
                                                                     "crash") if by[(c, k)])
                     for c in cats)


# --- the warehouse must not change ---------------------------------------------------------------


def fingerprint(t: Target) -> dict[str, Any]:
    """Row count and content digest of every table, the tables of the schema, and the DuckDB
    file's digest (none of which an attack may change)."""
    eng = t.oracle.owner
    out: dict[str, Any] = {}
    if eng.dialect == "duckdb":
        names = [r[0] for r in eng.run("SELECT table_name FROM duckdb_tables() ORDER BY 1")[1]]
        path = Path(str(t.project.config.sources[next(iter(t.project.config.sources))].url)
                    .split(":///", 1)[1])
        out["file"] = hashlib.sha256(path.read_bytes()).hexdigest()
        out["wal"] = path.with_name(path.name + ".wal").exists()
    else:
        names = [r[0] for r in eng.run(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %(s)s "
            "ORDER BY 1", {"s": eng.schema})[1]]
        out["into"] = eng.run("SELECT to_regclass(%(t)s) IS NOT NULL",
                              {"t": t.names["tmp_table"]})[1][0][0]
    out["tables"] = names
    for name in names:
        q = eng.table(name)
        try:
            out[name] = eng.run(f"SELECT count(*), md5(string_agg(CAST(t AS VARCHAR), '|' "
                                f"ORDER BY CAST(t AS VARCHAR))) FROM {q} AS t")[1][0]
        except EngineError as e:
            out[name] = str(e)
    return out
