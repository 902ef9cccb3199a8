"""The access policy (and the freshness conditions) checked against the source, so that a typo
fails closed.

tether.yaml loads only if the policy names declared products (config.py); here each rule checks
what the file cannot know alone, against the columns the source really has: a mask or a
restricted entry that names no column would silently serve the real column, and a row filter
naming a column that does not exist would fail on the first call. Each rule is a small function
in :data:`RULES` (the same shape as the profilers and detectors); a problem is a ConfigError
naming the file, the line and the key. `tether build`, `tether check` and `tether serve` run it.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import PII_SELECTOR, Project
from tether.context.profile import ProductProfile
from tether.context.references import did_you_mean
from tether.errors import ConfigError, TetherError
from tether.policy import templates
from tether.policy.entitle import HASH_DIALECTS
from tether.profiling.statements import fill, piece, relation_slot
from tether.sources import Source, open_product_source

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    loc: Loc
    message: str
    product: str | None = None
    """The product it leaves unguarded: a server closes it (for ``role``, else for everyone)
    instead of refusing to start (serve/health.py)."""
    role: str | None = None


@dataclass(frozen=True)
class Facts:
    """What the rules read: each product's column names (nested fields as ``a.b``), and a way
    to reach the source a product lives on."""

    project: Project
    columns: Mapping[str, Sequence[str]]
    source: Callable[[str], Source]


Rule = Callable[[Facts], list[Problem]]


def _close(word: str, choices: Sequence[str]) -> str:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean {found[0]!r}?" if found else ""


def masks_name_columns(facts: Facts) -> list[Problem]:
    out = []
    for rname, role in facts.project.config.policies.roles.items():
        for target in role.masks:
            if target == PII_SELECTOR:
                continue
            product, _, column = target.partition(".")
            have = facts.columns.get(product)
            if have is not None and column not in have:
                out.append(Problem(("policies", "roles", rname, "masks", target),
                                   f"mask {target!r} names no column of {product}; the real "
                                   "column would be served unmasked." + _close(column, have),
                                   product, rname))
    return out


def restricted_name_columns(facts: Facts) -> list[Problem]:
    """A restricted entry naming one product and one column (no glob) must match a column."""
    out = []
    for i, entry in enumerate(facts.project.config.policies.restricted):
        product, _, column = entry.partition(".")
        if any(ch in entry for ch in "*?["):
            continue
        have = facts.columns.get(product)
        if have is not None and not any(fnmatchcase(c, column) or c.split(".")[0] == column
                                        for c in have):
            out.append(Problem(("policies", "restricted", i),
                               f"restricted entry {entry!r} names no column of {product}; the "
                               "column it means would be served." + _close(column, have),
                               product))
    return out


def templates_are_the_grammar(facts: Facts) -> list[Problem]:
    """A row filter's templates are ``{{ user.ATTRIBUTE }}``, a freshness condition's
    ``{{ clock }}`` (policy/templates.py, the one grammar)."""
    config = facts.project.config
    out = []
    for rname, role in config.policies.roles.items():
        for product, text in role.row_filters.items():
            problem = templates.check(text)
            if problem:
                out.append(Problem(("policies", "roles", rname, "row_filters", product),
                                   problem, product, rname))
    for product, p in config.products.items():
        if p.freshness is not None and p.freshness.where is not None:
            problem = templates.check(p.freshness.where, "freshness")
            if problem:
                out.append(Problem(("products", product, "freshness", "where"), problem,
                                   product))
    return out


def attributes_held(facts: Facts) -> list[Problem]:
    """Each ``{{ user.X }}`` a role's row filter names is an attribute every user of that role
    has: one who lacks it would be refused every call (found only then), so the policy is not
    published. The problem names the user, the attribute and the nearest one they have."""
    config = facts.project.config
    out = []
    for rname, role in config.policies.roles.items():
        users = {u: user.attributes() for u, user in sorted(config.policies.users.items())
                 if user.role == rname}
        for product, text in role.row_filters.items():
            if templates.check(text):
                continue  # not the grammar's: its own problem, above
            for u, held in users.items():
                for name in templates.attributes(text):
                    if name in held:
                        continue
                    out.append(Problem(
                        ("policies", "roles", rname, "row_filters", product),
                        f"role {rname}'s row filter on {product} names {{{{ user.{name} }}}}, "
                        f"but user {u} (policies.users.{u}) has no attribute {name!r}"
                        + (f" ({_nearest(name, held)})" if held else " (they have none)"),
                        product, rname))
    return out


def _nearest(name: str, held: Mapping[str, Any]) -> str:
    """The attribute a user has that ``name`` most likely meant: the same letters in another
    case or spelling (staff_id for StaffId) first, else the closest, else the list."""
    def folded(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())
    same = [h for h in held if folded(h) == folded(name)]
    if same:
        return f"did you mean {same[0]!r}?"
    close = did_you_mean(name, held)  # (the references' "Did you mean 'X'?")
    return (close[0].lower() + close[1:] if close
            else "they have " + ", ".join(repr(h) for h in sorted(held)))


def row_filters_compile(facts: Facts) -> list[Problem]:
    """Each row filter, compiled by the product's own engine (values as NULL, no rows read):
    all of a source's at once, and one by one only when that fails, to name which."""
    config = facts.project.config
    filters: dict[str, list[tuple[Loc, str, str]]] = {}
    for rname, role in config.policies.roles.items():
        for product, template in role.row_filters.items():
            if product not in facts.columns or templates.check(template):
                continue  # a template not the grammar's is its own problem, above
            loc: Loc = ("policies", "roles", rname, "row_filters", product)
            filters.setdefault(facts.project.source_name(product), []).append(
                (loc, product, template))
    out = []
    for group in filters.values():
        if _compile_all(facts, [(product, template) for _loc, product, template in group]):
            continue
        for loc, product, template in group:
            problem = _compile(facts, product, _row_filter(template))
            if problem:
                out.append(Problem(loc, f"the row filter on {product} does not compile on its "
                                   f"source: {problem}"
                                   + _case_hint(template, facts.columns.get(product, [])),
                                   product, str(loc[2])))
    return out


