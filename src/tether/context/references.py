"""References between the sections of tether.yaml, checked once it parses: a product names a
declared source, a metric its products, calendar and term, a user a role, a policy rule its
products. Each check is a rule in :data:`RULES` (as the profilers and detectors are): a function
of the config returning (location, message) problems; the loader turns them into one error
naming the file and line. Plain checks over the model, no I/O.
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from collections.abc import Callable
from typing import Any

from tether.context.config_model import PII_SELECTOR, MetricConfig, TetherConfig
from tether.context.sqlfunctions import disallowed_function
from tether.context.timeformat import is_format
from tether.context.timeformat import problem as format_problem

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]
Rule = Callable[[TetherConfig], list[Problem]]


def did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"Did you mean {close[0]!r}?" if close else ""



def sources_declared(c: TetherConfig) -> list[Problem]:
    return [] if c.sources else [(("sources",), "at least one source is required")]


def products_refer(c: TetherConfig) -> list[Problem]:
    """A product's source, metric time, time zones and identifier schemes are declared."""
    problems: list[Problem] = []
    for name, p in c.products.items():
        base: Loc = ("products", name)
        if p.source is not None and p.source not in c.sources:
            problems.append(
                ((*base, "source"), f"product {name!r} names unknown source {p.source!r}. "
                 + did_you_mean(p.source, c.sources))
            )
        if p.source is None and len(c.sources) > 1:
            problems.append((base, f"product {name!r} must say `source:` (there are several)"))
        if p.metric_time and p.metric_time not in p.time_columns:
            problems.append(
                ((*base, "metric_time"),
                 f"metric_time {p.metric_time!r} is not one of time_columns "
                 f"({', '.join(p.time_columns) or 'none declared'})")
            )
        for col, tz in p.time_columns.items():
            if is_format(tz):  # time held as a number or text: the format it is written in
                if (why := format_problem(tz, None)) is not None:
                    problems.append(((*base, "time_columns", col),
                                     f"time_columns {col!r} of product {name!r}: {why}"))
            elif not _valid_tz(tz):
                problems.append(
                    ((*base, "time_columns", col),
                     f"{tz!r} is not a time zone name (use e.g. UTC or Europe/Berlin) nor a "
                     "format (\"%Y\" for integer years, \"%Y-%m-%d\" for dates as text)")
                )
        for col, scheme in p.identifiers.items():
            if scheme not in c.identifier_schemes:
                problems.append(
                    ((*base, "identifiers", col),
                     f"identifier scheme {scheme!r} is not declared under identifier_schemes. "
                     + did_you_mean(scheme, c.identifier_schemes))
                )
    return problems


def metrics_refer(c: TetherConfig) -> list[Problem]:
    """A metric's columns, calendar and glossary term are declared; its window can be built."""
    problems: list[Problem] = []
    for name, m in c.metrics.items():
        problems += _metric_problems(c, name, m)
        if m.calendar and m.calendar not in c.calendars:
            problems.append(
                (("metrics", name, "calendar"), f"metric {name!r} uses unknown calendar "
                 f"{m.calendar!r}. " + did_you_mean(m.calendar, c.calendars))
            )
        if m.term and m.term not in c.glossary:
            problems.append(
                (("metrics", name, "term"), f"metric {name!r} names unknown glossary term "
                 f"{m.term!r}. " + did_you_mean(m.term, c.glossary))
            )
    for i, a in enumerate(c.ci.accept):
        if a.product and a.product not in c.products:
            problems.append((("ci", "accept", i, "product"), f"ci.accept names unknown product "
                             f"{a.product!r}. " + did_you_mean(a.product, c.products)))
        if a.role and a.role not in c.policies.roles:
            problems.append((("ci", "accept", i, "role"), f"ci.accept names unknown role "
                             f"{a.role!r}. " + did_you_mean(a.role, c.policies.roles)))
    if c.serve.calendar and c.serve.calendar not in c.calendars:
        problems.append((("serve", "calendar"), f"serve.calendar names unknown calendar "
                         f"{c.serve.calendar!r}. " + did_you_mean(c.serve.calendar, c.calendars)))
    return problems


