"""The core model: plain pydantic, no I/O."""

from tether.context.profile import ColumnProfile, EnumValue, ProductProfile, ValueCount
from tether.context.schema import Column, TypeKind

__all__ = ["Column", "ColumnProfile", "EnumValue", "ProductProfile", "TypeKind", "ValueCount"]
