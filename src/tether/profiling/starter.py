"""`tether init`: a commented starter tether.yaml inferred from a live source.

One product per table, named after it. Primary key, time columns, freshness and identifier
columns are inferred only where the data makes them clear (checked in the engine: uniqueness,
non-nullness, one value shape), and each inference carries ``# inferred: confirm``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.dialects import sql_name
from tether.context.names import (
    IDENTIFIER_WORDS,
    identifier_like,
    name_words,
    ref,
    says_identifier,
)
from tether.context.outside import clean
from tether.context.schema import Column
from tether.context.timeformat import grain, guesses, is_format, says
from tether.context.timeformat import pattern as time_pattern
from tether.errors import QueryError
from tether.profiling import shapes
from tether.profiling.formats import email_predicate, unit_from_name
from tether.profiling.personal import BIRTH_WORDS, personal_by_name
from tether.sources import Source, resolve_duckdb_path
from tether.sources.openapi import Spec
from tether.sources.openapi import words as openapi_words
from tether.sources.sqlalchemy import redact

INFERRED = "# inferred: confirm"
_LOAD_WORDS = ("load", "ingest", "etl", "sync", "updat", "refresh", "extract")
"""A time column one of whose words starts so says when the row was loaded: freshness."""


@dataclass
class StarterProduct:
    table: str
    columns: list[Column]
    primary_key: list[str] = field(default_factory=list)
    pk_inferred: bool = False
    time_columns: dict[str, tuple[str, bool]] = field(default_factory=dict)  # col -> (tz, inferred)
    metric_time: str | None = None
    freshness: str | None = None
    identifiers: dict[str, str] = field(default_factory=dict)  # col -> pattern
    problem: str | None = None  # the engine could not read the table: nothing inferred
    bounds: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # col -> (min, max)
    moves: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    """status column -> (from, to, how often) moves observed along a history (see _moves)"""
    history: tuple[list[str], str] | None = None  # (the entity's key columns, the order)
    label: tuple[str, str] | None = None  # (the column that names each row, why)
    future: bool = False  # the freshness column holds times after now (a calendar, bookings)
    time_via: tuple[str, str] | None = None  # (a column into a date table, why): its time
    personal: dict[str, tuple[str, str]] = field(default_factory=dict)  # col -> (kind, why)


@dataclass(frozen=True)
class Reference:
    """A column of one starter product found to hold another's key (profiling/joins.py)."""

    child: StarterProduct
    column: str
    parent: StarterProduct
    key: str
    named: bool = False  # the column is named for the key, each name without its table's prefix
    evidence: str = ""  # what the comment says: "declared: ...", "inferred: ...", "candidate: ..."
    declared: bool = False  # a FOREIGN KEY constraint of the source
    written: bool = True  # an entry of relationships:, else a candidate left as a comment


def infer_products(src: Source) -> list[StarterProduct]:
    """What the data makes clear about each table of a source."""
    out = []
    for table in src.tables():
        rel = src.table_expr(table)
        cols = src.describe(rel, label=f"table {table!r}")
        p = StarterProduct(table=table, columns=cols)
        try:
            _infer(src, rel, table, cols, p)
        except QueryError as e:  # one table the engine cannot read stops no other
            p = StarterProduct(table=table, columns=cols, problem=e.reason.splitlines()[0])
        out.append(p)
    return out


def _infer(src: Source, rel: exp.Table, table: str, cols: list[Column], p: StarterProduct
           ) -> None:
    """Key, time columns, freshness and identifiers of one table, into ``p``."""
    bounds = p.bounds = _bounds(src, rel, cols)
    held = _infer_time_formats(src, rel, cols, bounds)
    p.primary_key = src.primary_key(table)
    if not p.primary_key:
        p.primary_key, p.pk_inferred = _infer_key(src, rel, table, cols), True
    for c in cols:
        if c.kind == "timestamptz":
            p.time_columns[c.name] = ("UTC", False)
        elif c.kind in ("timestamp", "date"):
            p.time_columns[c.name] = ("UTC", True)
        elif c.name in held:
            p.time_columns[c.name] = held[c.name]
    loads = [c.name for c in cols if c.name in p.time_columns and _says_load(c.name)]
    # a birth date is when someone was born, not something that happened in the data
    events = [c for c in p.time_columns if c not in loads
              and not set(name_words(c)) & BIRTH_WORDS]
    # the finest event time (a timestamp before a date before a year), the first of equals
    p.metric_time = min(events, key=lambda c: _GRAIN_ORDER.index(_grain_of(p, c, cols)),
                        default=None)
    # as_of: a load time where one is kept, else the newest event (never a file's time)
    p.freshness = loads[0] if loads else p.metric_time
    p.future = _in_future(src, rel, p, cols)
    p.identifiers = _infer_identifiers(src, rel, [c for c in cols if c.name not in held], bounds)
    p.label = _infer_label(src, rel, cols, p)
    _infer_personal(src, rel, cols, p)
    _infer_moves(src, rel, cols, p)