def relationships_refer(c: TetherConfig) -> list[Problem]:
    problems: list[Problem] = []
    for i, rel in enumerate(c.relationships):
        for key, ref in (("from", rel.from_), ("to", rel.to)):
            table, dot, column = ref.partition(".")
            if not dot or not column:
                problems.append((("relationships", i, key),
                                 f"relationship {key} {ref!r} must be product.column"))
            elif table not in c.products:
                problems.append((("relationships", i, key),
                                 f"relationship {key} {ref!r} names unknown product {table!r}. "
                                 + did_you_mean(table, c.products)))
    return problems


def measures_aggregate(c: TetherConfig) -> list[Problem]:
    return [(("glossary", term, "measure"), msg) for term, g in c.glossary.items()
            if g.measure is not None for msg in _aggregate_problems(term, g.measure)]


def users_have_roles(c: TetherConfig) -> list[Problem]:
    roles = c.policies.roles
    return [(("policies", "users", uname, "role"),
             f"user {uname!r} has unknown role {u.role!r}. " + did_you_mean(u.role, roles))
            for uname, u in c.policies.users.items() if u.role not in roles]


def roles_refer(c: TetherConfig) -> list[Problem]:
    """A role's row filters, masks and table rules name declared products (their templates are
    read by policy/templates.py, checked with the policy against the source)."""
    problems: list[Problem] = []
    for rname, r in c.policies.roles.items():
        for product in r.row_filters:
            loc: Loc = ("policies", "roles", rname, "row_filters", product)
            if product not in c.products:
                problems.append(
                    (loc, f"row filter for unknown product {product!r}. "
                     + did_you_mean(product, c.products))
                )
        for target in r.masks:
            mloc: Loc = ("policies", "roles", rname, "masks", target)
            table, dot, column = target.partition(".")
            if target == PII_SELECTOR:
                continue
            if not dot or not column:
                problems.append((mloc, f"mask target {target!r} must be product.column (or "
                                 f"the selector {PII_SELECTOR!r})"))
            elif table not in c.products:
                problems.append((mloc, f"mask target {target!r} names unknown product "
                                 f"{table!r}. " + did_you_mean(table, c.products)))
        for key in ("allow", "deny"):
            for i, pattern in enumerate(getattr(r.tables, key)):
                if not _is_glob(pattern) and pattern not in c.products:
                    problems.append(
                        (("policies", "roles", rname, "tables", key, i),
                         f"tables.{key} names unknown product {pattern!r}. "
                         + did_you_mean(pattern, c.products)))
    return problems


def restricted_refer(c: TetherConfig) -> list[Problem]:
    problems: list[Problem] = []
    for i, entry in enumerate(c.policies.restricted):
        table, dot, column = entry.partition(".")
        if not dot or not column:
            problems.append((("policies", "restricted", i),
                             f"restricted entry {entry!r} must be product.column (globs allowed)"))
        elif not _is_glob(table) and table not in c.products:
            problems.append((("policies", "restricted", i),
                             f"restricted entry {entry!r} names unknown product {table!r}. "
                             + did_you_mean(table, c.products)))
    return problems


def actions_refer(c: TetherConfig) -> list[Problem]:
    """A write action (docs/write.md) changes a keyed table of a SQL source that names a writer,
    moves only the columns it sets, names declared roles and an inverse that can move every row
    back, and requires predicates that parse as one condition over the product's own row."""
    problems: list[Problem] = []
    names: dict[str, str] = {}
    for pname, p in c.products.items():
        for aname, a in p.actions.items():
            loc: Loc = ("products", pname, "actions", aname)
            problems += [(loc, msg) for msg in _action_problems(c, pname, aname)]
            if aname in names:
                problems.append((loc, f"action {aname!r} is declared for {names[aname]!r} too: "
                                 "an action's name is its tool's, one per project"))
            names.setdefault(aname, pname)
            problems += [((*loc, "require", i), f"require {text!r} of action {aname!r}: {why}")
                         for i, text in enumerate(a.require)
                         if (why := predicate_problem(text, pname)) is not None]
    return problems


