"""The api kind: one tool per read operation of an HTTP API (an `openapi` source's product).

Its arguments are the operation's own parameters, with the spec's constraints (types, enums,
formats, ranges, patterns, defaults), less the ones the server drives while it follows the
pages; `limit` and `cursor` page as every listing does. Its description quotes what the spec
says ("The API's summary says: “...”", source `openapi`: the spec's words are data, cleaned of
markup and cut, never tether's voice), then says what a sample of responses showed (source
`samples`: a documented value no response held), how it pages and how the API limits its rate,
and that each caller reads with their own credential. Values a sample saw enter a definition only
where every caller reads the same data (a shared credential) and no policy scopes them: with each
caller's own, generation reads the profile less its sample (:func:`unsampled`). Its name
is made of identifiers only (the operation id, the path, a parameter's name, the source's name).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from tether.config import ProductConfig, Project
from tether.context.config_model import api_product
from tether.context.meta import context_slot
from tether.context.outside import MAX_CHARS, NAME_CHARS, SPEAKERS, clean, quote
from tether.context.profile import ColumnProfile, ProductProfile
from tether.errors import ConfigError
from tether.policy.model import values_scoped
from tether.sources.openapi import Operation, Spec, field_schema, load_spec, scheme_of, words
from tether.toolgen.describe import grain_noun, join_words, sentence, split_sentences
from tether.toolgen.kinds import Kind, register
from tether.toolgen.listing import column_units
from tether.toolgen.model import READ_ONLY, GeneratedTool, QueryPlan, Sentence, join_sentences
from tether.toolgen.provenance import note_said
from tether.toolgen.shared import (
    Ctx,
    closed,
    envelope,
    output_rows,
    policy_sentence,
    safe_name,
    tool_meta,
    visible_columns,
)

API_KIND_NAME = "api"
SPEC_KEYS = ("type", "enum", "format", "minimum", "maximum", "exclusiveMinimum",
             "exclusiveMaximum", "minLength", "maxLength", "pattern", "default", "minItems",
             "maxItems")
PAGING_WORDS = {"link": "its Link header", "next_url": "the next-page URL it returns",
                "cursor": "the cursor it returns", "page": "page numbers",
                "offset": "offsets"}


def spec_of(project: Project, source: str) -> Spec:
    cfg = project.config.sources[source]
    assert cfg.spec is not None
    return load_spec(cfg.spec, project.root)


def operation_in(project: Project, name: str) -> Operation:
    p = project.config.products[name]
    source = project.source_name(name)
    op = spec_of(project, source).operations.get(p.table or "")
    if op is None:
        raise ConfigError(f"product {name!r} reads operation {p.table!r}, which the API of "
                          f"source {source!r} does not offer as a read.",
                          where=project.where("products", name, "table"),
                          hint="Operations there: " + ", ".join(
                              sorted(spec_of(project, source).operations)) + ".")
    return op


VERBS = frozenset({"get", "list", "read", "fetch", "find", "search", "retrieve", "show",
                   "query", "lookup", "all"})
"""Words of an operation id that name the request, not what it answers."""


MAX_NAME = 64
"""Longest tool name made (MCP allows 128; most model APIs take 64)."""


def api_tool_name(p: ProductConfig, op: Operation, source: str) -> str:
    """What the operation answers and what picks its rows: its words less the request's verb,
    ``_by_`` its first filter (listInvoices(status) -> invoices_by_status,
    getInvoice(invoice_id) -> invoice_by_id); one word alone takes the path's words before it
    (/desk/agents -> desk_agents), else the source's name in tether.yaml (desk_agents). Only
    identifiers make a name: the operation id, the path and parameter names, tether.yaml's
    names; never a spec's prose (its title or summary), which may say anything."""
    noun = [w for w in words(p.table or "api") if w not in VERBS] or words(p.table or "api")
    driven = op.paging.server_params()
    first = next((x for x in sorted(op.params, key=lambda x: x.where != "path")
                  if x.name not in driven), None)
    by = ([w for w in words(first.name) if w not in noun] or words(first.name)) if first else []
    name = noun + (["by", *by] if by else [])
    if len(name) == 1:
        name = [w for w in path_words(op.path) if w not in noun][-2:] + name
    if len(name) == 1:
        name = [w for w in words(source) if w not in noun][:2] + name
    return "_".join(name)[:MAX_NAME].strip("_") or "api"