def _in_future(src: Source, rel: exp.Table, p: StarterProduct, cols: list[Column]) -> bool:
    """Whether the freshness column (a date or timestamp) holds a time after now: a calendar
    table's years ahead, bookings; as_of is then the newest time not after the clock."""
    kinds = {c.name: c.kind for c in cols}
    col = p.freshness
    if col is None or kinds.get(col) not in ("date", "timestamp", "timestamptz"):
        return False
    newest = src.query(exp.select(exp.func("MAX", exp.column(col, quoted=True))).from_(
        rel.copy()))[0][0]
    now = dt.datetime.now(dt.UTC)
    if isinstance(newest, dt.datetime):
        return (newest if newest.tzinfo else newest.replace(tzinfo=dt.UTC)) > now
    return isinstance(newest, dt.date) and newest > now.date()


LABEL_WORDS = frozenset({"name", "title", "label"})
"""A column named with one of these words is the first a label is looked for in."""
LABEL_MEAN_CHARS = 40
"""A label is short: at most this many characters on average (a comment or an address is
longer text that happens not to repeat)."""
LABEL_DISTINCT = 0.9
"""A label nearly never repeats: at least this share of the rows' values are distinct."""


def _infer_personal(src: Source, rel: exp.Table, cols: list[Column], p: StarterProduct
                    ) -> None:
    """Personal data (profiling/personal.py): by name, and an e-mail address by its values
    (every non-null value fits, one statement, where the engine reads the pattern)."""
    for c in cols:
        kind = None if c.nested else personal_by_name(c.name, c.kind)
        if kind is not None:
            p.personal[c.name] = (kind, "its name says so")
    texts = [c.name for c in cols if c.kind == "string" and not c.nested
             and c.name not in p.personal]
    if not texts or src.dialect not in ("duckdb", "postgres"):
        return
    fits = email_predicate(src.dialect)
    exprs: list[exp.Expr] = []
    for t in texts:
        col = exp.column(t, quoted=True)
        exprs += [exp.Count(this=col.copy()), exp.func("COUNT", exp.Case(ifs=[exp.If(
            this=sqlglot.parse_one(fits.replace(":c", col.sql(dialect=src.dialect)),
                                   dialect=src.dialect), true=exp.Literal.number(1))]))]
    row = src.query(exp.select(*exprs).from_(rel.copy()))[0]
    for i, t in enumerate(texts):
        seen, fit = int(row[2 * i] or 0), int(row[2 * i + 1] or 0)
        if seen and fit == seen:
            p.personal[t] = ("email", f"every value is an e-mail address ({seen} rows)")


def _infer_label(src: Source, rel: exp.Table, cols: list[Column], p: StarterProduct
                 ) -> tuple[str, str] | None:
    """The column that says which row it is to a person: a text column outside the key, not
    an identifier or a time, whose values nearly never repeat and are short (one statement);
    one named as a name, title or label first, else the first in the table's order."""
    texts = [c.name for c in cols if c.kind == "string" and not c.nested
             and c.name not in p.primary_key and c.name not in p.time_columns
             and c.name not in p.identifiers and not says_identifier(c.name)
             and not set(name_words(c.name)) & IDENTIFIER_WORDS]  # no code (entity_id:token)
    if not texts or len(p.primary_key) != 1:
        return None
    exprs: list[exp.Expr] = [exp.func("COUNT", exp.Star())]
    for t in texts:
        ref = exp.column(t, quoted=True)
        exprs += [exp.Count(this=exp.Distinct(expressions=[ref.copy()])),
                  exp.func("AVG", exp.Length(this=ref.copy()))]
    row = src.query(exp.select(*exprs).from_(rel.copy()))[0]
    rows = int(row[0] or 0)
    if rows < 2:
        return None
    fit = [(t, int(row[1 + 2 * i] or 0), float(row[2 + 2 * i] or 0))
           for i, t in enumerate(texts)]
    fit = [f for f in fit if f[1] >= LABEL_DISTINCT * rows and f[2] <= LABEL_MEAN_CHARS]
    if not fit:
        return None
    column, distinct, mean = min(fit, key=lambda f: (
        not set(name_words(f[0])) & LABEL_WORDS, texts.index(f[0])))
    return column, (f"names each row: {distinct} values in {rows} rows, {mean:.0f} characters "
                    "on average")