def _case_hint(template: str, columns: Sequence[str]) -> str:
    """For an unquoted name that differs from a column only in case (PostgreSQL folds unquoted
    names to lower case): the name to write instead."""
    try:
        parsed = templates.parse(template)
    except TetherError:
        return ""
    have = set(columns)
    said = []
    for col in parsed.expr.find_all(exp.Column):
        ident = col.this
        if not isinstance(ident, exp.Identifier) or ident.quoted or ident.name.lower() in have:
            continue  # quoted, or the folded name is a column: not this mistake
        same = [c for c in columns if c.lower() == ident.name.lower()]
        if same:
            said.append(f'write "{same[0]}" in double quotes (unquoted, {ident.name} is read '
                        f"as {ident.name.lower()})")
    return ("; " + "; ".join(dict.fromkeys(said))) if said else ""


def _row_filter(template: str) -> Callable[[str], exp.Expr]:
    """A row filter as a condition to compile, its user values as NULL."""
    def build(dialect: str) -> exp.Expr:
        return templates.parse(template, dialect).with_nulls()
    return build


def _probe(facts: Facts, src: Source, product: str, condition: exp.Expr) -> exp.Select:
    return exp.select("1").from_(base_relation(src, facts.project, product)).where(
        condition).limit(0)


def _compile_all(facts: Facts, filters: list[tuple[str, str]]) -> bool:
    """Whether every (product, row filter) compiles, in one statement for products of one
    source (each a branch reading no rows)."""
    if len(filters) < 2:
        return False  # one: compiled alone, with its reason
    try:
        src = facts.source(filters[0][0])

        def branch(product: str, template: str) -> str:
            # rendered once per condition (a role's filter repeats on many tables), then filled
            # with each product's relation; joined as text, since a UNION thousands deep is
            # too deep for the generator
            cond = _row_filter(template)
            text = piece(src, ("row filter", template), lambda: exp.select("1").from_(
                exp.select("1").from_(relation_slot()).where(cond(src.dialect)).limit(0)
                .subquery("q")))
            return fill(src, text, {"rel": src.render(base_relation(src, facts.project,
                                                                       product))})

        src.run(" UNION ALL ".join(branch(product, template) for product, template in filters))
    except (sqlglot.errors.SqlglotError, TetherError, KeyError):
        return False  # compiled one by one, each with its reason
    return True


def base_relation(src: Source, project: Project, product: str) -> exp.Expr:
    """The product as its source has it (its table, or its SQL), aliased by its name."""
    p = project.config.products[product]
    base: exp.Expr = (src.table_expr(p.table) if p.table else src.sql_expr(p.sql or "", product))
    base.set("alias", exp.TableAlias(this=exp.to_identifier(product, quoted=True)))
    return base


def _compile(facts: Facts, product: str, condition: Callable[[str], exp.Expr],
             params: dict[str, Any] | None = None) -> str | None:
    """Why ``condition`` (built for the source's dialect) does not compile in a WHERE on the
    product, on its own engine with no rows read; None when it does."""
    try:
        src = facts.source(product)
        src.run(src.render(_probe(facts, src, product, condition(src.dialect))), params)
    except sqlglot.errors.SqlglotError as e:
        return f"it does not parse ({str(e).splitlines()[0]})"
    except TetherError as e:
        return getattr(e, "reason", None) or e.message
    return None


