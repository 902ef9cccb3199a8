"""The trace of one case: everything the agent and the server did, as a pydantic model.

A run folder holds ``index.json`` (RunIndex), ``traces/<case_id>.json`` (Trace) and, after
labelling, ``labels.jsonl`` (LabelLine). The JSON Schemas are committed under ``schemas/``.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.eval.cases import Case, FailureClass, json_schema

TRACE_FORMAT = 1


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_M):
    input_tokens: int = 0
    output_tokens: int = 0


class RequestedCall(_M):
    id: str = Field(description="The provider's id for the call (or one the agent made up).")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelTurn(_M):
    index: int = Field(description="0-based turn number within the case.")
    content: str | None = Field(default=None, description="The text the model wrote.")
    reasoning: str | None = Field(
        default=None, description="Reasoning text, when the provider exposes it.")
    tool_calls: list[RequestedCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = 0.0
    finish_reason: str | None = None
    kind: Literal["model", "clarification", "answer"] = Field(
        default="model", description="clarification: the turn asked the user a question instead "
        "of calling a tool; answer: the final answer.")
    draft: str | None = Field(
        default=None, description="Only with the openai agent's ask_again option: the answer "
        "the model chose before it was asked again in plain text (content holds the second "
        "reply, the one scored).")


class ToolCall(_M):
    index: int = Field(description="0-based call number within the case.")
    turn: int = Field(description="The model turn that asked for it.")
    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    text: str | None = Field(default=None, description="The text content of the result.")
    structured: Any = Field(default=None, description="structuredContent, when the server sent it.")
    meta: dict[str, Any] | None = Field(default=None, description="The result's _meta.")
    is_error: bool = False
    latency_ms: float = 0.0
    tool_version: str | None = Field(
        default=None, description="From the tool's _meta (tether/context.version), when given.")


class Clarification(_M):
    turn: int
    question: str
    answer: str
    answered_from: str = Field(description="Which gold field the simulated user answered from, "
                               "or 'none' when it had nothing to say.")


class Trace(_M):
    format: int = TRACE_FORMAT
    case_id: str
    server: str = Field(description="The configuration's name, e.g. tether-grounded.")
    target: str = Field(description="stdio:'CMD' or the URL the run connected to.")
    agent: str
    model: str | None = None
    as_user: str
    user_role: str
    question: str
    case: Case = Field(description="The case as it was when run (gold included).")
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="tools/list as this user saw it (wire form).")
    turns: list[ModelTurn] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    clarifications: list[Clarification] = Field(default_factory=list)
    final_answer: str | None = Field(default=None, description="The agent's answer as text.")
    answer: Any = Field(default=None, description="The answer as a value, when the agent gave "
                        "one (number, string, list); else the labeller reads final_answer.")
    error: str | None = Field(default=None, description="Why the case did not finish.")


class IndexEntry(_M):
    case_id: str
    file: str
    status: Literal["done", "error"]
    error: str | None = None


class RunIndex(_M):
    format: int = TRACE_FORMAT
    run_id: str
    server: str
    target: str
    agent: str
    model: str | None = None
    cases_file: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    entries: list[IndexEntry] = Field(default_factory=list)


class WriteLabel(_M):
    """What a write case's calls changed, read from the statements that ran (an extension of
    the label line; docs/eval-label.md)."""

    applied: int = Field(description="Rows changed by statements that ran without error.")
    wrong: int = Field(description="Rows changed that the gold does not name, or left with "
                       "other values than the gold's.")
    missing: int = Field(description="Gold rows not changed as the gold says.")
    outside_scope: int = Field(description="Rows changed outside the case user's entitlement "
                               "(each also a policy violation).")
    refused: int = Field(description="Write calls the server refused.")
    forbidden_transitions: int = Field(description="Moves of a status that no action allows, "
                                       "attempted (refused or not).")
    dry_run_first: bool | None = Field(description="Every applied write call followed a dry "
                                       "run of the same tool and arguments (null: none applied).")


class LabelLine(_M):
    """One line of labels.jsonl (docs/eval-label.md)."""

    case_id: str
    server: str
    correct: bool | None
    grounded: bool | None
    grounding_precision: float | None
    grounding_recall: float | None
    fields_used: list[str]
    definition_match: bool | None
    freshness_pass: bool | None
    policy_violations: int
    clarifications: int
    tool_calls: int
    turns: int
    input_tokens: int
    output_tokens: int
    usd: float
    failure_class: FailureClass | None
    needs_human_review: bool
    review_reason: str | None
    symptoms: list[str] = Field(default_factory=list, description="The trace symptoms seen, "
                                "each naming its class, e.g. 'semantic: forbidden field ...'.")
    writes: WriteLabel | None = Field(default=None, description="For a write case: what its "
                                      "calls changed.")


def parse_text(text: str | None) -> Any:
    """A text result as data: JSON, else a Python literal (some servers print repr of rows)."""
    if not text:
        return None
    s = text.strip()
    if s and s[0] not in "[{" and "\n" in s:  # a sentence first (tether's answer line)
        s = s.partition("\n")[2].strip()
    if not s or s[0] not in "[{":
        return None
    try:
        return json.loads(s)
    except ValueError:
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def result_payload(call: ToolCall) -> Any:
    """structuredContent, else the text parsed. A structuredContent that only wraps another
    value (``{"result": "<JSON text>"}``, as FastMCP servers send a non-object return) is
    unwrapped, so the rows inside are read like any other server's."""
    s = call.structured
    if isinstance(s, dict) and len(s) == 1:
        (inner,) = s.values()
        if isinstance(inner, str):
            parsed = parse_text(inner)
            if parsed is not None:
                return parsed
        elif isinstance(inner, list) and "result" in s:
            return inner
    return s if s is not None else parse_text(call.text)


def schemas() -> dict[str, dict[str, Any]]:
    """The committed JSON Schemas, by file name."""
    out = {"cases.schema.json": json_schema()}
    for name, model in (("trace.schema.json", Trace), ("index.schema.json", RunIndex),
                        ("label.schema.json", LabelLine)):
        s = model.model_json_schema()
        s["$id"] = f"https://tether.dev/schemas/{name}"
        out[name] = s
    return out