def path_words(path: str) -> list[str]:
    """The words of a path's fixed segments (not its {parameters}, not a version: v1)."""
    return [w for seg in path.split("/") if seg and "{" not in seg
            and not re.fullmatch(r"v\d+(\.\d+)*", seg, re.I) for w in words(seg)]


def api_names(project: Project, names: list[str]) -> dict[str, str]:
    """The tool name of each API product; where two would be named alike (get and list of one
    thing), both keep their operation's every word (copilot_spaces_get_for_org), and what still
    collides ends with its table's name."""
    out: dict[str, str] = {}
    given = {n for n in names if (t := project.config.products[n].tool) and t.name}
    for name in names:
        p = project.config.products[name]
        out[name] = p.tool.name if name in given and p.tool and p.tool.name else api_tool_name(
            p, operation_in(project, name), project.source_name(name))

    def rename(how: Callable[[str], str]) -> None:
        """Each product whose tool shares its name with another's (a clash of names given in
        tether.yaml is the person's to mend) renamed by ``how``."""
        count = Counter(out.values())
        for name in [n for n in names if count[out[n]] > 1 and n not in given]:
            out[name] = how(name)[:MAX_NAME]

    rename(lambda n: "_".join(words(project.config.products[n].table or n)))
    rename(lambda n: f"{out[n][:40]}_{safe_name(n)}")
    return out


def first_sentence(text: object, limit: int = MAX_CHARS) -> str:
    """The first sentence of a spec's words, cleaned (no markup, no hidden characters) and at
    most ``limit`` characters, without its period; empty when there are no words."""
    first = split_sentences(clean(text, 10 * limit))[:1]
    return clean(first[0], limit).rstrip(".") if first else ""


def shared_data(ctx: Ctx, name: str) -> bool:
    """Every caller reads the same rows: one shared credential (a sample then shows what any
    caller would see)."""
    return shared_credential(ctx.project, name)


def shared_credential(project: Project, name: str) -> bool:
    """Whether an API product is read with one credential for every caller (none, or
    ``env:VAR``); with each caller's own, a sample is the sampling user's rows."""
    auth = project.config.sources[project.source_name(name)].auth
    return auth is None or auth.credential.startswith("env:")


def _unit_unsampled(c: ColumnProfile) -> bool:
    """A unit tether.yaml, the glossary or the name gives (``name; every row's ...`` read the
    rows)."""
    said = c.unit_evidence or ""
    return said in ("config", "glossary", "name") or said.startswith("config;")


def unsampled(profile: ProductProfile) -> ProductProfile:
    """``profile`` less everything its sample saw: each column's name and type, and a unit
    tether.yaml, the glossary or the column's name gives. What a tool says of an API read with
    each caller's own credential (the sample is one user's rows: their values, ranges, counts
    and which documented values they never held are told to no one)."""
    columns = [ColumnProfile(column=c.column, unit_hint=c.unit_hint, unit_evidence=c.unit_evidence)
               if _unit_unsampled(c) else ColumnProfile(column=c.column)
               for c in profile.columns]
    return profile.model_copy(update={"columns": columns, "row_count": 0, "as_of": None})


def key_field(op: Operation, param: str) -> str | None:
    """The field of a row a parameter names by its words' tail (ticket_id -> id, invoiceNumber
    -> number): what a path parameter picks the row by."""
    fields = [str(f) for f in (op.item.get("properties") or {})]
    pw = words(param)
    for f in sorted(fields, key=lambda f: -len(words(f))):
        fw = words(f)
        if fw and pw[-len(fw):] == fw:
            return f
    return None


