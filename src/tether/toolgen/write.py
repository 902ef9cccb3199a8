"""The write kind: one tool per action of a product (tether.yaml ``products.P.actions.NAME``).

A write tool is named for the business action. Its arguments pick rows by the product's primary
key and give the values of the columns the action sets: a status column's value is an enum of
the states the transitions reach. ``dry_run`` (default true) changes nothing and answers with
each row's before and after values, the preconditions checked, the consequences and a signed
confirmation; the real call needs that confirmation. The description says what moves where,
what must hold, what reacts downstream (metrics, glossary terms, lineage, a person's words) and
who may do it. The plan (serve/write.py runs it) keeps all of it with the version, so a changed
precondition or a new state reaches callers only through the gate.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import ActionConfig, ProductConfig
from tether.context.meta import context_slot
from tether.context.outside import NAME_CHARS, quoted
from tether.context.profile import ColumnProfile
from tether.errors import ConfigError
from tether.policy import inherit
from tether.policy.model import values_scoped
from tether.toolgen.describe import grain_noun, join_words, json_type, plural, sentence
from tether.toolgen.kinds import Kind, register
from tether.toolgen.model import (
    WRITES,
    ActionPlan,
    Consequence,
    GeneratedTool,
    QueryPlan,
    Sentence,
    Source,
    join_sentences,
)
from tether.toolgen.shared import Ctx, metric_products, param_names, tool_meta

WRITE_KIND_NAME = "write"
CONTROL = ("dry_run", "confirmation", "idempotency_key")
IDEMPOTENCY_KEY = "^[A-Za-z0-9._:-]+$"
IDEMPOTENCY_KEY_MAX = 200
"""The arguments every write tool takes beside its keys and values."""


def columns_of(sql: str, product: str) -> list[str]:
    """The product's columns a SQL text names (bare, or qualified by the product)."""
    try:
        tree = sqlglot.parse_one(sql)
    except sqlglot.errors.SqlglotError:
        return []
    return sorted({c.name for c in tree.find_all(exp.Column) if c.table in ("", product)})


def consequences(ctx: Ctx, product: str, a: ActionConfig) -> list[Consequence]:
    """What reacts when the action changes its columns: governed metrics that read them (their
    change is computed where the metric reads this product alone), glossary terms that govern
    them, products and lineage nodes built from this product, and the action's own words (a
    word that names a metric, product or node is read as that)."""
    config = ctx.config
    changed = set(a.set_)
    out: list[Consequence] = []
    named = set(a.consequences)
    for name, m in sorted(config.metrics.items()):
        texts = [m.measure, m.predicate or "", m.time or "", m.time_end or "", *m.dimensions]
        reads = sorted({c for t in texts for c in columns_of(t, product)
                        if product in metric_products(m)})
        if not (changed & set(reads)) and name not in named:
            continue
        alone = metric_products(m) == [product] and m.window in (None, "current")
        text = f"the metric {name}" + (
            f" reads {join_words(sorted(changed & set(reads)))}" if changed & set(reads) else "")
        out.append(Consequence(kind="metric", name=name, text=text + (
            " (computed in the dry run)" if alone else ""),
            measure=m.measure if alone else None, predicate=m.predicate if alone else None,
            unit=m.unit, columns=reads))
    for term, g in sorted(config.glossary.items()):
        governs = sorted(f.split(".", 1)[1] for f in g.fields
                         if f.split(".", 1)[0] == product and f.split(".", 1)[1] in changed)
        if governs:
            out.append(Consequence(kind="term", name=term, text=f"glossary term {term!r} "
                                   f"governs {join_words(governs)}"))
    nodes = sorted({e.to for e in config.lineage if e.from_.split(".")[0] == product})
    built = sorted({q for q in config.products if q != product and product in inherit.reads(
        config, q, ctx.dialect(q))})
    for node in sorted(set(nodes) | set(built)):
        kind = "product" if node in config.products else "lineage"
        out.append(Consequence(kind=kind, name=node, text=f"{_node(node, kind)} is built from "
                               f"{product}"))
    seen = {c.name for c in out}
    for words in a.consequences:
        if words in seen:
            continue
        if words in config.products or words in {e.to for e in config.lineage}:
            kind = "product" if words in config.products else "lineage"
            out.append(Consequence(kind=kind, name=words, text=f"{_node(words, kind)} reacts "
                                   "to it"))
        else:
            out.append(Consequence(kind="words", text=words.strip().rstrip(".")))
    return out


