"""Format and unit detection. Each format is a predicate the engine counts in the same scan."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.names import name_words
from tether.context.schema import TypeKind

# ISO 4217 active codes (2024). A column is a currency code only if every value is one.
ISO_4217 = frozenset(
    (
        "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN "
        "BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD "
        "FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY "
        "KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP "
        "MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR "
        "RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT "
        "TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW "
        "ZWL"
    ).split()
)

_UUID_RE = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_EMAIL_RE = "^[^@[:space:]]+@[^@[:space:]]+[.][^@[:space:]]+$"
_DATE_RE = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


@dataclass(frozen=True)
class FormatCheck:
    """A named format: the kinds it applies to, its SQL predicate per dialect (`:c` = column), and
    the same test in Python for one value. A format that does not fit a column's min and max
    cannot fit every value, so the engine only verifies formats plausible at both ends."""

    name: str
    kinds: frozenset[TypeKind]
    predicate: Callable[[str], str]
    plausible: Callable[[Any], bool]

    def condition(self, column: exp.Expr, dialect: str) -> exp.Expr:
        tmpl = _template(self.predicate(dialect), _read(dialect)).copy()
        return exp.replace_placeholders(tmpl, c=column)


@functools.lru_cache(maxsize=256)
def _template(sql: str, read: str) -> exp.Expr:
    """Parsed once per predicate and dialect; callers copy before filling in the column."""
    return sqlglot.parse_one(sql, read=read)


def _read(dialect: str) -> str:
    return "duckdb" if dialect == "duckdb" else "postgres"


def _regex(pattern: str) -> Callable[[str], str]:
    def pred(dialect: str) -> str:
        if dialect == "duckdb":
            return f"regexp_full_match(:c, '{pattern}')"
        return f":c ~ '{pattern}'"

    return pred


def email_predicate(dialect: str) -> str:
    """SQL (``:c`` for the column) that holds when a text value is an e-mail address."""
    return _regex(_EMAIL_RE)(dialect)


def _uuid(dialect: str) -> str:
    return "TRY_CAST(:c AS UUID) IS NOT NULL" if dialect == "duckdb" else _regex(_UUID_RE)(dialect)


def _currency(dialect: str) -> str:
    return ":c IN (" + ", ".join(f"'{c}'" for c in sorted(ISO_4217)) + ")"


def _midnight_utc(dialect: str) -> str:
    # compare in UTC whatever the session time zone is
    return "CAST((:c AT TIME ZONE 'UTC') AS TIME) = CAST('00:00:00' AS TIME)"


def _midnight(dialect: str) -> str:
    return "CAST(:c AS TIME) = CAST('00:00:00' AS TIME)"


def _fits(pattern: str) -> Callable[[Any], bool]:
    # the SQL patterns use POSIX classes; Python's re spells [:space:] as \s
    compiled = re.compile(pattern.replace("[:space:]", "\\s"))
    return lambda v: isinstance(v, str) and compiled.fullmatch(v) is not None


def _is_midnight_utc(v: Any) -> bool:
    return isinstance(v, dt.datetime) and v.tzinfo is not None and (
        v.astimezone(dt.UTC).time() == dt.time(0)
    )


def _is_midnight(v: Any) -> bool:
    return isinstance(v, dt.datetime) and v.time() == dt.time(0)


DEFAULT_FORMATS: tuple[FormatCheck, ...] = (
    FormatCheck("uuid", frozenset({"string"}), _uuid, _fits(_UUID_RE)),
    FormatCheck("email", frozenset({"string"}), _regex(_EMAIL_RE), _fits(_EMAIL_RE)),
    FormatCheck("currency_code", frozenset({"string"}), _currency, lambda v: v in ISO_4217),
    FormatCheck("date", frozenset({"string"}), _regex(_DATE_RE), _fits(_DATE_RE)),
    FormatCheck("datetime_midnight_utc", frozenset({"timestamptz"}), _midnight_utc,
                _is_midnight_utc),
    FormatCheck("datetime_midnight", frozenset({"timestamp"}), _midnight, _is_midnight),
)
"""Format checks, in the order reported. Callers may pass their own tuple."""


def native_formats(kind: TypeKind) -> list[str]:
    """Formats a column has by its type alone."""
    return {"date": ["date"], "uuid": ["uuid"]}.get(kind, [])


# --- units ---------------------------------------------------------------------------------------

_MONEY = frozenset({"amount", "amounts", "price", "prices", "revenue", "cost", "costs", "fee",
                    "fees", "balance", "mrr", "arr", "salary", "salaries", "pay", "wage",
                    "wages", "income", "payroll"})
_CODES = frozenset({"usd", "eur", "gbp", "jpy"})
# a token of time or of counting makes a money word mean something else (``arr_time`` is an
# arrival time, ``cost_count`` a count): no currency is claimed then
_NOT_MONEY = frozenset({"time", "times", "delay", "duration", "hour", "hours", "minute", "minutes",
                        "min", "mins", "second", "seconds", "day", "days", "date", "at", "year",
                        "month", "week", "count", "qty", "num", "number", "rate", "ratio", "pct",
                        "percent", "id", "code"})
_TOKEN_UNITS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"cents", "cent"}), "cents"),
    (frozenset({"pct", "percent", "percentage"}), "percent"),
    (frozenset({"seconds", "secs", "sec"}), "seconds"),
    (frozenset({"ms", "millis", "milliseconds"}), "milliseconds"),
    (frozenset({"minutes", "mins"}), "minutes"),
    (frozenset({"hours"}), "hours"),
    (frozenset({"days"}), "days"),
)


def unit_from_name(name: str) -> str | None:
    """A unit from a column name's whole words (split on ``_``), or None when the name does not
    say: ``amount_cents`` -> cents, ``price_usd`` -> USD, ``price`` -> currency,
    ``duration_seconds`` -> seconds, ``order_count`` -> count; ``arr_time`` -> None (a time
    word beside a money word), ``subtotal`` -> None (not a whole word). Words as
    context/names.py splits them (``feeUSD``: fee, usd)."""
    tokens = name_words(name.rsplit(".", 1)[-1])
    words = set(tokens)
    for unit_words, unit in _TOKEN_UNITS:
        if words & unit_words:
            return unit
    codes = [t for t in tokens if t in _CODES]
    if codes:
        return codes[0].upper()
    if words & _MONEY and not words & _NOT_MONEY:
        return "currency"
    if tokens and tokens[-1] in ("count", "qty", "num"):
        return "count"
    return None


MONEY_UNITS = frozenset({"cents", "currency"})


def is_money(unit: str) -> bool:
    """A unit that is an amount of money: cents, a currency code, CODE_cents, currency."""
    return unit in MONEY_UNITS or unit.endswith("_cents") or bool(re.fullmatch(r"[A-Z]{3}", unit))
