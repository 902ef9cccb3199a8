"""dbt semantic models and metrics (MetricFlow YAML) as tether metrics and glossary terms.

A simple metric over a measure becomes a metric whose measure is the aggregate over the
product's column (``sum(parcels.weight_grams)``) and whose predicate is the metric's filter with
each ``{{ Dimension('entity__name') }}``, ``{{ TimeDimension(...) }}`` and ``{{ Entity(...) }}``
replaced by the product's column; the metric's label names a glossary term holding the same
definition. A semantic model's time dimensions are the product's time columns (read as UTC
unless tether.yaml says otherwise) and its default aggregation time is the metric's time.
Metrics of other types (ratio, derived, cumulative, conversion) are reported, not imported.

Every expression read (a measure's, dimension's or entity's ``expr``, a filter) is checked by
resolution (imports/sqlcheck.py) before it is used: one that reads anything but its product's
columns, or calls a function off the allow-list, is reported with the metric it would have
fed, never imported and never raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tether.context.outside import NAME_CHARS, SPEAKERS, clean, quote
from tether.imports.dbt_model import DbtProject, Measure, Metric, SemanticModel
from tether.imports.sqlcheck import Refused, checked_expr, columns_of

AGGREGATES = {"sum": "SUM({})", "count": "COUNT({})", "count_distinct": "COUNT(DISTINCT {})",
              "average": "AVG({})", "avg": "AVG({})", "min": "MIN({})", "max": "MAX({})",
              "median": "MEDIAN({})", "sum_boolean": "SUM(CAST({} AS INTEGER))"}
_CALL = re.compile(r"\{\{\s*(Dimension|TimeDimension|Entity)\(\s*['\"]([^'\"]+)['\"][^)]*\)"
                   r"(?:\s*\|\s*\w+)?\s*\}\}")
_UNIT_KEEPING = ("sum", "average", "avg", "min", "max", "median")


@dataclass
class Semantic:
    config: dict[str, Any] = field(default_factory=dict)
    origins: list[tuple[list[str | int], str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)


@dataclass
class _Model:
    sm: SemanticModel
    product: str
    columns: dict[str, str]  # dimension / entity name -> its SQL over the product
    refused: dict[str, str]  # dimension / entity name -> why its expr was refused
    check: _Checker  # how its measures' and filters' SQL is checked


def semantic_layer(dbt: DbtProject, products: dict[str, str],
                   facts: dict[str, dict[str, Any]], dialect: str | None = None) -> Semantic:
    """The metrics and glossary terms of ``dbt``'s semantic layer over ``products`` (node id ->
    product); time columns go into ``facts``. ``dialect``: the warehouse's SQL dialect, for the
    function allow-list (None: only functions every dialect allows)."""
    out = Semantic()
    models: dict[str, _Model] = {}
    measures: dict[str, tuple[Measure, _Model]] = {}
    for sm in dbt.semantic_models.values():
        node = next((n for n in sm.depends_on.nodes if n in products), None)
        if node is None:
            out.skipped.append({"node": sm.unique_id, "reason": "its model is no product"})
            continue
        known = dbt.catalog.columns(node) if dbt.catalog else None
        check = _Checker(products[node], dialect,
                         {c.lower() for c in known} if known is not None else None)
        model = models[sm.name] = _model(sm, check, out)
        for m in sm.measures:
            measures[m.name] = (m, model)
        _time_columns(sm, model, facts, out)
    metrics: dict[str, Any] = {}
    glossary: dict[str, Any] = {}
    for metric in sorted(dbt.metrics.values(), key=lambda m: m.name):
        try:
            entry, term = _metric(metric, measures, models, facts)
        except _Skip as e:
            out.skipped.append({"node": metric.unique_id, "reason": str(e)})
            continue
        name = term.pop("_name")
        metrics[metric.name] = entry
        glossary[name] = term
        out.origins += [(["metrics", metric.name], metric.unique_id),
                        (["glossary", name], metric.unique_id)]
    if metrics:
        out.config = {"metrics": metrics, "glossary": glossary}
    return out


class _Skip(Exception):
    pass


@dataclass
class _Checker:
    """How one semantic model's expressions are checked: its product, the dialect, and the
    relation's columns when a catalog lists them."""

    product: str
    dialect: str | None
    known: set[str] | None

    def __call__(self, sql: str, what: str) -> str:
        try:
            return checked_expr(sql, self.product, self.dialect, self.known)
        except Refused as e:
            raise _Skip(f"{what}: {e}") from None


def _model(sm: SemanticModel, check: _Checker, out: Semantic) -> _Model:
    """The semantic model's dimensions and entities as SQL over its product; one whose expr is
    refused is reported and left out (a metric that needs it is reported in turn)."""
    model = _Model(sm, check.product, {}, {}, check)
    for kind, items in (("dimension", sm.dimensions), ("entity", sm.entities)):
        for d in items:
            try:
                model.columns[d.name] = check(d.expr or d.name, f"its {kind} {d.name}")
            except _Skip as e:
                model.refused[d.name] = str(e)
                out.skipped.append({"node": sm.unique_id, "reason": str(e)})
    return model


def _time_columns(sm: SemanticModel, model: _Model, facts: dict[str, dict[str, Any]],
                  out: Semantic) -> None:
    times = [d.expr or d.name for d in sm.dimensions if d.type == "time"
             and d.name in model.columns and re.fullmatch(r"\w+", d.expr or d.name)]
    product = model.product
    if not times or product not in facts:
        return
    target = facts[product]
    target["time_columns"] = {**{t: "UTC" for t in times}, **target.get("time_columns", {})}
    default = sm.defaults.agg_time_dimension if sm.defaults else None
    dim = next((d for d in sm.dimensions if d.name == default), None)
    if dim is not None and (dim.expr or dim.name) in times:
        target["metric_time"] = dim.expr or dim.name
    out.origins.append((["products", product, "time_columns"], sm.unique_id))
    out.origins.append((["products", product, "metric_time"], sm.unique_id))


