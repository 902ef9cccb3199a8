"""Unit hints: tether.yaml first, then the glossary, then the column's name and the values.

A unit is stated only from evidence; a numeric column none of these speaks for has no unit hint,
and the tool says so ("no known unit") instead of guessing."""

from __future__ import annotations

import re

from tether.config import Project
from tether.context.profile import ColumnProfile
from tether.profiling.formats import unit_from_name


def unit_hints(project: Project, product: str, profiles: list[ColumnProfile]) -> None:
    """Fill ``unit_hint`` and ``unit_evidence`` on each column profile in place."""
    p = project.config.products[product]
    currency = _single_currency(profiles)
    glossary = _units_from_metrics(project, product)
    for prof in profiles:
        name = prof.column.name
        facts = p.columns.get(name)
        if facts and facts.unit:
            prof.unit_hint, prof.unit_evidence = facts.unit, "config"
        elif facts and facts.unit_column:  # per row: the template, e.g. {currency}_cents
            prof.unit_hint = facts.unit_format.replace("{value}", "{" + facts.unit_column + "}")
            prof.unit_evidence = f"config; each row's {facts.unit_column}"
        elif name in glossary and prof.column.kind in ("integer", "decimal", "float"):
            prof.unit_hint, prof.unit_evidence = glossary[name], "glossary"
        elif prof.column.kind in ("integer", "decimal", "float"):
            unit = unit_from_name(name)
            if unit is None:
                continue
            evidence = "name"
            if currency and unit in ("cents", "currency"):
                code, column = currency
                unit = f"{code}_cents" if unit == "cents" else code
                evidence = f"name; every row's {column} is {code}"
            prof.unit_hint, prof.unit_evidence = unit, evidence


def _single_currency(profiles: list[ColumnProfile]) -> tuple[str, str] | None:
    """(code, column) when a currency-code column holds exactly one value."""
    for prof in profiles:
        if ("currency_code" in prof.formats and prof.min is not None
                and prof.min == prof.max):  # one code in every row
            return str(prof.min), prof.column.name
    return None


def _units_from_metrics(project: Project, product: str) -> dict[str, str]:
    """Columns a governed metric measures, with the unit the metric declares."""
    out: dict[str, str] = {}
    for m in project.config.metrics.values():
        if not m.unit:
            continue
        for table, column in re.findall(r"([A-Za-z_][\w]*)\.([A-Za-z_][\w]*)", m.measure):
            if table == product:
                out[column] = m.unit
    return out
