"""`tether profile`: what tether learned about each data product."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.options import JsonOpt, ProjectOpt
from tether.cli.output import err, out, print_json, progress
from tether.config import load_project
from tether.context.profile import ColumnProfile, ProductProfile
from tether.errors import UnreadableProduct
from tether.profiling import profile_product


def profile(
    project: Path = ProjectOpt,
    product: list[str] = typer.Option(None, "--product", help="Only this product (repeatable)."),
    as_json: bool = JsonOpt,
) -> None:
    """Profile each data product in the engine: types, nulls, distincts, enums, formats, units,
    and the schema fingerprint."""
    proj = load_project(project)
    names = product or list(proj.config.products)
    for n in names:
        proj.product(n)  # unknown names fail before any work
    results: list[ProductProfile] = []
    skipped: list[UnreadableProduct] = []
    with progress(len(names), "profiling") as step:
        for n in names:
            try:
                results.append(profile_product(proj, n, progress=step))
            except UnreadableProduct as e:  # one product that cannot be read stops no other
                if len(names) == 1:
                    raise
                skipped.append(e)
            step.advance()  # type: ignore[attr-defined]
    for why in skipped:
        err.print(f"skipped: {why.paragraph()}", markup=False, highlight=False)
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
        _exit_if(skipped)
        return
    for r in results:
        render(r)
    findings = learned(results)
    if findings:
        out.print("\n[bold]What the data says that a thin tool definition would not[/]", markup=True)
        for line in findings:
            out.print(f"  - {line}", markup=False)
    _exit_if(skipped)


def _exit_if(skipped: list[UnreadableProduct]) -> None:
    """Exit 2 when a product was skipped: the others were profiled and shown."""
    if skipped:
        err.print(f"{len(skipped)} product(s) skipped; the others were profiled.",
                  highlight=False)
        raise typer.Exit(2)


def learned(results: list[ProductProfile]) -> list[str]:
    """The facts an agent would otherwise guess: dormant values, formats, units, staleness."""
    lines: list[str] = []
    for p in results:
        if p.as_of is not None:
            age = (p.profiled_at - p.as_of).total_seconds() / 3600
            if age >= 1:
                lines.append(f"{p.product}: newest data is {age:.1f} h older than the clock "
                             f"(as_of {p.as_of.isoformat()})")
        for c in p.columns:
            where = f"{p.product}.{c.column.name}"
            dormant = [str(e.value) for e in c.enum or [] if e.deprecated]
            if dormant:
                lines.append(f"{where}: {len(c.enum or [])} values, {', '.join(dormant)} not seen "
                             f"recently (deprecated)")
            if "datetime_midnight_utc" in c.formats:
                lines.append(f"{where}: always midnight UTC (a date, not a moment)")
            if c.unit_hint and c.unit_hint.endswith("cents"):
                lines.append(f"{where}: amounts in {c.unit_hint} ({c.unit_evidence})")
    return lines


def render(p: ProductProfile) -> None:
    out.print(
        f"\n[bold]{p.product}[/]  {p.row_count:,} rows  source {p.source}  "
        f"fingerprint [cyan]{p.fingerprint[:23]}…[/]", markup=True,
    )
    t = Table(show_edge=False, pad_edge=False, header_style="bold")
    for h in ("column", "type", "null", "distinct", "min", "max", "values", "formats / units"):
        t.add_column(h, overflow="fold")
    for c in p.columns:
        t.add_row(
            escape(c.column.name) + ("" if c.column.nullable else " [dim]not null[/]"),
            c.column.type.lower(),
            _pct(c.null_fraction),
            _distinct(c),
            _short(c.min),
            _short(c.max),
            _values(c),
            _notes(c),
        )
    out.print(t)


def _pct(x: float | None) -> str:
    return "" if x is None else ("0%" if x == 0 else f"{x:.1%}")


def _distinct(c: ColumnProfile) -> str:
    if c.distinct_count is None:
        return ""
    return f"{c.distinct_count:,}" + ("" if c.distinct_exact else " ≈")


def _short(v: Any, n: int = 22) -> str:
    """Data shown in a table: shortened, and escaped (a value may look like rich markup)."""
    s = "" if v is None else str(v)
    return escape(s if len(s) <= n else s[: n - 1] + "…")


def _values(c: ColumnProfile) -> str:
    if c.enum is not None:
        parts = [escape(str(e.value)) + (" [yellow](deprecated)[/]" if e.deprecated else "")
                 for e in c.enum]
        return "[green]enum[/] " + ", ".join(parts)
    if c.top_values:
        return "top " + ", ".join(f"{_short(v.value, 14)} ({v.count:,})" for v in c.top_values[:3])
    return ""


def _notes(c: ColumnProfile) -> str:
    notes = list(c.formats)
    if c.never_negative:
        notes.append("≥0")
    if c.unit_hint:
        notes.append(f"unit {c.unit_hint} ({c.unit_evidence})")
    return ", ".join(notes)