def _metric(metric: Metric, measures: dict[str, tuple[Measure, _Model]],
            models: dict[str, _Model], facts: dict[str, dict[str, Any]]
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    ref = metric.type_params.measure
    if metric.type not in ("simple",) or ref is None:
        raise _Skip(f"a {metric.type} metric: only simple metrics over one measure are "
                    "imported (write it in tether.yaml's metrics)")
    if ref.name not in measures:
        raise _Skip(f"its measure {ref.name!r} is in no imported semantic model")
    measure, model = measures[ref.name]
    template = AGGREGATES.get(measure.agg)
    if template is None:
        raise _Skip(f"its measure aggregates with {measure.agg!r}, which tether does not "
                    "translate")
    check = model.check
    column_sql = check(measure.expr or measure.name, f"its measure {measure.name}'s expr")
    measure_sql = check(template.format(column_sql), f"its measure {measure.name}")
    filters = [w.where_sql_template for f in (metric.filter, ref.filter) if f
               for w in f.where_filters]
    predicate = " AND ".join(f"({_translate(f, model, models)})" for f in filters) or None
    if predicate is not None and len(filters) == 1:
        predicate = predicate[1:-1]
    if predicate is not None:  # the template's own text, around the columns, is SQL from outside
        predicate = check(predicate, "its filter")
    said = quote(metric.description or metric.label, SPEAKERS["dbt"])  # dbt's words, quoted
    entry: dict[str, Any] = {"measure": measure_sql, "description": said or metric.name}
    if predicate:
        entry["predicate"] = predicate
    time = measure.agg_time_dimension or (
        model.sm.defaults.agg_time_dimension if model.sm.defaults else None)
    if time in model.refused:
        raise _Skip(f"its time dimension {time} was refused ({model.refused[time]})")
    time_col = model.columns.get(time or "")
    if time_col and re.fullmatch(r"\w+\.\w+", time_col):
        entry["time"] = time_col
    else:
        entry["window"] = "current"
    pinned = _fields([predicate or ""])  # a cut by what the filter fixes says nothing
    categorical = [d for d in model.sm.dimensions if d.type == "categorical"
                   and d.name in model.columns and re.fullmatch(r"\w+\.\w+", model.columns[d.name])
                   and model.columns[d.name] not in pinned]
    if len(categorical) == 1:  # several would cut every answer by all of them at once
        entry["dimensions"] = [model.columns[categorical[0].name]]
    unit = _unit(metric, measure, model, facts)
    if unit:
        entry["unit"] = unit
    name = clean(metric.label, NAME_CHARS) or metric.name.replace("_", " ")
    entry["term"] = name
    term: dict[str, Any] = {"_name": name, "definition": entry["description"],
                            "measure": measure_sql,
                            "fields": sorted(_fields([measure_sql, predicate or ""]))}
    if predicate:
        term["predicate"] = predicate
    if metric.name.replace("_", " ") != name.lower():
        term["synonyms"] = [metric.name.replace("_", " ")]
    return entry, term


def _translate(template: str, model: _Model, models: dict[str, _Model]) -> str:
    """A MetricFlow filter as SQL over the product's columns."""
    def column(m: re.Match[str]) -> str:
        kind, ref = m.group(1), m.group(2)
        entity, _, name = ref.rpartition("__")
        name = name or ref
        if kind == "Entity":
            name, entity = ref, ""
        owner = _owner(entity, model, models)
        if name in owner.refused:
            raise _Skip(f"its filter names {kind}({ref!r}), which was refused "
                        f"({owner.refused[name]})")
        if name not in owner.columns:
            raise _Skip(f"its filter names {kind}({ref!r}), which its semantic model does "
                        "not declare")
        return owner.columns[name]

    sql = _CALL.sub(column, template)
    if "{{" in sql:
        raise _Skip(f"its filter uses a template tether does not translate: {template!r}")
    return sql  # checked whole by the caller, with the measure's product


def _owner(entity: str, model: _Model, models: dict[str, _Model]) -> _Model:
    """The semantic model whose primary entity is ``entity`` (else the measure's own); a filter
    over another product is not translated (it would need a join tether does not declare)."""
    for other in models.values():
        if any(e.name == entity and e.type == "primary" for e in other.sm.entities):
            if other.product != model.product:
                raise _Skip(f"its filter reads another semantic model ({other.sm.name})")
            return other
    return model


def _unit(metric: Metric, measure: Measure, model: _Model, facts: dict[str, dict[str, Any]]
          ) -> str | None:
    for meta in (metric.all_meta(), {**measure.meta, **measure.config.meta}):
        if isinstance(meta.get("unit"), str):
            return str(meta["unit"])
    if measure.agg in _UNIT_KEEPING and re.fullmatch(r"\w+", measure.expr or measure.name):
        col = (facts.get(model.product, {}).get("columns") or {}).get(measure.expr or measure.name)
        if col and isinstance(col.get("unit"), str):
            return str(col["unit"])
    return None


def _fields(sqls: list[str]) -> set[str]:
    try:
        return columns_of(sqls)
    except Refused as e:  # every caller's SQL was checked already; a parse failure is still no crash
        raise _Skip(str(e)) from None
