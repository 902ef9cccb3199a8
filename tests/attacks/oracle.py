"""An oracle for the policy boundary that shares no code with tether's policy path.

It reads tether.yaml itself (no tether.config, no tether.policy.entitle, no sqlguard) and the
warehouse through its own connections (DuckDB read-only with tether's READ_ONLY_CONFIG, since
DuckDB refuses a second configuration in one process; psycopg for PostgreSQL), and judges a tool
result three ways:

(a) a forbidden-value scan: no result text and no error text may hold a value the user must
    never see (every value of a restricted column, the raw values of a column masked for the
    user and their unsalted md5/sha256, identifying values of rows outside the user's row
    filter, the mask key) unless the caller wrote it; nor a restricted column's name;
(b) a re-run: the same SQL over the user's entitled relations, written here from tether.yaml
    (row filter as written, attributes bound as parameters, masks applied, restricted columns
    absent) as MATERIALIZED CTEs, so each relation is computed before anything the caller wrote
    is evaluated: results must equal it as a bag of rows, and an engine error that this re-run
    does not raise is a side channel (it depends on rows outside the entitlement);
(c) (in the harness) refusals are clean tool errors.

The only tether imports for judging are ``MaskKey`` (the documented hash-mask digest, which
:meth:`Oracle.verify_hash_masks` checks the oracle's own SQL against) and ``load_secret`` (to
read the project's key file).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import math
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import sqlglot
import yaml
from sqlglot import exp

from tether.keyfile import load_secret
from tether.policy import MaskKey
from tether.sources.duckdb import READ_ONLY_CONFIG

REASONS = ("outside_entitlement", "restricted", "denied_table", "masked_predicate",
           "function_not_allowed", "shadowed_name")
REDACTED = "[redacted]"
RERUN_CAP = 20_000
_TEMPLATE = re.compile(r"\{\{\s*user\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_IDENTIFYING = re.compile(r"(name|email|phone|_id$|_uid$|_no$|_ref$|code)", re.I)
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}(:?\d{2})?|Z)?$")


class EngineError(Exception):
    """The engine refused or failed a statement of the oracle's."""


# --- tether.yaml, read directly ------------------------------------------------------------------


