"""`cases.jsonl`: one evaluation case per line, with exactly the fields of the evaluation article.

Extensions: ``gold.definition_sql`` holds the governed predicate for machine
comparison; ``gold.side_effects`` the rows a write case must change (and how), or ``[]`` for a
case where nothing may be written; the failure class ``transition`` is a move of a status no
action allows, attempted. ``label`` and ``cost`` may be null (cases with gold only). A bad line (not UTF-8
text, not JSON, not a valid case) is reported with its line number and field, and the valid lines
still load; a file that is not text at all is refused whole (see :func:`load_cases`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.textfiles import JSONProblem, decode_text, parse_json, read_bytes, text_problem

FailureClass = Literal["entity", "semantic", "structural", "temporal", "policy", "transition"]
FAILURE_CLASSES: tuple[str, ...] = ("entity", "semantic", "structural", "temporal", "policy")
"""The classes every report counts; ``transition`` (write cases) is counted where it occurs."""
_BOM = b"\xef\xbb\xbf"
MAX_CASES_BYTES = 64 * 1024 * 1024
"""Largest cases file read (64 MiB: about 100,000 cases of the article's size)."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Window(_M):
    start: dt.date = Field(description="First day of the window, inclusive.")
    end: dt.date = Field(description="Last day of the window, inclusive.")
    calendar: Literal["fiscal", "calendar"] = Field(
        default="calendar", description="Which calendar the question's period is in.")


class SideEffect(_M):
    """One row a write case must leave changed: which, and the values it must hold after."""

    product: str = Field(min_length=1, description="The data product (its table) written.")
    key: dict[str, Any] = Field(description="The row's primary key, column -> value.")
    after: dict[str, Any] = Field(description="Column -> the value it must hold after.")


class Gold(_M):
    answer: Any = Field(description="number | string | array (a list of values or of rows).")
    tolerance: float = Field(default=0, ge=0, description="Absolute tolerance for numbers.")
    required_fields: list[str] = Field(
        default_factory=list, description="table.column or tool.argument the answer needs.")
    forbidden_fields: list[str] = Field(
        default_factory=list, description="Fields whose use marks the call ungrounded.")
    definition: str | None = Field(
        default=None, description="The governed predicate for each business term, in prose.")
    definition_sql: str | None = Field(
        default=None, description="Extension: the governed predicate as SQL, for machine "
        "comparison. When absent the labeller resolves a glossary term named in `definition`.")
    window: Window | None = Field(default=None, description="The period the question means.")
    freshness_bound_hours: float | None = Field(
        default=None, description="Every result's as_of must be within this many hours of the "
        "run; null when not applicable.")
    policy_scope: str | None = Field(
        default=None, description="The entitlement the oracle checks against.")
    side_effects: list[SideEffect] | None = Field(
        default=None, description="Extension, for a write case: the rows the case must change "
        "and their values after (every other row unchanged); [] when nothing may be written "
        "(the right answer declines). null: a case that only reads.")


class Label(_M):
    correct: bool | None = None
    grounded: bool | None = None
    failure_class: FailureClass | None = None
    note: str | None = None


class Cost(_M):
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    turns: int = 0
    usd: float = 0.0


class Case(_M):
    case_id: str = Field(min_length=1, description="Unique.")
    source_trace: str | None = Field(default=None, description="The trace this came from.")
    user_role: str = Field(description="The role the case is asked in.")
    as_user: str = Field(min_length=1, description="The identity the runner impersonates.")
    question: str = Field(min_length=1, description="The user's words, unedited.")
    gold: Gold
    label: Label | None = None
    cost: Cost | None = None


@dataclass
class CaseError:
    path: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


@dataclass
class CaseSet:
    cases: list[Case] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # case_id -> line number


def load_cases(path: Path) -> CaseSet:
    """Every valid case in the file; each bad line becomes a CaseError naming line and field.

    A line that is not UTF-8 text (binary garbage), not JSON or not a valid case is skipped and
    named. A file that is not text at all (a binary or compressed file, UTF-16: some line is not
    UTF-8 text and not one line is JSON) is a ConfigError, as is a directory or a missing file:
    the caller then runs nothing."""
    what = "the cases file"
    hint = "cases.jsonl is UTF-8 text, one JSON case per line (docs/eval.md)."
    data = read_bytes(path, what, hint=hint, max_bytes=MAX_CASES_BYTES)
    out = CaseSet()
    json_lines = 0
    for n, raw_bytes in enumerate(data.splitlines(), start=1):  # \n, \r\n or \r only
        if n == 1 and raw_bytes.startswith(_BOM):
            raw_bytes = raw_bytes[len(_BOM):]
        problem = text_problem(raw_bytes)
        if problem is not None:
            offset, byte, _ = problem
            out.errors.append(CaseError(str(path), n, "", f"not UTF-8 text: byte {offset} of "
                                        f"the line is {byte}"))
            continue
        raw = raw_bytes.decode("utf-8")
        if not raw.strip() or raw.lstrip().startswith("//"):
            continue
        try:  # not JSON, nested deeper than tether reads, a 5,000-digit number: this line's
            obj = parse_json(raw, one_line=True)
        except JSONProblem as p:
            out.errors.append(CaseError(str(path), n, "", f"not JSON ({p.detail})"
                                        if p.kind == "syntax" else f"not readable JSON: it "
                                        f"{p.reason}"))
            continue
        json_lines += 1
        try:
            case = Case.model_validate(obj)
        except ValidationError as e:
            for err in e.errors():
                loc = ".".join(str(p) for p in err["loc"])
                msg = "unknown field (see schemas/cases.schema.json)" \
                    if err["type"] == "extra_forbidden" else err["msg"]
                cid = obj.get("case_id") if isinstance(obj, dict) else None
                out.errors.append(CaseError(str(path), n, loc,
                                            f"{msg}" + (f" (case {cid!r})" if cid else "")))
            continue
        if case.case_id in out.lines:
            out.errors.append(CaseError(str(path), n, "case_id",
                                        f"duplicate case_id {case.case_id!r} (first on line "
                                        f"{out.lines[case.case_id]}); this line is skipped"))
            continue
        out.lines[case.case_id] = n
        out.cases.append(case)
    whole = text_problem(data)
    if whole is not None and json_lines == 0:  # nothing in it is text: refuse the file
        decode_text(data, path, what, hint=hint)  # raises, naming the first bad byte and line
    return out


def json_schema() -> dict[str, Any]:
    schema = Case.model_json_schema()
    schema["$id"] = "https://tether.dev/schemas/cases.schema.json"
    schema["title"] = "tether evaluation case (one line of cases.jsonl)"
    return schema
