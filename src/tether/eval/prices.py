"""The price table: USD per million input and output tokens, by model name (glob).

A local model costs nothing to run, so it is priced as a small hosted model would be
(CONTRACTS.md): $0.10 per million input tokens and $0.40 per million output tokens, unless the
table says otherwise. The file (``eval.price_table`` in tether.yaml) is YAML::

    default: {input_per_million: 0.10, output_per_million: 0.40}
    models:
      "gpt-4o-mini*": {input_per_million: 0.15, output_per_million: 0.60}
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.errors import ConfigError


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


DEFAULT_PRICE = Price(input_per_million=0.10, output_per_million=0.40)


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default: Price = DEFAULT_PRICE
    models: dict[str, Price] = Field(default_factory=dict)

    def price(self, model: str | None) -> Price:
        for pattern, p in self.models.items():
            if model and fnmatchcase(model, pattern):
                return p
        return self.default

    def usd(self, model: str | None, input_tokens: int, output_tokens: int) -> float:
        p = self.price(model)
        return (input_tokens * p.input_per_million + output_tokens * p.output_per_million) / 1e6

    def statement(self) -> str:
        d = self.default
        return (f"default ${d.input_per_million:.2f} per million input tokens, "
                f"${d.output_per_million:.2f} per million output tokens"
                + (f"; {len(self.models)} model-specific prices" if self.models else ""))


def load_prices(path: Path | None) -> PriceTable:
    if path is None:
        return PriceTable()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return PriceTable.model_validate(data)
    except FileNotFoundError:
        raise ConfigError(f"price table {str(path)!r} not found.",
                          hint="Give an existing file or drop eval.price_table.") from None
    except (yaml.YAMLError, ValidationError) as e:
        raise ConfigError(f"price table {str(path)!r} is not valid: {e}".splitlines()[0],
                          where=str(path),
                          hint="Expected {default: {input_per_million, output_per_million}, "
                          "models: {GLOB: {...}}}.") from None