class Policy:
    """The policy section of a project's tether.yaml, read with yaml alone."""

    def __init__(self, project_dir: Path):
        raw = yaml.safe_load((project_dir / "tether.yaml").read_text())
        self.products: dict[str, dict[str, Any]] = raw["products"]
        pol = raw["policies"]
        self.roles: dict[str, dict[str, Any]] = pol["roles"]
        self.users: dict[str, dict[str, Any]] = pol["users"]
        self.restricted_globs: list[str] = pol.get("restricted", [])
        source = next(iter(raw["sources"].values()))
        self.url: str = source["url"]
        self.schema: str | None = source.get("schema")
        self.serve: dict[str, Any] = raw.get("serve") or {}
        self.relationships: list[dict[str, str]] = raw.get("relationships") or []

    def role(self, user: str) -> dict[str, Any]:
        return self.roles[self.users[user]["role"]]

    def attrs(self, user: str) -> dict[str, Any]:
        return {k: v for k, v in self.users[user].items() if k != "role"}

    def readable(self, user: str, product: str) -> bool:
        rule = self.role(user).get("tables") or {}
        if any(fnmatchcase(product, g) for g in rule.get("deny", [])):
            return False
        return any(fnmatchcase(product, g) for g in rule.get("allow", ["*"]))

    def row_filter(self, user: str, product: str) -> str | None:
        """The role's row filter on ``product`` as SQL; a ``{via: P}`` written out here, from
        the relationships as tether.yaml lists them (the oracle's own reading, not tether's):
        the rows whose P the user may read, through each hop's key."""
        found = (self.role(user).get("row_filters") or {}).get(product)
        if not isinstance(found, dict):
            return found
        parent = found["via"]
        if not self.readable(user, parent):
            return "1 = 0"
        hops = self._hops(product, parent)
        cond = self.row_filter(user, parent)
        for _child, column, target, key in reversed(hops):
            cond = (f'"{column}" IN (SELECT "{key}" FROM "{self.table_of(target)}"'
                    + (f" WHERE {cond}" if cond else "") + ")")
        return cond

    def _hops(self, start: str, goal: str) -> list[tuple[str, str, str, str]]:
        """The shortest chain of relationships (many side to one) from start to goal."""
        paths: list[list[tuple[str, str, str, str]]] = [[]]
        at = {start}
        while paths:
            path = paths.pop(0)
            here = path[-1][2] if path else start
            for r in self.relationships:
                child, column = r["from"].split(".", 1)
                target, key = r["to"].split(".", 1)
                if child != here or target in at:
                    continue
                if target == goal:
                    return [*path, (child, column, target, key)]
                at.add(target)
                paths.append([*path, (child, column, target, key)])
        raise AssertionError(f"no relationships lead from {start} to {goal}")

    def masks(self, user: str, product: str) -> dict[str, str]:
        role_masks: dict[str, str] = self.role(user).get("masks") or {}
        out: dict[str, str] = {}
        cols = self.products.get(product, {}).get("columns") or {}
        if "pii" in role_masks:
            out |= {c: role_masks["pii"] for c, f in cols.items()
                    if (f or {}).get("classification") == "pii"}
        for target, mask in role_masks.items():
            table, _, column = target.partition(".")
            if table == product and column:
                out[column] = mask
        return out

    def restricted(self, product: str, columns: Iterable[str]) -> set[str]:
        facts = self.products.get(product, {}).get("columns") or {}
        classified = {c for c, f in facts.items() if (f or {}).get("classification")
                      == "restricted"}
        return {c for c in columns if c in classified
                or any(fnmatchcase(f"{product}.{c}", g) for g in self.restricted_globs)}

    def table_of(self, product: str) -> str | None:
        table = self.products[product].get("table")
        return str(table).split(".")[-1] if table else None


# --- the oracle's own connections ----------------------------------------------------------------


class Engine:
    """One connection of the oracle's: DuckDB (read-only, tether's read-only configuration) or
    PostgreSQL (psycopg, read-only transactions rolled back after each statement)."""

    def __init__(self, dialect: str, where: str, schema: str | None = None):
        self.dialect = dialect
        self.schema = schema or ("main" if dialect == "duckdb" else "public")
        if dialect == "duckdb":
            import duckdb

            self.con: Any = duckdb.connect(where, read_only=True, config=dict(READ_ONLY_CONFIG))
        else:
            import psycopg

            self.con = psycopg.connect(
                where, options=f"-c search_path={self.schema} "
                "-c default_transaction_read_only=on")

    def run(self, sql: str, params: dict[str, Any] | None = None, timeout: float = 20.0,
            max_rows: int | None = None) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """(names, rows, capped): at most ``max_rows`` rows are read."""
        cap = max_rows if max_rows is not None else 10**9
        if self.dialect == "duckdb":
            import duckdb

            cur = self.con.cursor()
            timer = threading.Timer(timeout, cur.interrupt)
            timer.start()
            try:
                cur.execute(sql, params or None)
                names = [d[0] for d in cur.description or []]
                rows: list[tuple[Any, ...]] = []
                while len(rows) <= cap:
                    batch = cur.fetchmany(2048)
                    if not batch:
                        break
                    rows.extend(batch)
                return names, rows[:cap], len(rows) > cap
            except duckdb.Error as e:
                raise EngineError(str(e).strip().splitlines()[0]) from None
            finally:
                timer.cancel()
                cur.close()
        import psycopg

        try:
            with self.con.cursor() as cur:
                cur.execute(f"SET LOCAL statement_timeout = {int(timeout * 1000)}")
                cur.execute(sql, params or None)
                names = [d.name for d in cur.description or []]
                rows = cur.fetchmany(cap + 1)
                return names, rows[:cap], len(rows) > cap
        except psycopg.Error as e:
            raise EngineError(str(e).strip().splitlines()[0] if str(e).strip() else
                              type(e).__name__) from None
        finally:
            self.con.rollback()

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def table(self, name: str) -> str:
        return f"{self.quote(self.schema)}.{self.quote(name)}"

    def columns(self, table: str) -> list[tuple[str, str]]:
        if self.dialect == "duckdb":
            sql = ("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = $t "
                   "AND schema_name = $s AND database_name = current_database() "
                   "ORDER BY column_index")
        else:
            sql = ("SELECT column_name, data_type FROM information_schema.columns WHERE "
                   "table_name = %(t)s AND table_schema = %(s)s ORDER BY ordinal_position")
        return [(str(n), str(t)) for n, t, *_ in self.run(sql, {"t": table, "s": self.schema})[1]]

    def close(self) -> None:
        self.con.close()


