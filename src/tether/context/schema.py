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

    def leaves(self) -> list[Column]:
        """This column, or for a STRUCT its scalar leaf fields (for per-field profiling)."""
        if self.kind != "struct":
            return [self]
        out: list[Column] = []
        for c in self.children:
            out.extend(c.leaves())
        return out