def _node(name: str, kind: str) -> str:
    """A lineage node as a description names it: a product by its name; any other node (a
    dataset an import named: OpenLineage events, a dbt project) quoted and cleaned, since its
    name is the outside's words."""
    return name if kind == "product" else quoted(name, NAME_CHARS)


def _value_schema(c: ColumnProfile, targets: list[str] | None) -> dict[str, Any]:
    if targets is not None:
        schema: dict[str, Any] = {"type": "string", "enum": targets}
        if len(targets) == 1:
            schema["default"] = targets[0]
        return schema
    schema = json_type(c.column.kind)
    if c.column.nullable:
        schema["type"] = [schema.get("type", "string"), "null"]
    return schema


def write_tool(ctx: Ctx, product: str, action: str) -> GeneratedTool:
    p: ProductConfig = ctx.config.products[product]
    a = p.actions[action]
    where = ctx.project.where("products", product, "actions", action)
    prof = ctx.profiles[product]
    by_name = {c.column.name: c for c in prof.columns}
    needed = [*p.primary_key, *a.set_, *{c for r in a.require for c in columns_of(r, product)}]
    missing = sorted({c for c in needed if c not in by_name})
    if missing:
        raise ConfigError(f"action {action!r} names {', '.join(missing)}, which {product!r} "
                          "does not have.", where=where,
                          hint="Columns: " + ", ".join(sorted(by_name)[:20]) + ".")
    noun = grain_noun(p.grain, product)
    keys = param_names(p, p.primary_key)
    sets = param_names(p, a.set_)
    props: dict[str, Any] = {}
    required: list[str] = []
    single = len(p.primary_key) == 1
    for col in p.primary_key:
        scalar = json_type(by_name[col].column.kind)
        scheme = p.identifiers.get(col)
        pattern = (ctx.config.identifier_schemes[scheme].pattern
                   if scheme in ctx.config.identifier_schemes else None)
        if scalar.get("type") == "string" and (pattern or by_name[col].pattern):
            scalar["pattern"] = pattern or by_name[col].pattern  # the shape every key has
        which = f", a {scheme} identifier" if scheme and scheme != col else ""
        if single:
            # no maxItems: a constrained decoder expands it into max_rows nested rules, and a
            # few such lists in one tool list pass llama.cpp's grammar limit (its server dies);
            # the server refuses more than max_rows, and the description says how many
            props[keys[col]] = {"type": "array", "items": scalar, "minItems": 1,
                                "description": sentence(
                                    f"The {col} of each {noun} to change{which} (one or a "
                                    f"list of up to {a.max_rows})")}
        else:
            props[keys[col]] = {**scalar, "description": sentence(
                f"With {join_words([k for k in p.primary_key if k != col])}, the {noun} to "
                f"change{which}")}
        required.append(keys[col])
    for col in a.set_:
        moves = a.transitions.get(col)
        targets = sorted({t for tos in moves.values() for t in tos}) if moves else None
        schema = _value_schema(by_name[col], targets)
        if moves:
            schema["description"] = sentence(f"The {col} to move to (see the moves above)")
        props[sets[col]] = schema
        if "default" not in schema:
            required.append(sets[col])
    props["dry_run"] = {"type": "boolean", "default": True, "description": (
        "True: change nothing, show the change and a confirmation. False: apply it.")}
    # no bounded repeats (maxLength, {1,200}): a constrained decoder expands each into nested
    # rules and llama.cpp's grammar limit is passed by three write tools; the server checks
    # a confirmation's shape and a key's length itself
    props["confirmation"] = {"type": "string", "description": (
        "From the dry run of the same arguments; needed when dry_run is false.")}
    props["idempotency_key"] = {"type": "string", "pattern": IDEMPOTENCY_KEY,
                                "description": "Your own key (letters, digits and ._:-, at most "
                                f"{IDEMPOTENCY_KEY_MAX} characters): used again, it returns the "
                                "first result and changes nothing more."}
    found = consequences(ctx, product, a)
    sentences = _sentences(ctx, product, action, a, found, by_name)
    description, sources = join_sentences(sentences)
    reads = list(dict.fromkeys([*p.primary_key, *a.set_,
                                *(c for r in a.require for c in columns_of(r, product)),
                                *(c for q in found if q.measure for c in q.columns)]))
    inverse = a.inverse if a.inverse in p.actions else None
    plan = QueryPlan(
        kind=WRITE_KIND_NAME, product=product, source=ctx.project.source_name(product),
        dialect=ctx.dialect(product), max_rows=a.max_rows, default_rows=a.max_rows,
        masks_apply_to=product,
        action=ActionPlan(
            name=action, table=p.table or product, keys={keys[c]: c for c in p.primary_key},
            sets={sets[c]: c for c in a.set_},
            kinds={c: by_name[c].column.kind for c in reads if c in by_name},
            transitions=a.transitions, require=list(a.require), consequences=found,
            roles=list(a.roles), inverse=inverse, max_rows=a.max_rows, reads=reads))
    meta = tool_meta(ctx, WRITE_KIND_NAME, sentences, sources, [product], source_of_truth={},
                     canonical_ids={}, deprecated={}, limits={"max_rows": a.max_rows},
                     definitions=sorted(q.name for q in found if q.kind == "term" and q.name))
    context_slot(meta)["write"] = {"roles": sorted(a.roles), "transitions": a.transitions,
                                       "require": list(a.require)}
    inputs: dict[str, Any] = {"type": "object", "properties": props,
                              "additionalProperties": False, "required": required}
    return GeneratedTool(name=action, title=(a.description or "").split(". ")[0][:80] or None,
                         description=description, input_schema=inputs,
                         output_schema=_output_schema(
                             {c: props[keys[c]].get("items", props[keys[c]])
                              for c in p.primary_key},
                             {c: props[sets[c]] for c in a.set_}),
                         annotations=dict(WRITES), meta=meta,
                         plan=plan)