def _param_schema(raw: dict[str, Any], description: str | None,
                  seen: ColumnProfile | None, public: bool, key: tuple[str, str | None,
                  str | None] | None = None) -> dict[str, Any]:
    schema = {k: raw[k] for k in SPEC_KEYS if k in raw}
    if "type" not in schema:
        schema["type"] = "string"
    if isinstance(schema.get("type"), list):  # 3.1 ["string", "null"]: an argument is given
        schema["type"] = next((t for t in schema["type"] if t != "null"), "string")
    if schema["type"] == "array" and isinstance(raw.get("items"), dict):
        schema["items"] = {k: raw["items"][k] for k in SPEC_KEYS if k in raw["items"]}
    notes = []
    if description and (said := first_sentence(description, 200)):
        notes.append(said)
    if schema.get("format") == "date-time":  # RFC 3339, as OpenAPI's format means
        notes.append("an ISO 8601 time with its UTC offset, e.g. 2026-05-01T00:00:00Z")
    elif schema.get("format") == "date":
        notes.append("an ISO 8601 date (YYYY-MM-DD), in the API's time zone")
    if key is not None:  # (field, scheme, pattern) of the row field it picks by
        field, scheme, pattern = key
        notes.append(f"the {field} of the row it picks" + (f", a {scheme} identifier"
                                                            if scheme else ""))
        if pattern and "pattern" not in schema and "enum" not in schema:
            schema["pattern"] = pattern
    if seen is not None and seen.enum and public and "enum" not in schema:
        notes.append("values seen: " + ", ".join(str(e.value) for e in seen.enum[:12]))
    if notes:
        schema["description"] = sentence("; ".join(notes))
    return schema


def api_tool(ctx: Ctx, name: str) -> GeneratedTool:
    p: ProductConfig = ctx.config.products[name]
    if p.sql is not None:
        raise ConfigError(f"product {name!r} reads an API: it takes `table: OPERATION`, not "
                          "`sql:`.", where=ctx.project.where("products", name, "sql"))
    op = operation_in(ctx.project, name)
    prof = ctx.profiles[name]
    cols = visible_columns(ctx, name)
    by_name = {c.column.name: c for c in prof.columns}
    public = shared_data(ctx, name)
    serve = ctx.config.serve
    max_rows = min(p.tool.max_rows if p.tool else 200, serve.max_result_rows)
    driven = op.paging.server_params()
    props: dict[str, Any] = {}
    args: dict[str, str] = {}
    required: list[str] = []
    for param in op.params:
        if param.name in driven:
            continue
        pname = safe_name(param.name)
        if pname in props or pname in ("limit", "cursor"):
            pname = f"{param.where}_{pname}"
        seen = by_name.get(param.name)
        field = key_field(op, param.name) if param.where == "path" else None
        key = None
        if field is not None:
            prof_field = by_name.get(field)
            pattern = (field_schema(op, field).get("pattern")
                       or (prof_field.pattern if prof_field is not None else None))
            scheme = p.identifiers.get(field)
            if pattern is None and scheme in ctx.config.identifier_schemes:
                pattern = ctx.config.identifier_schemes[scheme].pattern
            key = (field, scheme, pattern)
        props[pname] = _param_schema(param.schema, param.description, seen,
                                     public and not values_scoped(ctx.config, name, param.name),
                                     key)
        args[pname] = param.name
        if param.required and "default" not in param.schema:
            required.append(pname)
    paged = op.items is not None
    if paged:
        props["limit"] = {"type": "integer", "minimum": 1, "maximum": max_rows,
                          "default": min(50, max_rows)}
        props["cursor"] = {"type": "string", "description": "From next_cursor."}
    else:
        max_rows = 1
    rows = output_rows(ctx, name, cols)
    for c in cols:  # the spec's words on each field, where tether.yaml says nothing
        facts = p.columns.get(c.column.name)
        said = first_sentence(field_schema(op, c.column.name).get("description"), 160)
        if said and not (facts and facts.description) and c.column.name in rows:
            parts = [said]
            ours = str(rows[c.column.name].get("description") or "").rstrip(".")
            if ours:  # the unit, the scheme, the masks: what tether adds stays
                parts.append(ours[:1].lower() + ours[1:])
            rows[c.column.name]["description"] = sentence("; ".join(parts))
    out = envelope(rows, "The API response's Date header, else the time of the request.",
                   paged=paged)
    out["properties"].pop("total_rows", None)  # an API seldom says how many in all
    sentences = _sentences(ctx, name, p, op, prof.columns, max_rows, public)
    description, sources = join_sentences(sentences)
    spec = spec_of(ctx.project, ctx.project.source_name(name))
    src_cfg = ctx.config.sources[ctx.project.source_name(name)]
    server = next((s for s in spec.servers if s.startswith(("http://", "https://"))), None)
    plan_request = op.plan() | {
        "server": server,  # where requests go when tether.yaml names no base_url
        "scheme": scheme_of(ctx.project.source_name(name), src_cfg, spec.schemes),
        "args": args,
        "columns": [{"name": c.column.name, "type": c.column.type, "kind": c.column.kind}
                    for c in prof.columns if not c.column.nested]}
    units = column_units(p, cols)
    plan = QueryPlan(kind=API_KIND_NAME, product=name, source=ctx.project.source_name(name),
                     dialect="duckdb", max_rows=max_rows, default_rows=min(50, max_rows),
                     masks_apply_to=name, units=units,
                     output_fields=[c.column.name for c in cols if not c.column.nested],
                     request=plan_request)
    meta = tool_meta(ctx, API_KIND_NAME, sentences, sources, [name], source_of_truth={},
                     canonical_ids={}, deprecated={},
                     limits={"max_rows": max_rows, "pagination": "cursor" if paged else "none"})
    if not public:  # described from the spec alone (generate.py reads the profile unsampled)
        context = context_slot(meta)
        context["generated_from"] = [s for s in context["generated_from"] if s != "samples"]
    schema = closed(props)
    if required:
        schema["required"] = required
    title = clean(op.summary, NAME_CHARS).rstrip(".") or None
    return GeneratedTool(name=ctx.tool_names[name], title=title, description=description,
                         input_schema=schema, output_schema=out, annotations=dict(READ_ONLY),
                         meta=meta, plan=plan)