MAX_STATES = 12
"""A text column with at most this many values, changing along a history, is a status."""
MIN_DIRECTION = 0.1
"""A status moves one way more than back: the share of its moves not matched by a move back
(|a -> b minus b -> a| over all moves) is at least this. Values that go back as often as forth
along the order (the lines of one order, each its own thing, in line order) make no history."""
_ORDER_KINDS = ("integer", "date", "timestamp", "timestamptz")


def _infer_moves(src: Source, rel: exp.Table, cols: list[Column], p: StarterProduct) -> None:
    """Where the rows are a history (a key of two or three columns, one of which orders the
    others' rows: a number or a time), the moves each status-like column made along it: a text
    column outside the key with 2..MAX_STATES values that repeat (at most half as many values
    as rows), read value after value per entity. What a write action's transitions could allow,
    for a person to confirm."""
    kinds = {c.name: c.kind for c in cols}
    key = p.primary_key
    if not 2 <= len(key) <= 3:
        return
    order = next((k for k in reversed(key) if kinds.get(k) in _ORDER_KINDS), None)
    if order is None:
        return
    entity = [k for k in key if k != order]
    texts = [c.name for c in cols if c.kind == "string" and not c.nested and c.name not in key]
    if not texts:
        return
    counts = src.query(exp.select(exp.func("COUNT", exp.Star()), *[exp.Count(
        this=exp.Distinct(expressions=[exp.column(t, quoted=True)])) for t in texts]).from_(
        rel.copy()))[0]
    rows = counts[0] or 0
    # a status repeats: few values, each held by many rows
    states = [t for t, n in zip(texts, counts[1:], strict=True)
              if 2 <= (n or 0) <= MAX_STATES and 2 * (n or 0) <= rows][:3]
    for col in states:
        window = exp.Window(this=exp.func("LAG", exp.column(col, quoted=True)),
                            partition_by=[exp.column(e, quoted=True) for e in entity],
                            order=exp.Order(expressions=[exp.Ordered(
                                this=exp.column(order, quoted=True))]))
        steps = exp.select(exp.column(col, quoted=True).as_("cur"), window.as_("prev")).from_(
            rel.copy()).subquery("steps")
        q = (exp.select("prev", "cur", exp.func("COUNT", exp.Star()).as_("n")).from_(steps)
             .where("prev IS NOT NULL AND cur IS NOT NULL AND prev <> cur")
             .group_by("prev", "cur").order_by("prev", "cur"))
        found = [(str(a), str(b), int(n)) for a, b, n in src.query(q)]
        if found and direction(found) >= MIN_DIRECTION:
            p.moves[col] = found
            p.history = (entity, order)


def direction(moves: list[tuple[str, str, int]]) -> float:
    """The share of moves not matched by a move back: 0 where every a -> b has as many b -> a
    (the order says nothing), 1 where no move is ever undone."""
    seen = {(a, b): n for a, b, n in moves}
    total = sum(seen.values())
    return sum(abs(n - seen.get((b, a), 0)) for (a, b), n in seen.items()) / 2 / total \
        if total else 0.0


_GRAIN_ORDER = ("second", "day", "month", "year")


def _grain_of(p: StarterProduct, column: str, cols: list[Column]) -> str:
    tz = p.time_columns[column][0]
    if is_format(tz):
        return grain(tz)
    return "day" if next(c.kind for c in cols if c.name == column) == "date" else "second"


_YEAR_WORDS = frozenset({"year", "yr", "yyyy", "season", "fy"})
"""A name with one of these words may hold a year as a number (a number in 1000..2999 alone
could be an amount)."""
_MONTH_WORDS = frozenset({"month", "yyyymm", "ym", "period"})
_DAY_WORDS = frozenset({"date", "day", "dt", "yyyymmdd"})
_SECOND_WORDS = frozenset({"timestamp", "ts", "epoch", "unix", "time"})


def _bounds(src: Source, rel: exp.Table, cols: list[Column]) -> dict[str, tuple[Any, Any]]:
    """The smallest and largest value of every integer and text column, in one statement (what
    both the time and the identifier inference start from)."""
    plain = [c for c in cols if not c.nested and c.kind in ("integer", "string")]
    if not plain:
        return {}
    exprs: list[exp.Expr] = []
    for c in plain:
        ref = exp.column(c.name, quoted=True)
        exprs += [exp.func("MIN", ref), exp.func("MAX", ref.copy())]
    row = src.query(exp.select(*exprs).from_(rel.copy()))[0]
    return {c.name: (row[2 * i], row[2 * i + 1]) for i, c in enumerate(plain)}