def hash_masks_supported(facts: Facts) -> list[Problem]:
    out = []
    for rname, role in facts.project.config.policies.roles.items():
        for target, mask in role.masks.items():
            product = target.partition(".")[0]
            if mask != "hash" or product not in facts.columns:
                continue
            dialect = facts.source(product).dialect
            if dialect not in HASH_DIALECTS:
                out.append(Problem(("policies", "roles", rname, "masks", target),
                                   f"the hash mask is not available on {dialect} sources; use "
                                   "redact or null", product, rname))
    return out


def freshness_conditions_compile(facts: Facts) -> list[Problem]:
    """A freshness ``where`` runs on every result's as_of: compiled by the product's engine
    now (the clock bound, no rows read), not on the first call."""
    out = []
    config = facts.project.config
    for product, p in config.products.items():
        if product not in facts.columns or p.freshness is None or p.freshness.where is None:
            continue
        parsed = functools.partial(templates.parse, p.freshness.where, kind="freshness")
        problem = _compile(facts, product, lambda d, t=parsed: t(d).tree(),  # type: ignore[misc]
                           {"clock": facts.project.now()})
        if problem is None:
            continue
        out.append(Problem(("products", product, "freshness", "where"),
                           f"the freshness condition of {product} does not compile on its "
                           f"source: {problem}", product))
    return out


RULES: tuple[Rule, ...] = (masks_name_columns, restricted_name_columns, templates_are_the_grammar,
                           attributes_held, row_filters_compile,
                           hash_masks_supported, freshness_conditions_compile)


def policy_problems(project: Project, columns: Mapping[str, Sequence[str]],
                    source: Callable[[str], Source], rules: Sequence[Rule] = RULES
                    ) -> list[Problem]:
    """Every problem the rules find, for the products ``columns`` names (a server closes what
    each leaves unguarded; the publishers refuse them all)."""
    facts = Facts(project, columns, source)
    return [p for rule in rules for p in rule(facts)]


def check_policy(project: Project, columns: Mapping[str, Sequence[str]],
                 source: Callable[[str], Source], rules: Sequence[Rule] = RULES) -> None:
    """Raise one ConfigError naming the file, line and key of each problem (up to five)."""
    _refuse(project, policy_problems(project, columns, source, rules))


def _refuse(project: Project, problems: list[Problem]) -> None:
    """One ConfigError naming the file, line and key of each problem (up to five), if any."""
    if not problems:
        return
    first, rest = problems[0], problems[1:5]
    text = " ".join([first.message] + [f"{project.where(*p.loc)}: {p.message}" for p in rest])
    raise ConfigError(text, where=project.where(*first.loc),
                      hint="Fix the key named in tether.yaml; nothing was published.")


@contextlib.contextmanager
def sources_of(project: Project) -> Iterator[Callable[[str], Source]]:
    """product -> its source, each source opened once and closed at the end."""
    opened: dict[str, Source] = {}

    def source(product: str) -> Source:
        name = project.source_name(product)
        if name not in opened:
            opened[name] = open_product_source(project, product)
        return opened[name]

    try:
        yield source
    finally:
        for s in opened.values():
            s.close()


def check_profiled(project: Project, profiles: Mapping[str, ProductProfile],
                   closing: Collection[str] = ()) -> list[Problem]:
    """:func:`check_policy` with the columns the profiles found (sources opened as needed).
    The problems of the products in ``closing`` (those whose rules read a table that cannot be
    read now: a server closes them) are returned instead of refused."""
    columns = {n: sorted({c.column.name for c in p.columns}
                         | {c.column.name.split(".")[0] for c in p.columns})
               for n, p in profiles.items()}
    with sources_of(project) as source:
        found = policy_problems(project, columns, source)
    _refuse(project, [p for p in found if p.product not in closing])
    return [p for p in found if p.product in closing]


def check_against_sources(project: Project) -> None:
    """:func:`check_policy` with the columns each product's source describes now (no profile
    needed): what `tether ci` runs before its items, so that a policy edited since the last
    publication is caught before a server meets it. A product whose source cannot describe it
    is left to the commands that read it."""
    columns: dict[str, list[str]] = {}
    with sources_of(project) as source:
        for name in project.config.products:
            try:
                found = source(name).describe(base_relation(source(name), project, name),
                                              label=name)
            except TetherError:
                continue
            columns[name] = sorted({c.name for col in found for c in [col, *col.leaves()]})
        check_policy(project, columns, source)
