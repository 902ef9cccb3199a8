"""OpenLineage run events as one import layer (``.tether/imports/openlineage.json``).

Each event's job reads its inputs and writes its outputs: an edge from every input to every
output, through ``openlineage:<namespace>/<job>``. A dataset whose name is a product's relation
is that product (``main.rentals`` is the product reading ``rentals``); any other keeps its
name. A dataset's ``schema`` facet (its fields) is kept as an observation: ``tether check``
fingerprints it, so a dataset that lost a column upstream is a lineage event for every product
below it.

Only the edges that lead to a product are kept (layers/model.py): the layer is proportional to
the events' datasets, never to the product of a job's inputs and outputs. An event dated after
the project clock by more than :data:`CLOCK_SKEW` is refused.

Events accumulate: the layer is the fold of every event received (from files, stdin or
``POST /api/v1/lineage``), a newer event about a job or a dataset superseding an older one, so
folding the same events twice gives the same layer. "Newer" compares ``eventTime`` as the
instant it names (an ISO 8601 time with its offset; one without an offset, or no time at all,
is an invalid event): as text, ``...T10:00:00+02:00`` would sort after ``...T09:00:00Z``, which
is an hour later.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from tether.config import Project
from tether.errors import ConfigError
from tether.layers.model import (
    MAX_LAYER_EDGES,
    ImportLayer,
    InputFile,
    lineage_elsewhere,
    now_stamp,
    reaching,
    too_many_edges,
)
from tether.textfiles import load_json

KIND = "openlineage"
VIA = "openlineage:"
CLOCK_SKEW = dt.timedelta(minutes=5)
"""How far after the project clock (tether.yaml's ``clock``, else the wall clock) an event may
be dated: emitters' clocks drift a little."""


class _OL(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Job(_OL):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)


class SchemaField(_OL):
    name: str
    type: str | None = None


class SchemaFacet(_OL):
    fields: list[SchemaField] = Field(default_factory=list)


class Facets(_OL):
    schema_: SchemaFacet | None = Field(default=None, alias="schema")


class Dataset(_OL):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    facets: Facets = Field(default_factory=Facets)


class RunEvent(_OL):
    _place: tuple[str, int, str] | None = PrivateAttr(default=None)  # (input, line or item, unit)
    eventTime: str = Field(min_length=1)
    eventType: str | None = None
    job: Job
    inputs: list[Dataset] = Field(default_factory=list)
    outputs: list[Dataset] = Field(default_factory=list)

    @field_validator("eventTime")
    @classmethod
    def _instant(cls, v: str) -> str:
        instant(v)  # raises ValueError, which pydantic reports with the event's place
        return v

    @property
    def when(self) -> dt.datetime:
        return instant(self.eventTime)


def instant(text: str) -> dt.datetime:
    """An eventTime as the aware datetime it names; ValueError when it is none."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date and time") from None
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset (write Z or +hh:mm)")
    return when


def _seen_at(seen: dict[str, Any] | None, latest: dt.datetime) -> dt.datetime | None:
    """When a folded job or dataset was last seen; None for none (or a record an older tether
    wrote with a time it could not read, or one after ``latest``: any valid event supersedes
    it)."""
    try:
        when = instant(str(seen["event_time"])) if seen else None
    except (ValueError, KeyError):
        return None
    return None if when is None or when > latest else when


def parse_events(text: str, where: str) -> list[RunEvent]:
    """Events from JSON lines (or one JSON array or object); an invalid one names the line.
    Each event remembers its place (``where:line``, or the array's item) for later errors."""
    stripped = text.strip()
    if stripped.startswith("["):
        items = load_json(stripped, where, "the events", error=InvalidEvents, hint=_HINT)
        if not isinstance(items, list):
            raise _bad(where, 1, "not a JSON array of events")
        return [_event(item, where, i + 1, "item") for i, item in enumerate(items)]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        item = load_json(line, where, f"line {n}", error=InvalidEvents, hint=_HINT, line=n)
        out.append(_event(item, where, n, "line"))
    return out


def _event(item: Any, where: str, n: int, unit: str) -> RunEvent:
    try:
        event = RunEvent.model_validate(item)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(the event)'}: "
                             f"{err['msg']}" for err in e.errors()[:3])
        raise _bad(where, n, f"not an OpenLineage run event: {problems}", unit) from None
    event._place = (where, n, unit)
    return event


class InvalidEvents(ConfigError):
    """The events themselves are invalid (the sender's to fix), not the project."""


_HINT = ("Each line must be one OpenLineage RunEvent (eventTime, job {namespace, name}, inputs, "
         "outputs); nothing was imported and the previous layer was kept.")


def _bad(where: str, n: int, what: str, unit: str = "line") -> ConfigError:
    return InvalidEvents(f"{unit} {n}: {what}.", where=f"{where}:{n}" if unit == "line" else where,
                         hint=_HINT)


def check_times(events: list[RunEvent], now: dt.datetime) -> None:
    """Refuse an event dated after ``now`` by more than :data:`CLOCK_SKEW` (naming its line): a
    job's newest event wins, so one dated 2999 would hide every real event of its job."""
    latest = now + CLOCK_SKEW
    for ev in events:
        if ev.when > latest:
            where, n, unit = ev._place or ("the events", 0, "event")
            raise _bad(where, n, f"eventTime {ev.eventTime} is after the project's clock "
                       f"({now.isoformat(timespec='seconds')}) by more than "
                       f"{int(CLOCK_SKEW.total_seconds() // 60)} minutes; a job's newest event "
                       "wins, so an event from the future would hide its job's real ones", unit)


def fold(project: Project, layer: ImportLayer | None, events: list[RunEvent]) -> ImportLayer:
    """``layer`` (or an empty one) with ``events`` folded in, its config rebuilt. An event dated
    after the project clock is refused (:func:`check_times`); a job or dataset the layer holds
    from after the clock (a layer written before that check) is superseded by any event."""
    now = project.now()
    check_times(events, now)
    latest = now + CLOCK_SKEW
    out = (layer.model_copy(deep=True) if layer is not None
           else ImportLayer(kind=KIND, imported_at=now_stamp(project.config.clock)))
    for ev in sorted(events, key=lambda e: e.when):
        job = f"{ev.job.namespace}/{ev.job.name}"
        if ev.inputs or ev.outputs:
            seen_at = _seen_at(out.jobs.get(job), latest)
            if seen_at is None or seen_at <= ev.when:
                out.jobs[job] = {"event_time": ev.eventTime,
                                 "inputs": sorted({d.name for d in ev.inputs}),
                                 "outputs": sorted({d.name for d in ev.outputs})}
        for d in [*ev.inputs, *ev.outputs]:
            if d.facets.schema_ is None:
                continue
            seen_at = _seen_at(out.datasets.get(d.name), latest)
            if seen_at is None or seen_at <= ev.when:
                out.datasets[d.name] = {"namespace": d.namespace, "event_time": ev.eventTime,
                                        "columns": {f.name: f.type or "" for f in
                                                    d.facets.schema_.fields}}
    out.imported_at = now_stamp(project.config.clock)
    rederive(project, out)
    return out


def rederive(project: Project, layer: ImportLayer) -> bool:
    """Rebuild ``layer``'s config from its jobs against the project as it is now (its products
    and the other layers' lineage); whether it changed."""
    config, origins, left_out = _config(project, layer.jobs)
    changed = (config, origins) != (layer.config, [tuple(o) for o in layer.origins])
    layer.config, layer.origins = config, origins
    layer.report = {**layer.report, "lineage_left_out": left_out}
    return changed


def _config(project: Project, jobs: dict[str, Any]
            ) -> tuple[dict[str, Any], list[Any], int]:
    """An edge from each input of a job to each of its outputs that leads to a product (through
    these jobs, another layer or tether.yaml); the config, the origins, and how many edges were
    left out. The edges are never all made: a job reading 300 datasets and writing 300 others
    that no product is built from makes none."""
    named: dict[str, str] = {}

    def node(dataset: str) -> str:
        if dataset not in named:
            named[dataset] = node_name(project, dataset)
        return named[dataset]

    into: dict[str, list[list[str]]] = {}
    for seen in jobs.values():
        inputs = [node(i) for i in seen["inputs"]]
        for o in seen["outputs"]:
            into.setdefault(node(o), []).append(inputs)
    wanted = reaching(project.config.products, into,
                      lineage_elsewhere(project.typed, project.layers, KIND))
    pairs = [(job, [node(i) for i in seen["inputs"]], [node(o) for o in seen["outputs"]])
             for job, seen in sorted(jobs.items())]
    total = kept = 0
    for _, inputs, outputs in pairs:
        for to in outputs:
            n = sum(1 for frm in inputs if frm != to)
            total += n
            kept += n if to in wanted else 0
    if kept > MAX_LAYER_EDGES:
        raise too_many_edges(kept, KIND, "the OpenLineage events",
                             "A job's event makes an edge from each of its inputs to each output "
                             "a product is built from: send narrower events (one per output).",
                             InvalidEvents)
    edges: list[dict[str, Any]] = []
    origins: list[Any] = []
    for job, inputs, outputs in pairs:
        for to in outputs:
            if to not in wanted:
                continue
            for frm in inputs:
                if frm != to:
                    origins.append((["lineage", len(edges)], job))
                    edges.append({"from": frm, "to": to, "via": VIA + job})
    return ({"lineage": edges} if edges else {}), origins, total - kept


def node_name(project: Project, dataset: str) -> str:
    """A dataset as a lineage node: the product whose relation it names, else its own name."""
    parts = dataset.lower().replace('"', "").split(".")
    named = {s.schema_.lower() for s in project.config.sources.values() if s.schema_}
    defaults = named or {"main", "public"}
    for name, p in (project.typed.get("products") or {}).items():
        table = str((p or {}).get("table") or "") if isinstance(p, dict) else ""
        if not table:
            continue
        want = table.lower().replace('"', "").split(".")
        if want[-1] != parts[-1]:
            continue
        schema = parts[-2] if len(parts) > 1 else None
        own = want[-2] if len(want) > 1 else None
        if (own or None) == schema or (own is None and (schema is None or schema in defaults)):
            return str(name)
    return dataset


def read_file(project: Project, layer: ImportLayer | None, path: str, text: str
              ) -> ImportLayer:
    """``layer`` with the events of one input folded in and the input recorded (its hash
    replacing an earlier record of the same path)."""
    import hashlib


    new = fold(project, layer, parse_events(text, path))
    digest = hashlib.sha256(text.encode()).hexdigest()
    new.inputs = [i for i in new.inputs if i.path != path] + [InputFile(path=path, sha256=digest)]
    return new


def dataset_columns(project: Project) -> dict[str, dict[str, str]]:
    """Lineage node -> the columns its newest schema facet listed (OpenLineage datasets)."""
    out: dict[str, dict[str, str]] = {}
    for layer in project.layers:
        if layer.kind == KIND:
            for name, seen in sorted(layer.datasets.items()):
                out[node_name(project, name)] = dict(seen.get("columns") or {})
    return out