def _infer_time_formats(src: Source, rel: exp.Table, cols: list[Column],
                        bounds: dict[str, tuple[Any, Any]]) -> dict[str, tuple[str, bool]]:
    """Integer and text columns that hold time, with the format they hold it in, by the shape
    of every value (checked in the engine): integers in 1000..2999 named as years (``%Y``),
    six-digit year-months and eight-digit dates whose month and day parts are all valid
    (``%Y%m``, ``%Y%m%d``), seconds since 1970 named as a time (``%s``); text whose every value
    is a year (named so), a month, a date or a date and time in one format (``%Y-%m-%d``,
    ``%m/%d/%Y``, ...). Text dates that read both day-first and month-first are left alone."""
    found: dict[str, tuple[str, bool]] = {}
    for c in cols:
        if c.name not in bounds:
            continue
        lo, hi = bounds[c.name]
        if lo is None or lo == hi:  # one value throughout tells no time
            continue
        words = set(name_words(c.name))
        fmt = (_integer_time(src, rel, c.name, int(lo), int(hi), words) if c.kind == "integer"
               else _text_time(src, rel, c.name, str(lo), str(hi), words))
        if fmt is not None:
            found[c.name] = (fmt, True)
    return found


def _integer_time(src: Source, rel: exp.Table, column: str, lo: int, hi: int,
                  words: set[str]) -> str | None:
    named = bool(words & (_YEAR_WORDS | _MONTH_WORDS | _DAY_WORDS | _SECOND_WORDS))
    if lo >= 1000 and hi <= 2999:
        return "%Y" if words & _YEAR_WORDS else None
    if identifier_like(column) and not named:
        return None
    ref = exp.cast(exp.column(column, quoted=True), "VARCHAR")
    if lo >= 100001 and hi <= 299912:
        return "%Y%m" if _all_match(src, rel, ref, time_pattern("%Y%m")) else None
    if lo >= 10000101 and hi <= 29991231:
        return "%Y%m%d" if _all_match(src, rel, ref, time_pattern("%Y%m%d")) else None
    if lo >= 10**8 and hi <= 42 * 10**8 and words & _SECOND_WORDS:
        return "%s"  # 1973..2103 in seconds since 1970, and named as a time
    return None


def _text_time(src: Source, rel: exp.Table, column: str, lo: str, hi: str,
               words: set[str]) -> str | None:
    """The one format the smallest and the largest value both read in, that every value fits
    (checked in the engine); a bare year needs a name that says so."""
    fits = [f for f in guesses(lo) if f in guesses(hi) and (f != "%Y" or words & _YEAR_WORDS)]
    found = [f for f in fits
             if _all_match(src, rel, exp.column(column, quoted=True), time_pattern(f))]
    return found[0] if len(found) == 1 else None  # both day-first and month-first: unsaid


def _says_load(name: str) -> bool:
    return any(w.startswith(_LOAD_WORDS) for w in re.split(r"[^a-z0-9]+", name.lower()) if w)


_KEY_KINDS = ("string", "integer", "uuid")
"""Kinds a single-column key may have (a float or a time that happens to be unique is not one)."""
_SET_KINDS = (*_KEY_KINDS, "date", "timestamp", "timestamptz")
"""Kinds a column of a composite key may have: a time may tell rows of one thing apart."""
_KEY_COLUMNS_CHECKED = 12
_SET_CANDIDATES = 8
"""Columns tried in composite keys: pairs of the first 8, triples of the first 6 (28 and 20
sets, each statement one pass over the table)."""
_TRIPLE_CANDIDATES = 6


