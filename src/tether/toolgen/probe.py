"""The probe kind: one tool that explains any data product (progressive disclosure)."""

from __future__ import annotations

from tether.context.config_model import api_product
from tether.policy import restricted_columns
from tether.toolgen.describe import (
    join_words,
    sentence,
)
from tether.toolgen.discovery import PROBE, product_param
from tether.toolgen.kinds import Kind, register
from tether.toolgen.model import (
    READ_ONLY,
    GeneratedTool,
    QueryPlan,
    Sentence,
    join_sentences,
)
from tether.toolgen.shared import (
    Ctx,
    closed,
    tool_meta,
)

NOT_AVAILABLE = "Not available to anyone through this server:"
"""How the probe's description opens its one sentence naming the restricted columns (the only
place a definition names them; the gate reads fields, never this sentence)."""


def restricted_fields(ctx: Ctx) -> list[str]:
    """``product.column`` of every restricted column (or STRUCT field) the profiles hold."""
    out = []
    for name in sorted(ctx.profiles):
        leaves = [c.column.name for c in ctx.profiles[name].columns]
        out += [f"{name}.{c}" for c in sorted(restricted_columns(ctx.config, name, leaves))]
    return out


def probe_tool(ctx: Ctx) -> GeneratedTool:
    # an API's rows are each caller's own: its sampled values are no product to explain
    products = sorted(p for p in ctx.profiles if not api_product(ctx.config, p))
    parts = ["every column with its type, meaning and sample values"]
    if ctx.config.glossary:  # only what this project has to tell
        parts.append("the glossary terms that govern it")
    if ctx.config.lineage:
        parts.append("its upstream lineage")
    sentences = [
        Sentence(text=sentence(
            f"Explains one data product on request: {join_words(parts)}; use it when a "
            "field's meaning is unclear, before the other tools"), source="schema"),
        Sentence(text=sentence(
            "No amounts, units are given per column; read-only, at most 1 product per call, "
            "no pagination, restricted columns are never listed"), source="policy"),
    ]
    hidden = restricted_fields(ctx)
    if hidden:  # the one place they are named: so a model declines instead of inventing
        sentences.append(Sentence(text=sentence(
            f"{NOT_AVAILABLE} {join_words(hidden)}; asking for one is refused"),
            source="policy"))
    description, sources = join_sentences(sentences)
    column = {"type": "object", "properties": {
        "name": {"type": "string"}, "type": {"type": "string"},
        "description": {"type": ["string", "null"]}, "unit": {"type": ["string", "null"]},
        "values": {"type": "array"},
        "mask": {"enum": ["redact", "hash", "null"]},
    }}
    out = {
        "type": "object",
        "properties": {
            "product": {"type": "string"},
            "grain": {"type": ["string", "null"]},
            "row_count": {"type": "integer", "description": "Unit: rows."},
            "columns": {"type": "array", "items": column},
            "definitions": {"type": "array", "description": "Glossary terms governing it."},
            "lineage": {"type": "array", "description": "Upstream edges."},
            "as_of": {"type": ["string", "null"], "format": "date-time"},
            "query_with": {"type": ["object", "null"], "description": "The tool that reads "
                           "its rows and that tool's arguments.", "properties": {
                               "tool": {"type": "string"}, "product": {"type": "string"},
                               "arguments": {"type": "object", "additionalProperties": True,
                                             "description": "Each argument's JSON Schema."}}},
        },
    }
    props = {"product": product_param(products, "Data product to explain.")}
    meta = tool_meta(ctx, "probe", sentences, sources, products, canonical_ids={}, deprecated={},
                     source_of_truth={}, limits={"max_rows": 1, "pagination": "none"},
                     upstream=False)
    return GeneratedTool(name=PROBE, title="What does this data product contain and mean?",
                         description=description,
                         input_schema={**closed(props), "required": ["product"]},
                         output_schema=out, annotations=dict(READ_ONLY), meta=meta,
                         plan=QueryPlan(kind="probe"))


def _generate(ctx: Ctx, before: list[GeneratedTool]) -> list[GeneratedTool]:
    return [probe_tool(ctx)]


PROBE_KIND = register(Kind("probe", generate=_generate, discovery=True, narrowed="products"))