def _action_problems(c: TetherConfig, pname: str, aname: str) -> list[str]:
    p = c.products[pname]
    a = p.actions[aname]
    out: list[str] = []
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", aname):
        out.append(f"action name {aname!r} must be a tool name: lower case letters, digits and "
                   "underscores, starting with a letter")
    source = c.sources.get(p.source or next(iter(c.sources), ""))
    if p.table is None:
        out.append(f"action {aname!r}: product {pname!r} is defined by SQL; an action changes a "
                   "table (`table:`)")
    if not p.primary_key:
        out.append(f"action {aname!r}: product {pname!r} has no primary_key, so a call could "
                   "not say which rows it changes")
    if source is not None and (source.kind != "sql" or not source.writer_url):
        out.append(f"action {aname!r}: its source has no writer_url (a DSN and role of its own "
                   "for writes); the serving url stays read-only")
    elif source is not None and source.writer_url and "://" in source.writer_url:
        scheme = source.writer_url.split("://", 1)[0].split("+", 1)[0].lower()
        if scheme not in ("duckdb", "postgres", "postgresql"):
            out.append(f"action {aname!r}: its source's writer_url speaks {scheme!r}; writes are "
                       "applied on a DuckDB file or PostgreSQL only")
    for col in sorted(set(a.set_) & set(p.primary_key)):
        out.append(f"action {aname!r} may not set {col!r}: it is part of the primary key")
    for col in a.transitions:
        if col not in a.set_:
            out.append(f"action {aname!r} has transitions for {col!r}, which it does not set")
    for role in a.roles:
        if role not in c.policies.roles:
            out.append(f"action {aname!r} names unknown role {role!r}. "
                       + did_you_mean(role, c.policies.roles))
    if a.inverse is not None:
        back = p.actions.get(a.inverse)
        if back is None:
            out.append(f"action {aname!r} names inverse {a.inverse!r}, which is no action of "
                       f"{pname!r}. " + did_you_mean(a.inverse, p.actions))
        else:
            out += [f"inverse {a.inverse!r} does not set {col!r}, which {aname!r} changes"
                    for col in a.set_ if col not in back.set_]
            for col, moves in a.transitions.items():
                allowed = back.transitions.get(col)
                missing = [f"{to} -> {frm}" for frm, tos in moves.items() for to in tos
                           if allowed is not None and frm not in allowed.get(to, [])]
                if missing:
                    out.append(f"inverse {a.inverse!r} cannot undo {aname!r}: it does not allow "
                               f"{', '.join(missing)}")
    return out


def predicate_problem(text: str, product: str) -> str | None:
    """Why ``text`` is not one condition over a row of ``product`` (None when it is): it must
    parse, compare or test rather than select, read no other table and aggregate nothing."""
    import sqlglot
    from sqlglot import exp

    try:
        parsed = [t for t in sqlglot.parse(text) if t is not None]
    except sqlglot.errors.SqlglotError as e:
        return f"does not parse ({str(e).splitlines()[0][:120]})"
    if len(parsed) != 1:
        return "must be one condition, not several statements"
    tree = parsed[0]
    if isinstance(tree, exp.Query | exp.Command | exp.Block | exp.Set | exp.Transaction) or (
            tree.find(exp.Query, exp.Table)):
        return "must be a condition on the row, not a query"
    fn = disallowed_function(tree, None)  # it runs with the writer's privileges: plain ones
    if fn is not None:
        return f"calls {fn}, which is not on the allow-list of functions (docs/serve.md)"
    if tree.find(exp.AggFunc):
        return "must be a condition on one row; it aggregates"
    others = sorted({col.table for col in tree.find_all(exp.Column)
                     if col.table and col.table != product})
    if others:
        return f"names {', '.join(others)}; it may only read the product's own columns"
    return None