def _infer_key(src: Source, rel: exp.Table, table: str, cols: list[Column]) -> list[str]:
    """The smallest set of at most three columns that is unique and non-null in the data,
    checked in the engine in at most three statements: one column first (id-like names
    first: ``id``, ``<table>_id``, then any name whose last word is an identifier word, run
    into the word before it or not, in any case style, then the table's columns in order; an
    integer alone only where its name says it is an identifier or it comes first: a unique
    count is a measure by chance), then pairs, then triples of the non-null id-like, date and
    time, and other key-kind columns (a time held as a number or text keeps its place among
    the others). Columns whose names say they are identifiers come before the rest at every
    size: a pair of them is the key before a column of free text that happens to be unique (a
    comment). Empty when none is (or the table has no rows)."""
    singular = table.rsplit(".", 1)[-1].rstrip("s")
    names = [c.name for c in cols if c.kind in _SET_KINDS and not c.nested]
    kinds = {c.name: c.kind for c in cols}
    order = [n for n in ("id", f"{singular}_id", f"{table}_id") if n in names]
    order += [n for n in names if says_identifier(n) and n not in order]
    order += [n for n in names if kinds[n] in ("date", "timestamp", "timestamptz")
              and n not in order]
    order += [n for n in names if n not in order]
    singles = [n for n in order if kinds[n] in _KEY_KINDS and (
        kinds[n] != "integer" or says_identifier(n) or n == names[0])][:_KEY_COLUMNS_CHECKED]
    in_sets = order[:_SET_CANDIDATES]  # composite candidates, times among them
    counted = list(dict.fromkeys(singles + in_sets))  # what the first statement counts
    if not counted:
        return []
    exprs: list[exp.Expr] = [exp.func("COUNT", exp.Star())]
    for name in counted:
        ref = exp.column(name, quoted=True)
        exprs += [exp.func("COUNT", ref.copy()),
                  exp.Count(this=exp.Distinct(expressions=[ref.copy()]))]
    row = src.query(exp.select(*exprs).from_(rel.copy()))[0]
    n = row[0]
    if not n:
        return []
    stats = {name: (row[1 + 2 * i], row[2 + 2 * i]) for i, name in enumerate(counted)}
    unique = [name for name in singles if stats[name] == (n, n)]
    named = [name for name in unique if says_identifier(name) or name in order[:1]]
    if named:
        return named[:1]
    full = [name for name in in_sets if stats[name][0] == n]  # the non-null ones
    for size, width in ((2, _SET_CANDIDATES), (3, _TRIPLE_CANDIDATES)):
        sets = list(itertools.combinations(full[:width], size))
        if not sets:
            continue
        counts = src.query(exp.select(*[exp.Count(this=exp.Distinct(expressions=[exp.Tuple(
            expressions=[exp.column(c, quoted=True) for c in cols_])])) for cols_ in sets])
            .from_(rel.copy()))[0]
        keys = [list(cols_) for cols_, distinct in zip(sets, counts, strict=True)
                if distinct == n]
        by_name = [k for k in keys if all(says_identifier(c) for c in k)]
        if size == 2 and by_name:  # identifiers together before a unique column of any name
            return by_name[0]
        if unique:
            return unique[:1]
        if keys:
            return keys[0]
    return unique[:1]


def _infer_identifiers(src: Source, rel: exp.Table, cols: list[Column],
                       bounds: dict[str, tuple[Any, Any]]) -> dict[str, str]:
    """Id-like string columns whose every value fits one shape (checked in the engine)."""
    found: dict[str, str] = {}
    for c in cols:
        if c.kind not in ("string", "uuid") or not identifier_like(c.name):
            continue
        if c.kind == "uuid":
            found[c.name] = shapes.UUID
            continue
        lo, hi = bounds.get(c.name, (None, None))  # read with the time columns' bounds
        if lo is None or lo == hi:  # one value throughout tells no shape
            continue
        # no fixed-length codes here: a league's two letters are an enum to count by, not a
        # scheme (the profile gives such a column its pattern where it is a key part)
        for pattern in shapes.candidates(str(lo), str(hi), loose=False):
            if _all_match(src, rel, c.name, pattern):
                found[c.name] = pattern
                break
    return found


def _all_match(src: Source, rel: exp.Table, column: str | exp.Expr, pattern: str) -> bool:
    ref = exp.column(column, quoted=True) if isinstance(column, str) else column
    cond = exp.RegexpLike(this=ref.copy(), expression=exp.Placeholder(this="pattern"))
    q = exp.select(
        exp.func("COUNT", ref),
        exp.func("SUM", exp.If(this=cond, true=exp.Literal.number(1),
                               false=exp.Literal.number(0))),
    ).from_(rel.copy())
    # regexp_matches is a partial match; the pattern is anchored with ^...$
    n, hits = src.query(q, {"pattern": pattern})[0]
    return bool(n) and n == hits


def starter_url(url: str, project_dir: Path) -> tuple[str, str | None]:
    """(URL to write, env var to set): passwords become ${TETHER_SOURCE_PASSWORD}."""
    path = resolve_duckdb_path(url, project_dir)
    if path is not None:
        try:
            rel = path.resolve().relative_to(project_dir.resolve())
            return f"duckdb:///{rel.as_posix()}", None
        except ValueError:
            return f"duckdb:///{path.resolve()}", None
    if redact(url) != url:
        return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:${TETHER_SOURCE_PASSWORD}@", url), (
            "TETHER_SOURCE_PASSWORD"
        )
    return url, None


def _q(s: str) -> str:
    if re.fullmatch(r"[A-Za-z_][\w.]*", s):
        return s
    if '"' in s and "'" not in s:  # a quoted column (t."bin.key") reads best in single quotes
        return f"'{s}'"
    return '"' + s.replace('"', '\\"') + '"'


