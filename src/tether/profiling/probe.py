"""Cheap change signals: does a data product need a full profile, or is the last one still true?

A full profile scans every column (profile.py). Most checks find nothing changed, so a check
first probes each product with what a change must move, all products of a source at once:
- one catalog read per source: a signature of each table's columns, types and nullability;
- one aggregate query per source (a UNION ALL, one branch per product): the row count, the
  newest metric timestamp, and a checksum (a sum of row hashes) over the enum and top-value
  columns, which an in-place UPDATE of a status moves even when the count and timestamp do not.
A product whose probe, configuration and dormancy horizon are unchanged keeps its last profile;
every other product is profiled in full. An in-place update of a column that is neither an enum
nor a top-value column moves no probe: `tether check --full` profiles everything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from sqlglot import exp

from tether.config import Project
from tether.context.names import ref, ref_parts
from tether.context.profile import ProductProfile
from tether.errors import TetherError, UnreadableProduct
from tether.profiling.profile import _aliased, _col, _relation, profile_product
from tether.profiling.statements import fill, piece, relation_slot, slot
from tether.sources import Source, open_product_source

PROFILE_KEY = "profile:"  # the check state keeps each product's last profile and probe here
Cache = dict[str, dict[str, Any]]  # product -> {probe, key, recheck_by, profile}
_TEXT = exp.DataType.build("TEXT")


def config_key(project: Project, product: str, shared: str | None = None) -> str:
    """What a product's profile depends on in tether.yaml (not the clock, policy or serving)."""
    parts = [project.config.products[product].model_dump(mode="json"),
             shared or shared_key(project), project.source_name(product)]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def shared_key(project: Project) -> str:
    """The part of every product's key that the products share: profiling, glossary, schemes."""
    c = project.config
    parts = {"profiling": c.profiling.model_dump(mode="json"),
             "glossary": {k: v.model_dump(mode="json") for k, v in c.glossary.items()},
             "schemes": {k: v.model_dump(mode="json") for k, v in c.identifier_schemes.items()}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def recheck_by(project: Project, prof: ProductProfile) -> str | None:
    """When the newest still-live enum value turns dormant, the profile must be redone."""
    days = dt.timedelta(days=project.config.profiling.dormant_after_days)
    newest = _newest(prof)
    reference = min(prof.profiled_at, newest) if newest is not None else prof.profiled_at
    # a live value past the dormancy line already (history, a column that stopped being filled,
    # a clock of years: profiling/profile.py) stays live as the clock moves on
    seen = [e.last_seen for c in prof.columns for e in c.enum or []
            if e.last_seen is not None and not e.deprecated and e.last_seen + days > reference]
    if not seen:
        return None
    due = min(seen) + days
    if newest is not None and newest < due:
        # dormancy counts from min(clock, newest): until a newer row arrives (which the probe
        # sees), the clock passing `due` changes nothing
        return None
    return due.isoformat()


def _newest(prof: ProductProfile) -> dt.datetime | None:
    """The newest value of the profile's timestamp column, when it is a time."""
    if prof.timestamp_column is None:
        return None
    with contextlib.suppress(KeyError, TypeError, ValueError):
        value = prof.column(prof.timestamp_column).max
        found = dt.datetime.fromisoformat(str(value))
        return found if found.tzinfo else found.replace(tzinfo=dt.UTC)
    return None


def _tracked(prof: ProductProfile | None) -> list[str]:
    if prof is None:
        return []
    return [ref(*c.column.parts) for c in prof.columns if c.enum is not None or c.top_values]


def probe_source(project: Project, src: Source, names: Sequence[str],
                 cache: Cache, profiled: Collection[str] = ()) -> dict[str, dict[str, Any]]:
    """{product: {catalog, rows, newest, checksum}} for products on one source, two queries.
    Each product's branch of the aggregate is rendered once per shape and kept in the cache."""
    relations = {n: _relation(src, project.product(n), n, project.config) for n in names}
    tables = [r for r in relations.values() if isinstance(r, exp.Table)]
    signatures = src.catalog_signatures(tables) if tables else {}
    branches: dict[str, str] = {}
    for n, rel in relations.items():
        entry = cache.get(n, {})
        sig = signatures.get(rel.name) if isinstance(rel, exp.Table) else None
        # checksum the columns the last profile tracked, unless the schema moved (then the
        # product is profiled again anyway, and those columns may be gone)
        same = sig is not None and sig == (entry.get("probe") or {}).get("catalog")
        tracked = entry.get("tracked", []) if same or n in profiled else []
        ts = project.product(n).timestamp_column()
        shape = [rel.sql(dialect=src.dialect), tracked, ts]
        kept = entry.get("probe_sql") or {}
        if kept.get("shape") == shape:
            branches[n] = kept["sql"]
            continue
        slots = {str(i): src.render(_col(ref_parts(c))) for i, c in enumerate(tracked)}
        slots.update(rel=src.render(_aliased(rel)), product=src.render(exp.Literal.string(n)))
        if ts:
            slots["ts"] = src.render(_col([ts]))  # a time column is a top-level column
        branches[n] = fill(src, piece(src, ("probe", len(tracked), bool(ts)),
                                      partial(_probe_branch, src, len(tracked), bool(ts))), slots)
        if n in cache:
            cache[n]["probe_sql"] = {"shape": shape, "sql": branches[n]}
    rows: list[tuple[Any, ...]] = []
    try:
        rows = src.run(" UNION ALL ".join(branches.values())) if branches else []
    except TetherError:  # one product's relation is broken: probe one by one, skip the broken
        for sql in branches.values():
            with contextlib.suppress(TetherError):
                rows += src.run(sql)
    out: dict[str, dict[str, Any]] = {}
    for product, count, newest, checksum in rows:
        rel = relations[product]
        out[product] = {"catalog": signatures.get(rel.name) if isinstance(rel, exp.Table) else None,
                        "rows": int(count), "newest": newest, "checksum": checksum}
    return out


WORKERS = max(1, min(2, os.cpu_count() or 1))
"""Products profiled at once: while one waits on the engine, another's statements are written
and its results read (the engine runs each statement on its own threads as well)."""


def _profiled(project: Project, src: Source, names: list[str], note: Callable[[str], None],
              skipped: dict[str, UnreadableProduct] | None = None) -> dict[str, ProductProfile]:
    """Full profiles of ``names`` (in that order), several at once; the first product that
    fails, in that order, raises as it would alone, unless ``skipped`` collects the products
    that cannot be read (the others are profiled)."""
    def one(n: str) -> ProductProfile | UnreadableProduct:
        try:
            return profile_product(project, n, source=src, progress=note)
        except UnreadableProduct as e:
            if skipped is None:
                raise
            return e

    if len(names) < 2 or WORKERS == 1:
        done = [one(n) for n in names]
    else:
        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="tether-profile") as pool:
            done = list(pool.map(one, names))
    out: dict[str, ProductProfile] = {}
    for n, got in zip(names, done, strict=True):
        if isinstance(got, UnreadableProduct):
            assert skipped is not None
            skipped[n] = got
        else:
            out[n] = got
    return out