def _sentences(ctx: Ctx, name: str, p: ProductConfig, op: Operation,
               cols: list[ColumnProfile], max_rows: int, public: bool) -> list[Sentence]:
    out: list[Sentence] = []
    said: list[str] = []
    for text, what in ((op.summary, "summary"), (op.description, "description")):
        first = first_sentence(text)
        if first and first.lower() not in said:  # quoted: the spec's words, never tether's
            out.append(Sentence(text=sentence(quote(first, SPEAKERS[f"openapi_{what}"])),
                                source="openapi"))
            said.append(first.lower())
    read = f"read live from {op.method.upper()} {op.path}"
    if op.items is None:
        scope = (f"Read-only: at most 1 row per call (0 rows when none matches), no "
                 f"pagination; {read}")
    else:
        noun = grain_noun(p.grain, "item")
        scope = f"Read-only: one row per {noun}, at most {max_rows} rows a call, {read}"
    out.insert(min(1, len(out)), Sentence(text=sentence(scope), source="openapi"))
    if p.description:
        source, origin = ctx.said("schema", "products", name, "description")
        out.append(Sentence(text=sentence(p.description), source=source, origin=origin))
    own = not public
    out.append(Sentence(text=sentence(
        "Each caller reads with their own API credential: rows are what that credential may "
        "see" if own else "Read with the project's shared API credential"), source="policy"))
    if op.paging.kind != "none":
        out.append(Sentence(text=sentence(
            f"The server follows the API's pages ({PAGING_WORDS[op.paging.kind]}); pass "
            "next_cursor for more"), source="openapi"))
    if 429 in op.retry_statuses:
        out.append(Sentence(text=sentence(
            "The API limits its request rate: the server waits as it asks (Retry-After) and "
            "says so when it cannot"), source="openapi"))
    for c in cols:  # a documented value no sample held (the values are the spec's, public)
        documented = field_schema(op, c.column.name).get("enum")
        if not documented or c.non_null_count == 0:
            continue
        held = {str(v.value) for v in (c.enum or c.top_values)}
        never = [repr(str(v)) for v in documented if str(v) not in held]
        if never and len(never) < len(documented) and (c.enum is not None or len(held) < len(
                documented)):
            out.append(Sentence(text=sentence(
                f"{c.column.name} {join_words(never, 'and')} "
                f"{'is' if len(never) == 1 else 'are'} documented, but no sampled response "
                f"held {'it' if len(never) == 1 else 'them'}"), source="samples"))
    for note in p.notes:
        source, origin = note_said(ctx.project, "glossary", note, "products", name, "notes")
        out.append(Sentence(text=sentence(note), source=source, origin=origin))
    pol = policy_sentence(ctx, name)
    if pol is not None:
        out.append(pol)
    return out


def _generate(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    return [api_tool(ctx, n) for n in ctx.config.products
            if n in ctx.profiles and api_product(ctx.config, n)]


API_KIND = register(Kind(API_KIND_NAME, generate=_generate, listing=True, searchable=True,
                             bare="get"))