def product_name(p: StarterProduct) -> str:
    """The product a table becomes: its name without schema, any other character than a
    letter, digit or _ made one."""
    return re.sub(r"\W", "_", p.table.rsplit(".", 1)[-1])


def render_starter(url: str, products: list[StarterProduct], schema: str | None = None,
                   user: str | None = None, references: Sequence[Reference] = ()) -> str:
    """The commented starter tether.yaml. With ``user``, it serves as written: one example
    role that sees every tool with no row filter, and that user in it."""
    source = f"url: {_q(url)}" + (f", schema: {_q(schema)}" if schema else "")
    lines = [
        "# tether.yaml written by `tether init`. Lines marked '# inferred: confirm' are guesses",
        "# from the data: check each, then delete the marker. Reference: docs/config.md",
        "",
        "sources:",
        f"  main: {{{source}}}",
        "",
        "products:",
    ]
    schemes: dict[tuple[str, str], str] = {}  # (pattern, column or "") -> scheme name
    for p in products:
        lines += [f"  {product_name(p)}:", f"    table: {_q(p.table)}"]
        if p.problem:
            lines.append(f"    # tether init could not read it ({p.problem[:120]}): nothing "
                         "inferred; `tether profile` names the column")
        if p.primary_key:
            pk = f"    primary_key: [{', '.join(_q(c) for c in p.primary_key)}]"
            lines.append(pk + (f"  {INFERRED} (unique and non-null in the data)"
                               if p.pk_inferred else ""))
        elif not p.problem:
            lines.append("    # primary_key: []  # no declared key and no unique, non-null column found")
        if p.time_columns:
            lines.append("    time_columns:")
            for col, (tz, guess) in p.time_columns.items():
                if is_format(tz):  # time held as a number or text, in this format
                    lines.append(f"      {_q(col)}: {_json_str(tz)}  {INFERRED} ("
                                 f"{says(col, tz).split(' holds ', 1)[1]}, every value)")
                    continue
                note = f"  {INFERRED} (no time zone stored; UTC assumed)" if guess else ""
                lines.append(f"      {_q(col)}: {tz}{note}")
        if p.metric_time:
            lines.append(f"    metric_time: {_q(p.metric_time)}  {INFERRED}")
        if p.time_via:
            lines.append(f"    metric_time_via: {_q(p.time_via[0])}  {INFERRED} "
                         f"({p.time_via[1]})")
        if p.label:
            lines.append(f"    label: {_q(p.label[0])}  {INFERRED} ({p.label[1]})")
        if p.personal:  # classified pii: a role's masks: {pii: redact} covers them
            lines.append("    columns:")
            lines += [f"      {_q(col)}: {{personal: {kind}}}  {INFERRED} (personal data: {why})"
                      for col, (kind, why) in p.personal.items()]
        if p.freshness and p.future:
            where = _json_str(f"{sql_name(p.freshness)} <= {{{{ clock }}}}")
            lines.append(f"    freshness: {{column: {_q(p.freshness)}, where: {where}}}  "
                         f"{INFERRED} (some rows lie after today: as_of is the newest past one)")
        elif p.freshness:
            why = ("" if p.freshness != p.metric_time else
                   " (no load-time column: as_of is the newest event)")
            lines.append(f"    freshness: {{column: {_q(p.freshness)}}}  {INFERRED}{why}")
        else:
            lines.append("    freshness: {load_time: true}  # no time column: as_of is the "
                         "source's last write")
        lines += _moves_lines(p)
        if p.identifiers:
            lines.append("    identifiers:")
            for col, pattern in p.identifiers.items():
                # a scheme names a parameter: letters, digits and _ (bin.key -> bin_key)
                scheme = _scheme(schemes, pattern, col)
                lines.append(f"      {_q(col)}: {_q(scheme)}  {INFERRED} (every value fits "
                             f"{pattern})")
        lines.append("")
    if schemes:
        lines.append("identifier_schemes:")
        for (pattern, _col), scheme in schemes.items():
            lines.append(f"  {_q(scheme)}: {{pattern: {_json_str(pattern)}}}  {INFERRED}")
        lines.append("")
    lines += _relationship_lines(references)
    lines += _metric_lines(products, references)
    if user:
        lines += example_policy(user, any(p.personal for p in products))
    lines += [
        "# glossary:, metrics:, calendars:, lineage: -- add what your business means;",
        "# see docs/config.md and the demo's tether.yaml (`tether demo init`) for a full example.",
        "",
    ]
    return "\n".join(lines)