# --- normalised rows -----------------------------------------------------------------------------


def norm(v: Any) -> Any:
    """One value as compared: numbers as floats of 9 significant digits, times in UTC, the rest
    as text (both tether's JSON-able values and the engine's own)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | decimal.Decimal):
        f = float(v)
        return float(f"{f:.9g}") if math.isfinite(f) else str(f)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, str):
        if _ISO.match(v):
            try:
                return norm(dt.datetime.fromisoformat(v.replace("Z", "+00:00")))
            except ValueError:
                return v
        return v
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    if isinstance(v, dict):
        return json.dumps({str(k): norm(x) for k, x in v.items()}, sort_keys=True)
    if isinstance(v, list | tuple):
        return json.dumps([norm(x) for x in v])
    return str(v)


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k.lower(), norm(v)) for k, v in row.items()))


# --- the forbidden-value scan --------------------------------------------------------------------


def _trie_pattern(words: Iterable[str]) -> str:
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


class Scanner:
    """Finds any of a set of values (case-insensitive, not inside a longer word) in a text."""

    def __init__(self, values: Iterable[str]):
        self.values = sorted({v.lower() for v in values if v})
        self.rx = (re.compile(r"(?<![A-Za-z0-9_])" + _trie_pattern(self.values)
                              + r"(?![A-Za-z0-9_])", re.I) if self.values else None)

    def find(self, text: str) -> set[str]:
        if self.rx is None or not text:
            return set()
        return {m.group(0).lower() for m in self.rx.finditer(text)}


def distinctive(v: str) -> bool:
    """A value that identifies something when found in a text (not a count or a year)."""
    v = v.strip()
    if len(v) < 6 or _ISO.match(v) or re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        return False
    return bool(re.search(r"[A-Za-z]", v)) or len(re.sub(r"\D", "", v)) >= 8


def text_of(x: Any) -> str:
    return json.dumps(x, default=str, ensure_ascii=False)


# --- the oracle ----------------------------------------------------------------------------------


@dataclass
class UserView:
    """What one user may and may not see, worked out once."""

    forbidden: Scanner
    forbidden_count: int
    restricted_names: set[str]


class Oracle:
    """Judges tool results for one target (a project copy and its warehouse)."""

    def __init__(self, project_dir: Path, owner: Engine, rerun: Engine):
        self.dir = project_dir
        self.policy = Policy(project_dir)
        self.owner = owner
        self.rerun_engine = rerun
        self.dialect = owner.dialect
        secret = load_secret(project_dir / ".tether" / "mask.key")
        self.key = MaskKey.from_secret(secret)
        self.key_texts = {self.key.inner, self.key.outer, secret.hex(),
                          base64.b64encode(secret).decode()}
        # a product defined by SQL is read by its own name, as run_sql lists it
        self.tables = {(self.policy.table_of(p) or p).lower(): p for p in self.policy.products
                       if self.policy.table_of(p) or self.policy.products[p].get("sql")}
        self._cols: dict[str, list[tuple[str, str]]] = {}
        self._views: dict[str, UserView] = {}
        self._rows: dict[tuple[str, str], list[dict[str, Any]]] = {}

    # --- entitled relations, written from tether.yaml ---

    def columns(self, product: str) -> list[tuple[str, str]]:
        if product not in self._cols:
            table = self.policy.table_of(product)
            if table:
                self._cols[product] = self.owner.columns(table)
            else:
                sql = self.policy.products[product]["sql"]
                names, _, _ = self.owner.run(f"SELECT * FROM ({sql}) AS t LIMIT 0")
                self._cols[product] = [(n, "") for n in names]
        return self._cols[product]

    def _mark(self, name: str) -> str:
        return f"${name}" if self.dialect == "duckdb" else f"%({name})s"

    def hash_sql(self, column: str) -> str:
        ki, ko, q = f"'{self.key.inner}'", f"'{self.key.outer}'", self.owner.quote(column)
        if self.dialect == "duckdb":
            return f"sha256({ko} || sha256({ki} || CAST({q} AS VARCHAR)))"
        inner = f"encode(sha256(convert_to({ki} || CAST({q} AS TEXT), 'UTF8')), 'hex')"
        return f"encode(sha256(convert_to({ko} || {inner}, 'UTF8')), 'hex')"

    def entitled_sql(self, user: str, product: str) -> tuple[str, dict[str, Any]]:
        """SELECT of the product's visible columns (masked as the mask says) over its rows that
        pass the row filter as written in tether.yaml; attributes as bound parameters."""
        cols = [c for c, _ in self.columns(product)]
        hidden = self.policy.restricted(product, cols)
        masks = self.policy.masks(user, product)
        text = "TEXT" if self.dialect == "postgres" else "VARCHAR"
        parts = []
        for c in cols:
            if c in hidden:
                continue
            q = self.owner.quote(c)
            mask = masks.get(c)
            if mask == "redact":
                parts.append(f"CAST('{REDACTED}' AS {text}) AS {q}")
            elif mask == "null":
                parts.append(f"CAST(NULL AS {text}) AS {q}")
            elif mask == "hash":
                parts.append(f"{self.hash_sql(c)} AS {q}")
            else:
                parts.append(q)
        table = self.policy.table_of(product)
        params: dict[str, Any] = {}
        if table:
            source = self.owner.table(table)
        else:  # its SQL over what this user may read of each product it reads
            inner, params = self.rewrite(str(self.policy.products[product]["sql"]), user)
            source = f"({inner}) AS {self.owner.quote(product)}"
        sql = f"SELECT {', '.join(parts)} FROM {source}"
        template = self.policy.row_filter(user, product)
        if template is not None:
            attrs = self.policy.attrs(user)

            def bind(m: re.Match[str]) -> str:
                params[f"u_{m.group(1)}"] = attrs[m.group(1)]
                return self._mark(f"u_{m.group(1)}")

            body = template.replace("%", "%%") if self.dialect == "postgres" else template
            sql += " WHERE " + _TEMPLATE.sub(bind, body)
        return sql, params

    def verify_hash_masks(self) -> int:
        """The oracle's hash mask in SQL equals ``MaskKey.digest(str(value))`` on every row of
        every column some role hashes; returns how many values were checked."""
        checked = 0
        for user in self.policy.users:
            for product in self.policy.products:
                table = self.policy.table_of(product)
                for column, mask in self.policy.masks(user, product).items():
                    if mask != "hash" or not table:
                        continue
                    _, rows, _ = self.owner.run(
                        f"SELECT {self.owner.quote(column)}, {self.hash_sql(column)} FROM "
                        f"{self.owner.table(table)} WHERE {self.owner.quote(column)} IS NOT NULL")
                    for raw, digest in rows:
                        assert digest == self.key.digest(str(raw)), (product, column, raw)
                    checked += len(rows)
        return checked

    def entitled_rows(self, user: str, product: str) -> list[dict[str, Any]]:
        key = (user, product)
        if key not in self._rows:
            sql, params = self.entitled_sql(user, product)
            names, rows, _ = self.owner.run(sql, params)
            self._rows[key] = [dict(zip(names, r, strict=True)) for r in rows]
        return self._rows[key]

    # --- what a user must never see ---

    def view(self, user: str) -> UserView:
        if user in self._views:
            return self._views[user]
        visible: set[str] = set()
        candidates: set[str] = set(self.key_texts)
        restricted_names: set[str] = set()
        for product in self.policy.products:
            cols = [c for c, _ in self.columns(product)]
            table = self.policy.table_of(product)
            hidden = self.policy.restricted(product, cols)
            restricted_names |= hidden
            for c in hidden:
                candidates |= self._values(f"SELECT DISTINCT {self.owner.quote(c)} FROM "
                                           f"{self.owner.table(table or product)}")
            if self.policy.readable(user, product):
                for row in self.entitled_rows(user, product):
                    visible |= {str(v).lower() for v in row.values() if v is not None}
            masks = self.policy.masks(user, product)
            for c in masks:
                if table and c in cols:
                    raw = self._values(f"SELECT DISTINCT CAST({self.owner.quote(c)} AS VARCHAR)"
                                       f" FROM {self.owner.table(table)}")
                    candidates |= raw
                    candidates |= {hashlib.md5(v.encode()).hexdigest() for v in raw}
                    candidates |= {hashlib.sha256(v.encode()).hexdigest() for v in raw}
            template = self.policy.row_filter(user, product)
            if template is not None and table:
                ident = [c for c, t in self.columns(product) if c not in hidden and (
                    c in (self.policy.products[product].get("primary_key") or [])
                    or c in (self.policy.products[product].get("identifiers") or {})
                    or _IDENTIFYING.search(c))]
                if ident:
                    sql, params = self.entitled_sql(user, product)
                    where = sql.split(" WHERE ", 1)[1]
                    cols_sql = ", ".join(f"CAST({self.owner.quote(c)} AS VARCHAR)"
                                         for c in ident)
                    _, rows, _ = self.owner.run(
                        f"SELECT {cols_sql} FROM {self.owner.table(table)} "
                        f"WHERE ({where}) IS NOT TRUE", params)
                    candidates |= {str(v) for r in rows for v in r if v is not None}
        keep = {v for v in candidates if v.lower() not in visible and (
            distinctive(v) or v in self.key_texts)}
        view = UserView(Scanner(keep), len(keep), restricted_names)
        self._views[user] = view
        return view

    def _values(self, sql: str) -> set[str]:
        return {str(r[0]) for r in self.owner.run(sql)[1] if r[0] is not None}

    def scan(self, user: str, said: str, written: str) -> list[str]:
        """Forbidden values (and restricted column names) in ``said`` that the caller did not
        write in ``written``."""
        view = self.view(user)
        low = written.lower()
        out = [f"forbidden value {v[:60]!r}" for v in sorted(view.forbidden.find(said))
               if v not in low]
        for name in sorted(view.restricted_names):
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", said, re.I) \
                    and name.lower() not in low:
                out.append(f"restricted column name {name}")
        return out

    # --- the independent rewrite ---

    def rewrite(self, sql: str, user: str) -> tuple[str, dict[str, Any]]:
        """``sql`` run over the user's entitled relations: each product table it reads (CTE
        references resolved by scope) names a MATERIALIZED CTE holding the relation, so the
        relation is computed first, as the policy means, whatever the engine's optimizer
        would reorder; the whole wrapped as tether wraps it (duplicate names alike)."""
        tree = sqlglot.parse_one(sql, read=self.dialect)
        chosen: list[tuple[exp.Table, str]] = []
        for t in list(tree.find_all(exp.Table)):
            if not isinstance(t.this, exp.Identifier) or t.args.get("catalog"):
                continue
            product = self.tables.get(t.name.lower())
            if product is None or (t.db and t.db.lower() != self.owner.schema.lower()):
                continue
            if _cte_in_scope(t):
                continue
            chosen.append((t, product))
        ctes: dict[str, tuple[str, dict[str, Any]]] = {}
        for t, product in chosen:
            mark = f"tether_oracle_{product}"
            alias = t.args.get("alias")
            new = exp.Table(this=exp.to_identifier(mark))
            new.set("alias", alias.copy() if isinstance(alias, exp.TableAlias) else
                    exp.TableAlias(this=exp.to_identifier(t.name, quoted=True)))
            for arg, value in t.args.items():
                if arg not in ("this", "db", "catalog", "alias") and value:
                    new.set(arg, value)
            t.replace(new)
            ctes[mark] = self.entitled_sql(user, product)
        body = tree.sql(dialect=self.dialect)
        params: dict[str, Any] = {}
        for _, p in ctes.values():
            params |= p
        if params and self.dialect == "postgres":
            body = body.replace("%", "%%")
        head = ", ".join(f"{m} AS MATERIALIZED ({text})" for m, (text, _) in ctes.items())
        return (f"WITH {head} " if head else "") + f"SELECT * FROM ({body}) AS oracle_q", params

    def rerun(self, sql: str, user: str, timeout: float = 20.0
              ) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        text, params = self.rewrite(sql, user)
        return self._run_wrapped(text, params, timeout)

    def _run_wrapped(self, text: str, params: dict[str, Any], timeout: float
                     ) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        return self.rerun_engine.run(f"{text} LIMIT {RERUN_CAP + 1}", params, timeout=timeout,
                                     max_rows=RERUN_CAP)

    # --- judging ---

    def judge_rows(self, sql: str, user: str, result: dict[str, Any]) -> list[str]:
        """A run_sql result against the re-run over the entitled relations, as bags."""
        if result.get("truncated") and not result.get("rows"):
            return []  # stopped by a cap before any row: nothing to compare
        # LIMIT without ORDER BY picks any rows: re-run without it, compare as a sub-bag
        tree = sqlglot.parse_one(sql, read=self.dialect)
        limit = tree.args.get("limit")
        loose = isinstance(tree, exp.Select) and limit is not None and not tree.args.get("order")
        if loose:
            tree.set("limit", None)
        try:
            text, params = self.rewrite(tree.sql(dialect=self.dialect), user)
            names, rows, capped = self._run_wrapped(text, params, 20.0)
        except EngineError as e:
            return [f"the entitled re-run failed where tether answered: {e}"]
        want = Counter(row_key(dict(zip(names, r, strict=False))) for r in rows)
        got = Counter(row_key(r) for r in result.get("rows", []))
        if loose:
            n = int(limit.expression.this) if isinstance(limit, exp.Limit) and isinstance(
                limit.expression, exp.Literal) else None
            extra = got - want
            if extra and not capped:
                return [f"{sum(extra.values())} row(s) beyond the entitled re-run, e.g. "
                        f"{next(iter(extra))}"[:300]]
            if n is not None and not capped and not result.get("truncated") and (
                    sum(got.values()) != min(n, sum(want.values()))):
                return [f"{sum(got.values())} rows where the entitled re-run has "
                        f"{min(n, sum(want.values()))}"]
            return []
        if result.get("truncated") or capped:
            extra = got - want
            if extra and not capped:
                return [f"{sum(extra.values())} row(s) beyond the entitled re-run, e.g. "
                        f"{next(iter(extra))}"[:300]]
            return []
        if got != want:
            extra, missing = got - want, want - got
            return [f"differs from the entitled re-run: {sum(extra.values())} extra, "
                    f"{sum(missing.values())} missing; e.g. "
                    f"{next(iter(extra or missing))}"[:300]]
        return []

    def judge_error_side_channel(self, sql: str, user: str) -> list[str]:
        """An engine error where the entitled query runs cleanly tells the caller something
        about rows they may not see."""
        try:
            self.rerun(sql, user, timeout=5.0)
        except EngineError:
            return []
        except sqlglot.errors.SqlglotError:
            return []
        return ["an engine error where the entitled re-run succeeds (a side channel)"]

    def judge_listing(self, user: str, product: str, result: dict[str, Any]) -> list[str]:
        rows = result.get("rows", [])
        if not rows:
            return []
        if not self.policy.readable(user, product):
            return [f"rows of {product}, which the role may not read"]
        # a column reached through a relationship (customers.sales_region, customers.label):
        # each value one of the caller's own rows of the product it names holds
        problems = self._judge_reached(user, rows)
        if result.get("aggregate"):  # counts and totals: groups, not rows of the product
            return problems
        rows = [{k: v for k, v in r.items() if "." not in k} for r in rows]
        keys = set(rows[0])
        allowed = Counter(row_key({k: v for k, v in r.items() if k in keys})
                          for r in self.entitled_rows(user, product))
        got = Counter(row_key(r) for r in rows)
        extra = got - allowed
        if extra:
            return [f"{sum(extra.values())} listing row(s) outside the entitled relation of "
                    f"{product}, e.g. {next(iter(extra))}"[:300]]
        return []

    def _judge_reached(self, user: str, rows: list[dict[str, Any]]) -> list[str]:
        """Values of reached columns (``PRODUCT.column`` at the end of a path) that no row the
        caller may read of that product holds."""
        out = []
        for key in sorted({k for r in rows for k in r if "." in k}):
            *path, column = key.split(".")
            product = path[-1] if path else ""
            if product not in self.policy.products or not self.policy.readable(user, product):
                if product in self.policy.products:
                    out.append(f"{key}: a column of {product}, which the role may not read")
                continue
            entitled = self.entitled_rows(user, product)
            if column == "label":
                label = self.policy.products[product].get("label")
                if not label:
                    continue
                column = label
            have = {norm(r.get(column)) for r in entitled}
            bad = [r[key] for r in rows if r.get(key) is not None and norm(r[key]) not in have]
            if bad:
                out.append(f"{key}: {len(bad)} value(s) no row of {product} you may read holds, "
                           f"e.g. {str(bad[0])[:60]}")
        return out

    def judge_probe(self, user: str, product: str, result: dict[str, Any]) -> list[str]:
        out: list[str] = []
        rows = self.entitled_rows(user, product)
        if result.get("row_count") != len(rows):
            out.append(f"probe row_count {result.get('row_count')} != entitled {len(rows)}")
        masks = self.policy.masks(user, product)
        cols = [c for c, _ in self.columns(product)]
        hidden = self.policy.restricted(product, cols)
        for col in result.get("columns", []):
            name, values = col.get("name"), col.get("values") or []
            if name in hidden:
                out.append(f"probe lists restricted column {name}")
            elif name in masks and values:
                out.append(f"probe shows values of masked column {name}")
            elif values:
                seen = {norm(r.get(name)) for r in rows}
                stray = [v for v in values if norm(v) not in seen]
                if stray:
                    out.append(f"probe values of {name} outside the entitlement: "
                               f"{stray[:3]}"[:300])
        return out

    def judge_catalog(self, user: str, result: dict[str, Any]) -> list[str]:
        listed = {str(r.get("table", "")).lower() for r in result.get("rows", [])}
        denied = {self.policy.table_of(p) for p in self.policy.products
                  if not self.policy.readable(user, p)}
        shown = sorted(t for t in denied if t and t.lower() in listed)
        return [f"list_tables shows denied {', '.join(shown)}"] if shown else []


def _cte_in_scope(table: exp.Table) -> bool:
    """Whether ``table`` names a CTE visible where it stands: any CTE of an enclosing WITH, but
    from inside a CTE's own body only the CTEs before it (and itself when RECURSIVE)."""
    name = table.name.lower()
    path: list[exp.Expr] = [table]
    node: exp.Expr = table
    while node.parent is not None:
        parent = node.parent
        with_ = parent.args.get("with_") or parent.args.get("with")
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            if node is with_:
                i = ctes.index(path[-2])
                ctes = ctes[: i + (1 if with_.args.get("recursive") else 0)]
            if any(c.alias_or_name.lower() == name for c in ctes):
                return True
        path.append(parent)
        node = parent
    return False
