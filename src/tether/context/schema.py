"""A relation's schema as tether sees it, independent of the engine."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TypeKind = Literal[
    "string", "integer", "decimal", "float", "boolean", "date", "timestamp", "timestamptz",
    "time", "interval", "uuid", "json", "struct", "list", "map", "binary", "other",
]


class Column(BaseModel):
    """One column (or nested field) of a relation."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Column name; nested fields are named parent.child.")
    type: str = Field(description="The engine's own type name, upper case.")
    kind: TypeKind = Field(description="Engine-independent kind of the type.")
    nullable: bool = Field(description="False when the engine guarantees no NULLs.")
    children: list[Column] = Field(
        default_factory=list, description="Fields of a STRUCT, element of a LIST."
    )
    path: list[str] = Field(
        default_factory=list,
        description="For a nested field, the identifiers from its top-level column down "
        "(``[a, b]`` for ``a.b``); empty for a top-level column, whose name is one identifier "
        "whatever it holds (dots too).",
    )

    @property
    def nested(self) -> bool:
        """Whether this is a field inside a STRUCT (the engine says so), not a column."""
        return bool(self.path)

    @property
    def head(self) -> str:
        """The top-level column this is or belongs to."""
        return self.path[0] if self.path else self.name

    @property
    def parts(self) -> list[str]:
        """The identifiers that reach it: ``[name]`` for a column, the path for a field."""
        return list(self.path) or [self.name]

    def leaves(self) -> list[Column]:
        """This column, or for a STRUCT its scalar leaf fields (for per-field profiling)."""
        if self.kind != "struct":
            return [self]
        out: list[Column] = []
        for c in self.children:
            out.extend(c.leaves())
        return out
