"""The price table: USD per million input and output tokens, by model name (glob).

A local model costs nothing to run, so it is priced as a small hosted model would be:
$0.10 per million input tokens and $0.40 per million output tokens, unless the
table says otherwise. The file (``eval.price_table`` in tether.yaml) is YAML::

    default: {input_per_million: 0.10, output_per_million: 0.40}
    models:
      "gpt-4o-mini*": {input_per_million: 0.15, output_per_million: 0.60}
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.errors import ConfigError
from tether.textfiles import load_yaml, read_text


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
    """The price table at ``path`` (the default table without one). A missing, directory, binary
    or non-UTF-8 file, invalid YAML or an alias bomb, or a wrong shape is a ConfigError naming
    the file (and line)."""
    if path is None:
        return PriceTable()
    if not path.exists():
        raise ConfigError(f"price table {str(path)!r} not found.",
                          hint="Give an existing file or drop eval.price_table.")
    text = read_text(path, "the price table", hint=_SHAPE)
    data = load_yaml(text, str(path), hint=_SHAPE) or {}
    try:
        return PriceTable.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise ConfigError(f"price table {str(path)!r} is not valid: {loc}: {first['msg']}.",
                          where=str(path), hint=_SHAPE) from None


_SHAPE = ("Expected {default: {input_per_million, output_per_million}, "
          "models: {GLOB: {...}}}.")