def _relationship_lines(references: Sequence[Reference]) -> list[str]:
    """Each relationship found, its evidence in its comment; candidates as comments."""
    def entry(r: Reference) -> str:
        return (f"{{from: {_q(ref(product_name(r.child), r.column))}, "
                f"to: {_q(ref(product_name(r.parent), r.key))}, kind: many_to_one}}")

    written = [r for r in references if r.written]
    left = [r for r in references if not r.written]
    lines = ["relationships:"] if written else []
    lines += [f"  - {entry(r)}  # {r.evidence}" for r in written]
    if left:
        if not written:
            lines.append("# relationships:")
        lines.append("  # candidates tether init could not choose between (values alone, or "
                     "several tables): confirm one by removing its '# '")
        lines += [f"  # - {entry(r)}  # {r.evidence}" for r in left]
    return [*lines, ""] if lines else []


_QUANTITY_WORDS = frozenset({"quantity", "qty"})
_PER_UNIT = frozenset({"unit", "each", "per"})
_NUMBERS = ("integer", "decimal", "float")


def _one(p: StarterProduct, says: Callable[[list[str]], bool]) -> str | None:
    """The one numeric column of ``p`` (not its key, not an identifier) whose name's words
    ``says`` holds for; None where none or several do."""
    found = [c.name for c in p.columns if c.kind in _NUMBERS and not c.nested
             and c.name not in p.primary_key and c.name not in p.identifiers
             and says(name_words(c.name))]
    return found[0] if len(found) == 1 else None


def _metric_lines(products: Sequence[StarterProduct], references: Sequence[Reference]
                  ) -> list[str]:
    """Governed metrics the data's shape suggests, as comments the user confirms, never as
    fact: a line that holds a quantity and a unit price (one column each, named so), dated by
    its own event time or by the header it points to (a written relationship to a product with
    an event time): what was sold, quantity times unit price."""
    out: list[str] = []
    for p in products:
        qty = _one(p, lambda w: bool(set(w) & _QUANTITY_WORDS))
        price = _one(p, lambda w: "unitprice" in w or ("price" in w and bool(set(w) & _PER_UNIT)))
        if p.problem or qty is None or price is None:
            continue
        line = product_name(p)
        header = next((r for r in references if r.written and r.child is p
                       and r.parent.metric_time), None)
        if p.metric_time:
            time, dated = ref(line, p.metric_time), f"its {p.metric_time}"
        elif header is not None:
            head = product_name(header.parent)
            time = ref(head, header.parent.metric_time or "")
            dated = f"the {header.parent.metric_time} of the {head} its {header.column} points to"
        else:
            continue
        unit = unit_from_name(price) or "currency"
        measure = f"sum({_sql_ref(line, qty)} * {_sql_ref(line, price)})"
        out += [f"#   {line}_sold:  {INFERRED} (a quantity, {qty}, and a unit price, {price}, "
                f"on each {line} row, dated by {dated})",
                f"#     description: {_json_str(f'{qty} times {price}, summed over {line} rows.')}",
                f"#     measure: {_json_str(measure)}",
                f"#     time: {_q(time)}",
                "#     window: trailing",
                f"#     unit: {_q(unit)}"]
    if not out:
        return []
    return ["# metrics:  # proposed from the data's shape: confirm one by removing the '# ' "
            "of its lines (and of this one)", *out, ""]


def _sql_ref(product: str, column: str) -> str:
    """product.column as a metric's SQL names it (each part quoted unless plain lower case)."""
    return f"{sql_name(product)}.{sql_name(column)}"


def _moves_lines(p: StarterProduct) -> list[str]:
    """The moves observed along the table's history, and the action that would allow them, as
    comments: a write needs a writer DSN and a person's word (docs/write.md)."""
    if not p.moves or p.history is None:
        return []
    entity, order = p.history
    out = []
    for col, moves in p.moves.items():
        seen = ", ".join(f"{a} -> {b} ({n})" for a, b, n in moves[:12])
        out.append(f"    # {col} moved in the data (per {', '.join(entity)}, in {order} order): "
                   f"{seen}")
    out.append("    # a write action could allow these moves (docs/write.md; it needs "
               "sources.main.writer_url):")
    out.append("    # actions:")
    for col, moves in p.moves.items():
        allowed: dict[str, list[str]] = {}
        for a, b, _n in moves:
            allowed.setdefault(a, []).append(b)
        machine = ", ".join(f"{_q(a)}: [{', '.join(_q(b) for b in tos)}]"
                            for a, tos in sorted(allowed.items()))
        out += [f"    #   change_{col.lower().replace('.', '_')}:  {INFERRED} (moves observed)",
                f"    #     set: [{_q(col)}]",
                f"    #     transitions: {{{_q(col)}: {{{machine}}}}}",
                "    #     roles: [ROLE]"]
    return out