def _stuck(c: ColumnProfile | None, moves: dict[str, list[str]]) -> list[str]:
    """The values of a status column the data holds that no move leaves: every value where the
    column is an enum, else its most frequent ones; a new state arriving changes them."""
    if c is None:
        return []
    held = {str(v.value) for v in (c.enum if c.enum is not None else c.top_values)}
    return sorted(held - set(moves))


_SAID_BY: dict[str, Source] = {"metric": "glossary", "term": "glossary", "product": "lineage",
                               "lineage": "lineage", "words": "schema"}
"""Where a consequence's words come from: a governed metric or term, lineage, tether.yaml."""


def _sentences(ctx: Ctx, product: str, action: str, a: ActionConfig,
               found: list[Consequence], by_name: dict[str, ColumnProfile]) -> list[Sentence]:
    p = ctx.config.products[product]
    noun = grain_noun(p.grain, product)
    here = ("products", product, "actions", action)
    out: list[Sentence] = []
    source, origin = ctx.said("schema", *here, "description")
    first = a.description or (f"Changes {join_words(a.set_)} of {plural(noun)}, "
                              f"picked by {join_words(p.primary_key)}")
    out.append(Sentence(text=sentence(first), source=source, origin=origin))
    out.append(Sentence(text=sentence(
        f"Writes {join_words(a.set_)}: at most {a.max_rows} {plural(noun)} (rows) a call, by "
        f"{join_words(p.primary_key)}; no pagination"),
        source="schema"))
    source, origin = ctx.said("schema", *here, "transitions")
    for col, moves in a.transitions.items():
        said = "; ".join(f"{frm} -> {join_words(tos, 'or')}" for frm, tos in sorted(moves.items()))
        out.append(Sentence(text=sentence(f"{col} moves: {said}; others are refused"),
                            source=source, origin=origin))
        stuck = _stuck(by_name.get(col), moves)
        if stuck and values_scoped(ctx.config, product, col):  # no value a caller may not see
            n = len(stuck)
            out.append(Sentence(text=sentence(
                f"{n} other {col} value{'' if n == 1 else 's'} in the data "
                f"{'has' if n == 1 else 'have'} no move out"), source="samples"))
        elif stuck:  # a state the data holds that nothing moves out of (a new one, say)
            out.append(Sentence(text=sentence(
                f"{join_words(stuck)} ({col} in the data) {'has' if len(stuck) == 1 else 'have'} "
                "no move out"), source="samples"))
    if a.require:
        source, origin = ctx.said("schema", *here, "require")
        out.append(Sentence(text=sentence(
            "Must hold before and after: " + "; ".join(a.require)),
            source=source, origin=origin))
    for q in found:
        src = _SAID_BY[q.kind]
        out.append(Sentence(text=sentence(f"Downstream: {q.text}"), source=src))
    who = f"Only {join_words(sorted(a.roles))} may call it"
    if any(product in r.row_filters for r in ctx.config.policies.roles.values()):
        who += ", on rows in their scope"
    out.append(Sentence(text=sentence(who), source="policy"))
    seconds = ctx.config.serve.confirmation_seconds
    out.append(Sentence(text=sentence(
        "Call with dry_run true (the default) to see each row before and after and get a "
        f"confirmation, then with dry_run false and it (valid {seconds} s) to apply"),
        source="policy"))
    if a.inverse:
        source, origin = ctx.said("schema", *here, "inverse")
        out.append(Sentence(text=sentence(f"{a.inverse} undoes it"),
                            source=source, origin=origin))
    undone = sorted(n for n, b in ctx.config.products[product].actions.items()
                    if b.inverse == action)
    if undone:  # serve/write.py's returns_home holds it to that
        out.append(Sentence(text=sentence(
            f"On a row {join_words(undone)} changed, it returns the row to the state it came "
            "from, not to another its moves allow"), source="schema"))
    return out


