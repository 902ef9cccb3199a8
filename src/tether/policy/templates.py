"""The one grammar of policy templates: row filters (``{{ user.ATTRIBUTE }}``) and freshness
conditions (``{{ clock }}``), parsed into an expression whose templates are placeholders.

Every reader of a row filter or a freshness condition (the policy path, the oracle, the checks
against the source, the labeller, ``run_sql``'s catalog, the narrowing classifier) asks
:func:`parse` here; nothing else reads ``{{ ... }}``. A template becomes a bound parameter
(``:u_ATTRIBUTE``, ``:clock``), never text; :meth:`Template.bind` gives the values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import sqlglot
from sqlglot import exp

from tether.errors import ConfigError

_ANY = re.compile(r"\{\{(.*?)\}\}", re.S)
_USER = re.compile(r"\s*user\.([A-Za-z_][A-Za-z0-9_]*)\s*")
_CLOCK = re.compile(r"\s*clock\s*")
USER_PREFIX = "u_"
"""A user attribute's placeholder is ``u_<attribute>``."""
CLOCK = "clock"
"""The project clock's placeholder."""

Kind = Literal["row_filter", "freshness"]
_WHAT = {"row_filter": "row filter", "freshness": "freshness condition"}
_ALLOWED = {"row_filter": "`{{ user.ATTRIBUTE }}`", "freshness": "`{{ clock }}`"}


class TemplateError(ConfigError):
    """A template that is not the grammar's, or SQL that does not parse."""


@dataclass(frozen=True)
class Template:
    """A parsed row filter or freshness condition: :attr:`expr` with placeholders for its
    templates (copy it before changing it), the user attributes it names, and whether it
    reads the clock."""

    text: str
    expr: exp.Expr
    attributes: tuple[str, ...]
    clock: bool

    def tree(self) -> exp.Expr:
        """A copy of the expression, free to change."""
        return self.expr.copy()

    def missing(self, attrs: Mapping[str, Any]) -> list[str]:
        """The attributes it names that ``attrs`` lacks."""
        return [a for a in self.attributes if a not in attrs]

    def bind(self, attrs: Mapping[str, Any] | None = None, now: Any = None) -> dict[str, Any]:
        """The bound values: ``u_<attribute>`` from ``attrs``, ``clock`` from ``now``."""
        out: dict[str, Any] = {f"{USER_PREFIX}{a}": (attrs or {})[a] for a in self.attributes
                               if a in (attrs or {})}
        if self.clock:
            out[CLOCK] = now
        return out

    def with_nulls(self) -> exp.Expr:
        """The expression with every template as NULL (to compile it without a user)."""
        return self.tree().transform(
            lambda n: exp.null() if isinstance(n, exp.Placeholder) and _ours(n) else n)

    def renamed(self, prefix: str) -> exp.Expr:
        """The expression with each user placeholder ``u_x`` renamed ``<prefix>x`` (a reader
        binding its own parameters beside others)."""
        def swap(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Placeholder) and str(n.name).startswith(USER_PREFIX):
                return exp.Placeholder(this=prefix + str(n.name)[len(USER_PREFIX):])
            return n
        return self.tree().transform(swap)

    def conjuncts(self) -> list[exp.Expr]:
        """The top-level AND-ed parts (one part when it is no conjunction)."""
        e = self.expr.unnest() if isinstance(self.expr, exp.Paren) else self.expr
        return list(e.flatten()) if isinstance(e, exp.And) else [e]


def _ours(n: exp.Placeholder) -> bool:
    name = str(n.name)
    return name == CLOCK or name.startswith(USER_PREFIX)


def placeholders(text: str, kind: Kind = "row_filter", where: str | None = None) -> str:
    """The text with each template as its placeholder (``:u_x``, ``:clock``); a template that
    is not the grammar's is a :class:`TemplateError`."""
    def swap(m: re.Match[str]) -> str:
        inner = m.group(1)
        user = _USER.fullmatch(inner)
        if user and kind == "row_filter":
            return f":{USER_PREFIX}{user.group(1)}"
        if _CLOCK.fullmatch(inner) and kind == "freshness":
            return f":{CLOCK}"
        raise TemplateError(
            f"the {_WHAT[kind]} uses the template {{{{{inner}}}}}; a {_WHAT[kind]} may use only "
            f"{_ALLOWED[kind]}.", where=where,
            hint="Templates become bound parameters; write the value's attribute by name.")
    return _ANY.sub(swap, text)


def parse(text: str, dialect: str = "duckdb", kind: Kind = "row_filter",
          where: str | None = None) -> Template:
    """The template's expression in ``dialect``. Errors name ``where`` (file and line)."""
    return _parse(text, dialect, kind, where)


@functools.lru_cache(maxsize=4096)
def _parse(text: str, dialect: str, kind: Kind, where: str | None) -> Template:
    marked = placeholders(text, kind, where)
    try:
        expr = sqlglot.parse_one(marked, read=dialect)
    except sqlglot.errors.SqlglotError as e:
        raise TemplateError(f"the {_WHAT[kind]} does not parse: {str(e).splitlines()[0]}",
                            where=where, hint="Write one SQL condition in the source's "
                            "dialect; tether build checks it against the source.") from None
    if expr is None:
        raise TemplateError(f"the {_WHAT[kind]} is empty.", where=where,
                            hint="Write one SQL condition, or remove the key.")
    names = [str(p.name) for p in expr.find_all(exp.Placeholder)]
    attrs = tuple(dict.fromkeys(n[len(USER_PREFIX):] for n in names
                                if n.startswith(USER_PREFIX)))
    return Template(text, expr, attrs, CLOCK in names)


def attributes(text: str) -> list[str]:
    """The user attributes a row filter names, without parsing its SQL (an unparsable filter
    still names what it needs)."""
    return list(dict.fromkeys(m.group(1) for inner in _ANY.findall(text)
                              if (m := _USER.fullmatch(inner))))


def check(text: str, kind: Kind = "row_filter") -> str | None:
    """What is wrong with the templates of ``text`` (None when each is the grammar's)."""
    try:
        placeholders(text, kind)
    except TemplateError as e:
        return e.message
    return None


def freshness_condition(where: str | None, dialect: str) -> exp.Expr | None:
    """A product's ``freshness.where`` as an expression (``{{ clock }}`` the placeholder
    ``:clock``), or None without one."""
    return None if where is None else parse(where, dialect, "freshness").tree()


def in_words(text: str) -> str:
    """A row filter as a person reads it: ``{{ user.region }}`` is "your region"."""
    def say(m: re.Match[str]) -> str:
        inner = m.group(1)
        user = _USER.fullmatch(inner)
        if user:
            return f"your {user.group(1)}"
        return "now" if _CLOCK.fullmatch(inner) else m.group(0)
    return " ".join(_ANY.sub(say, text).split())