def example_policy(user: str, personal: bool = False) -> list[str]:
    """The example access policy of a starter: one role that sees every tool and every row,
    and the person who ran `tether init` in it; with ``personal``, the mask a role not named to
    see personal data takes, as a comment."""
    return [
        "policies:",
        "  roles:",
        "    # An example role: every tool, every row, no masks, and a reviewer (it decides",
        "    # reviews). Write your team's policy here when you are ready, before or after the",
        "    # first build: your first real policy publishes at once (you are its first admin);",
        "    # name a second reviewer in it, and from then on a change that widens access waits",
        "    # for a reviewer who did not make it (docs/policy.md). Narrow this role (tools,",
        "    # tables, row_filters, masks; docs/config.md) before anyone else uses the project.",
        "    everything:",
        "      description: Sees every tool and every row (the example role of `tether init`).",
        '      tools: ["*"]',
        "      reviewer: true",
        *([
            "    # Personal data was found (columns marked personal:, classified pii): a role",
            "    # not named to see it masks every such column, e.g.",
            "    # analyst:",
            '    #   tools: ["*"]',
            "    #   masks: {pii: redact}",
        ] if personal else []),
        "  users:",
        "    # The person who ran `tether init`; add one entry per person or program.",
        f"    {_q(user)}: {{role: everything}}",
        "",
    ]


def render_api_starter(spec_ref: str, base_url: str | None, spec: Spec, user: str) -> str:
    """The commented starter tether.yaml of an HTTP API: the source, one product per read
    operation (its summary beside it), each caller's own credential where the spec asks for
    one, and the example policy."""
    scheme = _first_scheme(spec)
    lines = [
        "# tether.yaml written by `tether init --openapi`: one product per read operation of",
        "# the API (the operations that change state are never served). Reference: docs/openapi.md",
        "",
        "sources:",
        "  api:",
        "    kind: openapi",
        f"    spec: {_json_str(spec_ref)}",
    ]
    if base_url:
        lines.append(f"    base_url: {_json_str(base_url)}")
    else:
        lines.append("    # base_url: the spec's first server; set it where the API really is")
    if scheme:
        lines += [
            f"    auth: {{scheme: {_q(scheme)}, credential: token_store, sample_as: {_q(user)}}}",
            "    # each caller reads with their own credential: `echo \"$TOKEN\" | tether token",
            f"    # credential {user} --source api`; then raise sample_calls to profile the",
            "    # responses (observed enums, formats, patterns) as that user",
        ]
    lines += ["    sample_calls: 0", "", "products:"]
    taken: set[str] = set()
    for table, op in sorted(spec.operations.items()):
        name = "_".join(openapi_words(table)) or table
        base, n = name, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        said = clean(op.summary, 90)  # the spec's words in a comment: one clean line
        lines.append(f"  {_q(name)}:  # {op.method.upper()} {op.path}"
                     + (f": {said}" if said else ""))
        lines.append(f"    table: {_q(table)}")
    lines.append("")
    lines += example_policy(user)
    return "\n".join(lines)


def _first_scheme(spec: Spec) -> str | None:
    """The security scheme requests carry: the first the operations ask for, else the spec's
    first."""
    for op in spec.operations.values():
        for name in op.security:
            if name in spec.schemes:
                return name
    return next(iter(spec.schemes), None)


def _scheme(schemes: dict[tuple[str, str], str], pattern: str, column: str) -> str:
    """The scheme of an identifier column: one per exact shape that holds a literal part
    (``^CRM-\\d{5}$`` in two tables is one scheme: they join), but a shape of character
    classes only (``^[A-Z]{16}$``, a UUID) or of any length (``^[a-z]+\\d+$``) is shared only
    by columns of one name, since unrelated ids fit it too. A scheme names a parameter:
    letters, digits and _ (``bin.key`` -> ``bin_key``), made unique."""
    loose = re.search(r"\]\+|\\d\+", pattern) is not None or not _literal_part(pattern)
    key = (pattern, column.lower() if loose else "")
    if key not in schemes:
        base = re.sub(r"[^A-Za-z0-9_]+", "_", column).strip("_") or "id"
        name, n = base, 2
        while name in schemes.values():
            name, n = f"{base}_{n}", n + 1
        schemes[key] = name
    return schemes[key]


def _literal_part(pattern: str) -> bool:
    """Whether a shape holds a letter or digit of its own (``CRM`` in ``^CRM-\\d{5}$``),
    beyond its character classes and repeats."""
    bare = re.sub(r"\[[^\]]*\]|\\[dwsDWS]|\{[\d,]*\}|[\^$+*?()|]", "", pattern)
    return re.search(r"[A-Za-z0-9]", bare) is not None


def _json_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