def _probe_branch(src: Source, tracked: int, ts: bool) -> exp.Expr:
    """One product's probe (slots: its name, its columns, its time and its relation)."""
    sums = src.checksum([slot(i) for i in range(tracked)]) if tracked else None
    return exp.select(
        slot("product").as_("product"),
        exp.func("COUNT", exp.Star()).as_("n"),
        exp.cast(exp.func("MAX", slot("ts")) if ts else exp.Null(), _TEXT).as_("newest"),
        exp.cast(sums if sums is not None else exp.Null(), _TEXT).as_("checksum"),
        copy=False).from_(relation_slot(), copy=False)


def _reusable(entry: dict[str, Any], probe: dict[str, Any] | None, key: str,
              now: dt.datetime) -> bool:
    if probe is None or entry.get("key") != key or entry.get("probe") != probe:
        return False
    if probe["catalog"] is None:  # a SQL product, or an engine without bulk catalog: unsure
        return False
    horizon = entry.get("recheck_by")
    return horizon is None or now < dt.datetime.fromisoformat(horizon)


def profile_changed(
    project: Project, cache: Cache, *, full: bool = False,
    progress: Callable[[str], None] | None = None,
    skipped: dict[str, UnreadableProduct] | None = None,
) -> tuple[list[ProductProfile], Cache, list[str]]:
    """Profiles of every product (reused where the probe says nothing moved), the new cache, and
    the names of the products profiled in full; with ``skipped``, a product that cannot be read
    is left out and its error kept there instead of stopping the others."""
    note = progress or (lambda _m: None)
    names = list(project.config.products)
    by_source: dict[str, list[str]] = {}
    for n in names:
        by_source.setdefault(project.source_name(n), []).append(n)
    profiles: dict[str, ProductProfile] = {}
    new_cache: Cache = {}
    redone: list[str] = []
    now, shared = project.now(), shared_key(project)
    for _, members in by_source.items():
        src = open_product_source(project, members[0])
        try:
            with src.catalog_read():
                redone += _profile_members(project, src, members, cache, full, shared, now,
                                           profiles, new_cache, note, skipped)
        finally:
            src.close()
    return [profiles[n] for n in names if n in profiles], new_cache, redone


def _profile_members(project: Project, src: Source, members: list[str], cache: Cache,
                     full: bool, shared: str, now: dt.datetime,
                     profiles: dict[str, ProductProfile], new_cache: Cache,
                     note: Callable[[str], None],
                     skipped: dict[str, UnreadableProduct] | None = None) -> list[str]:
    """Probe and (where needed) profile the products of one source; the names profiled."""
    redone: list[str] = []
    note(f"probing {len(members)} products")
    # nothing profiled before: every product is profiled, then probed with the columns its
    # profile tracks (below), so a probe now would be thrown away
    probes = probe_source(project, src, members, cache) if any(
        n in cache for n in members) else {}
    post: list[str] = []
    keys = {n: config_key(project, n, shared) for n in members}
    todo = [n for n in members if full or cache.get(n) is None
            or not _reusable(cache[n], probes.get(n), keys[n], now)]
    fresh = _profiled(project, src, todo, note, skipped)
    for n in members:
        if skipped and n in skipped:
            continue
        key, entry = keys[n], cache.get(n)
        if n not in fresh:
            assert entry is not None
            profiles[n] = ProductProfile.model_validate(entry["profile"])
            new_cache[n] = entry
            continue
        prof = fresh[n]
        profiles[n], new_cache[n] = prof, {
            "key": key, "recheck_by": recheck_by(project, prof),
            "profile": prof.model_dump(mode="json"), "probe": probes.get(n),
            "tracked": _tracked(prof)}
        redone.append(n)
        if _tracked(prof) != (entry or {}).get("tracked"):
            post.append(n)  # the probed checksum covered other columns: probe again
    if post:
        after = probe_source(project, src, post, new_cache, profiled=fresh)
        for n, p in after.items():
            # rows moved between the profile and this probe: keep no probe, so the next
            # check profiles again rather than trust a profile of older data
            new_cache[n]["probe"] = p if p["rows"] == profiles[n].row_count else None
        for n in set(post) - set(after):
            new_cache[n]["probe"] = None
    return redone