def _output_schema(keys: dict[str, dict[str, Any]], sets: dict[str, dict[str, Any]]
                   ) -> dict[str, Any]:
    """The result's shape, kept small (it is in every tools/list): each field named, counts
    in rows, keys as identifiers."""
    def plain(schema: dict[str, Any], key: bool = False) -> dict[str, Any]:
        out = {k: v for k, v in schema.items() if k in ("type", "format")}
        if key and out.get("type") in ("integer", "number"):
            out["description"] = "An identifier; no unit."
        return out

    values = {"type": "object", "properties": {c: plain(v) for c, v in sets.items()}}
    change = {"type": "object", "properties": {
        "key": {"type": "object", "properties": {c: plain(v, True) for c, v in keys.items()}},
        "before": values, "after": values}}
    row = {"type": "object", "properties": {**{c: plain(v, True) for c, v in keys.items()},
                                            **{c: plain(v) for c, v in sets.items()}}}
    rows = {"type": "integer", "description": "In rows."}
    check = {"type": "object", "properties": {
        "rule": {"type": "string"}, "before": {"type": "string"}, "after": {"type": "string"},
        "rows": rows}}
    call = {"type": "object", "properties": {
        "tool": {"type": "string"}, "arguments": {"type": "object",
                                                  "additionalProperties": True}}}
    text = {"type": ["string", "null"]}
    return {"type": "object", "properties": {
        "action": {"type": "string"}, "dry_run": {"type": "boolean"},
        "applied": {"type": "boolean"}, "rows": {"type": "array", "items": row},
        "row_count": rows, "changes": {"type": "array", "items": change},
        "preconditions": {"type": "array", "items": check},
        "consequences": {"type": "array", "items": {"type": "string"}},
        "confirmation": text, "apply_with": {"type": "object", "additionalProperties": True},
        "confirmation_expires_at": text, "write_id": text,
        "undo": {"type": "array", "items": call}, "replayed": {"type": "boolean"},
        "as_of": text,
    }, "required": ["action", "dry_run", "rows", "row_count"]}


def _generate(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    return [write_tool(ctx, product, action)
            for product, p in ctx.config.products.items() if product in ctx.profiles
            for action in p.actions]


WRITE_KIND = register(Kind(WRITE_KIND_NAME, generate=_generate, bare="get"))