RULES: tuple[Rule, ...] = (sources_declared, products_refer, metrics_refer, relationships_refer,
                           measures_aggregate, users_have_roles, roles_refer, restricted_refer,
                           actions_refer)


def problems(c: TetherConfig, rules: tuple[Rule, ...] = RULES) -> list[Problem]:
    """Every rule's problems, in rule order."""
    return [found for rule in rules for found in rule(c)]


def _metric_problems(c: TetherConfig, name: str, m: MetricConfig) -> list[Problem]:
    """Columns a metric names must be product.column; windows need what they are built on."""
    out: list[Problem] = []
    refs: list[tuple[str, int | None, str]] = [
        ("dimensions", i, d) for i, d in enumerate(m.dimensions)]
    refs += [(k, None, v) for k, v in (("time", m.time), ("time_end", m.time_end)) if v]
    for key, index, ref in refs:
        loc: Loc = ("metrics", name, key) if index is None else ("metrics", name, key, index)
        table, dot, column = ref.partition(".")
        if not dot or not column or "." in column:
            out.append((loc, f"metric {name!r}: {ref!r} must be product.column"))
        elif table not in c.products:
            out.append((loc, f"metric {name!r}: {ref!r} names unknown product {table!r}. "
                        + did_you_mean(table, c.products)))
    out += _metric_sql_problems(c, name, m)
    window = m.window or ("period" if m.calendar else "trailing")
    if window == "period" and not m.calendar:
        out.append((("metrics", name, "window"), f"metric {name!r}: window: period needs "
                    "`calendar:` (e.g. fiscal)"))
    if window in ("period", "trailing") and not m.time:
        out.append((("metrics", name), f"metric {name!r}: a {window} window needs `time:` "
                    "(product.column), or set window: current"))
    return out


def _metric_sql_problems(c: TetherConfig, name: str, m: MetricConfig) -> list[Problem]:
    """Every table a metric's SQL qualifies a column with is a product: a metric reads products
    only (an alias of a subquery's table is not one, and generation would have nothing to
    build its FROM, freshness or policy from)."""
    import sqlglot
    from sqlglot import exp

    out: list[Problem] = []
    parts: list[tuple[Loc, str | None]] = [
        (("metrics", name, "measure"), m.measure), (("metrics", name, "predicate"), m.predicate)]
    parts += [(("metrics", name, "outputs", o), v.sql) for o, v in m.outputs.items()]
    for loc, sql in parts:
        if not sql:
            continue
        try:
            tree = sqlglot.parse_one(sql)
        except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
            continue  # a measure that does not parse is reported where it is built
        unknown = sorted({col.table for col in tree.find_all(exp.Column)
                          if col.table and col.table not in c.products})
        if unknown:
            out.append((loc, f"metric {name!r}: {loc[-1]} names {', '.join(unknown)}, which "
                        f"{'is no product' if len(unknown) == 1 else 'are no products'}. "
                        "Qualify its columns as product.column of declared products. "
                        + did_you_mean(unknown[0], c.products)))
    return out


def _aggregate_problems(term: str, sql: str) -> list[str]:
    """A measure must parse and aggregate (sum, count, avg, ...)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql)
    except sqlglot.errors.SqlglotError as e:
        return [f"the measure of {term!r} does not parse: {str(e).splitlines()[0]}"]
    if tree.find(exp.AggFunc) is None:
        return [f"the measure of {term!r} is not an aggregate (sum, count, avg, ...): {sql!r}"]
    return []


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _valid_tz(name: str) -> bool:
    if name.upper() == "UTC":
        return True
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
