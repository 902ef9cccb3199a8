"""What learn proposes, and how a rule that proposes it is registered.

A proposal is one sentence added to one place: the notes of a product (its tool's description)
or of one of its columns (that parameter's description). That is all learn ever writes: never a
governed definition, a policy, a unit or a type (the learn layer refuses anything else when it
is read, layers/model.py). Each proposal carries its evidence: how many calls or cases support
it, the newest of them, and a sample as the console shows calls.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Status = Literal["open", "applied", "dismissed"]
Input = Literal["calls", "runs"]
Output = Literal["product_notes", "column_notes"]

MIN_SUPPORT = 3
"""Fewest calls that make a pattern of the call log (one call is an accident)."""
MIN_CASES = 1
"""Fewest labelled cases behind a proposal from evaluation runs. A labelled failure is a judged
one (the question, its gold answer and what went wrong), unlike one call among thousands, so
one is worth a reviewer's look; the proposal says its support, and the rules read only cases
that were not both correct and grounded."""
SAMPLE = 5
"""Calls or cases kept as a proposal's sample."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Seen(_M):
    """One call or case that supports a proposal, as the console shows a call."""

    at: str | None = Field(default=None, description="When it was called (UTC, ISO 8601).")
    user: str | None = Field(default=None, description="Who called.")
    tool: str = Field(description="The tool called.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="As given.")
    rows: int | None = Field(default=None, description="Rows returned (None: an error).")
    latency_ms: float | None = Field(default=None, description="How long the call took.")
    error: str | None = Field(default=None, description="The error's first line, if any.")
    case_id: str | None = Field(default=None, description="The evaluation case, for a run.")
    run: str | None = Field(default=None, description="The run folder, for a run.")
    said: str | None = Field(default=None, description="What the labeller or server noted.")


class Change(_M):
    """The exact change: one sentence appended to the notes at ``path`` in tether.yaml's
    shape (``products.P.notes`` or ``products.P.columns.C.notes``)."""

    path: list[str] = Field(description="Key path of the notes list.")
    sentence: str = Field(description="The sentence added, as the description will say it.")

    @field_validator("path")
    @classmethod
    def _notes_only(cls, v: list[str]) -> list[str]:
        # a product's notes or a column's, nothing else a proposal could write
        if not (v and v[0] == "products" and v[-1] == "notes" and len(v) in (3, 5)
                and (len(v) == 3 or v[2] == "columns") and all(v)):
            raise ValueError("a change writes products.P.notes or products.P.columns.C.notes")
        return v

    @field_validator("sentence")
    @classmethod
    def _one_sentence(cls, v: str) -> str:
        if not v.strip() or len(v) > 600:
            raise ValueError("a change is one sentence of at most 600 characters")
        return v

    @property
    def product(self) -> str:
        return self.path[1]

    @property
    def column(self) -> str | None:
        return self.path[3] if len(self.path) == 5 else None

    def where(self) -> str:
        return ".".join(self.path)


class Proposal(_M):
    id: int | None = Field(default=None, description="Its id in the registry.")
    rule: str = Field(description="The rule that proposed it.")
    subject: str = Field(description="What it is about, within the rule (a parameter, a "
                         "combination of arguments, a failure class): with the rule and the "
                         "place, its identity across runs of learn.")
    tool: str = Field(description="The tool whose description changes.")
    summary: str = Field(description="One line for a reviewer: what was seen.")
    change: Change
    support: int = Field(description="How many calls or cases support it.")
    newest: str = Field(description="The newest supporting call's time (or run's).")
    sample: list[Seen] = Field(default_factory=list)
    status: Status = "open"
    dismissed_at_newest: str | None = Field(
        default=None, description="The newest evidence when it was dismissed: it comes back "
        "only with evidence newer than this.")
    decided_by: str | None = None
    publication: int | None = Field(default=None, description="The publication that applied "
                                    "it.")
    outcome: str | None = Field(default=None, description="What the check pass that applied "
                                "it did with the tool: published, waiting, blocked, nothing.")
    report: dict[str, Any] | None = Field(default=None, description="The regression suite's "
                                          "metrics before and after it was applied.")

    @property
    def key(self) -> str:
        """Identity across runs of learn: the rule, the place and the subject (not the
        counts, which grow with the evidence)."""
        text = "\x1f".join([self.rule, *self.change.path, self.subject])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def product(self) -> str:
        return self.change.product


def quoted(value: Any) -> str:
    """A value as a sentence shows it: text in quotes, a list as its items."""
    if isinstance(value, list):
        return ", ".join(quoted(v) for v in value)
    return f'"{value}"' if isinstance(value, str) else str(value)
