"""The core model: plain pydantic, no I/O."""

from tether.context.schema import Column, TypeKind
from tether.context.profile import ColumnProfile, EnumValue, ProductProfile, ValueCount

__all__ = ["Column", "ColumnProfile", "EnumValue", "ProductProfile", "TypeKind", "ValueCount"]
