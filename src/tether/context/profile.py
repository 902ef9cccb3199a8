"""What profiling learned about a data product."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tether.context.schema import Column


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ValueCount(_M):
    value: Any = Field(description="An observed value.")
    count: int = Field(description="Rows holding it.")
    last_seen: datetime | None = Field(
        default=None, description="Newest timestamp (the product's metric time) it appears at."
    )


class EnumValue(ValueCount):
    deprecated: bool = Field(
        default=False, description="Not seen within profiling.dormant_after_days of the clock."
    )


class ColumnProfile(_M):
    column: Column = Field(description="Name, type, nullability, nested fields.")
    non_null_count: int = Field(default=0, description="Rows where the value is not NULL.")
    null_fraction: float | None = Field(default=None, description="Share of rows that are NULL.")
    distinct_count: int | None = Field(default=None, description="Distinct non-null values.")
    distinct_exact: bool = Field(default=False, description="True when distinct_count is exact.")
    min: Any = Field(default=None, description="Smallest value.")
    max: Any = Field(default=None, description="Largest value.")
    top_values: list[ValueCount] = Field(
        default_factory=list, description="Most frequent values (low-cardinality columns only)."
    )
    enum: list[EnumValue] | None = Field(
        default=None, description="Every observed value, when the column is an enum candidate."
    )
    nearly_unique: bool = Field(
        default=False, description="Too varied for an enum, its values mostly occurring once: "
        "no value counts were taken (the probe samples its first values instead).")
    formats: list[str] = Field(
        default_factory=list,
        description="Formats every non-null value fits: date, datetime_midnight_utc, uuid, email, "
        "currency_code.",
    )
    pattern: str | None = Field(
        default=None, description="A shape every value fits, checked in the engine (key columns "
        "and identifier-named text columns without a declared scheme): ^[A-Z0-9]{3}$.")
    never_negative: bool | None = Field(default=None, description="Numeric and min >= 0.")
    unit_hint: str | None = Field(default=None, description="cents, currency, ... where evident.")
    unit_evidence: str | None = Field(
        default=None, description="Where the unit hint came from: config, name, values, glossary."
    )


class ProductProfile(_M):
    product: str = Field(description="Data product name.")
    source: str = Field(description="Source name.")
    relation: str = Field(description="The table or SQL the product reads.")
    row_count: int = Field(description="Rows in the product.")
    fingerprint: str = Field(description="sha256 of the canonical schema (schema only, not rows).")
    timestamp_column: str | None = Field(
        default=None, description="Column used for last-seen per enum value."
    )
    profiled_at: datetime = Field(description="The project clock when profiled.")
    as_of: datetime | None = Field(
        default=None, description="Newest value of the product's freshness column, if it has one."
    )
    columns: list[ColumnProfile] = Field(description="One entry per column and nested field.")

    def column(self, name: str) -> ColumnProfile:
        for c in self.columns:
            if c.column.name == name:
                return c
        raise KeyError(name)
