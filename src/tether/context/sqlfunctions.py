"""The SQL functions tether lets SQL from outside call: run_sql's queries and the expressions an
import brings in (a dbt measure, dimension or filter).

An allow-list, by resolution: sqlglot types what it knows (``TYPED``, by class name), the rest
are anonymous calls allowed by name per dialect (``ANONYMOUS``). Anything that runs a SQL
string, reads files or settings, sleeps or reports the server is absent. The list lives here,
at layer 0, so the importers and the server's guard (serve/sqlguard.py) read the same one.
"""

from __future__ import annotations

from sqlglot import exp

# Functions sqlglot knows by type: what analytics over a few products needs, nothing that
# reads outside the query (files, settings, the server, other SQL) or changes anything.
TYPED: frozenset[str] = frozenset(n for n in """
Count Sum Avg Min Max Stddev StddevSamp StddevPop Variance VariancePop Median PercentileCont
PercentileDisc ApproxDistinct ApproxQuantile Quantile GroupConcat ArrayAgg List LogicalAnd
LogicalOr AnyValue First Last ArgMax ArgMin CountIf Corr CovarPop CovarSamp RegrSlope
RegrIntercept Mode SumIf AvgIf
RowNumber Rank DenseRank PercentRank CumeDist Ntile Lag Lead FirstValue LastValue NthValue
Abs Round Floor Ceil Sqrt Pow Exp Ln Log Sign Trunc Greatest Least Cbrt Pi IsNan IsInf
Lower Upper Length Substring Trim Concat ConcatWs Replace Left Right StrPosition SplitPart Split
RegexpLike RegexpILike RegexpExtract RegexpReplace Initcap Reverse StartsWith EndsWith Contains
MD5 SHA2 SHA2Digest Ascii Chr Format ToChar TimeToStr StrToTime StrToDate Translate
Levenshtein StringToArray ArrayToString
TimestampTrunc DateTrunc Extract DateDiff DateAdd DateSub TimestampAdd TimestampSub
TimestampDiff CurrentDate CurrentTimestamp CurrentTime Localtimestamp DateFromParts UnixToTime
TimeToUnix Year Month Day Quarter Week WeekOfYear DayOfWeek DayOfWeekIso DayOfMonth DayOfYear
Hour Minute Second LastDay Monthname Dayname Date DateBin TsOrDsToDate TsOrDsAdd
Coalesce Nullif If Case Cast TryCast Typeof Array Explode Unnest ArraySize ArrayContains
StructExtract JSONExtract JSONExtractScalar JSONBExtract JSONBExtractScalar Exists
GenerateSeries ExplodingGenerateSeries Struct ToArray Filter Bracket
""".split())

# Functions sqlglot does not know by type, per dialect, by name.
ANONYMOUS: dict[str, frozenset[str]] = {
    "duckdb": frozenset("""
        date_part datepart epoch_ms epoch_us make_timestamp make_time isoyear yearweek weekday
        dayofmonth list_value struct_pack octet_length bit_length product fsum every histogram
        btrim now age list_sort list_distinct list_contains array_sort array_distinct cardinality
        strip_accents nullif ifnull range generate_series date_sub date_add to_json json_extract_string
        list_extract array_extract element_at regexp_split_to_array string_agg
        """.split()),
    "postgres": frozenset("""
        date_part age make_date make_timestamp make_interval justify_days justify_hours
        justify_interval date_bin octet_length bit_length every quantile_cont cardinality
        array_length array_position array_remove array_append regexp_matches regexp_split_to_array
        to_json jsonb_extract_path_text json_extract_path_text jsonb_array_length
        json_array_length nullif isfinite width_bucket string_agg
        """.split()),
}
SESSION_NAMES: frozenset[str] = frozenset({
    "user", "current_user", "current_role", "session_user", "system_user", "current_schema",
    "current_catalog", "current_database"})
"""Names that report the server, not the data, when written without parentheses."""


def allowed_anonymous(dialect: str | None) -> frozenset[str]:
    """Anonymous functions allowed in ``dialect``; with no dialect known, only those allowed in
    every dialect (the expression may run on any of them)."""
    if dialect is not None:
        return ANONYMOUS.get(dialect, frozenset())
    return frozenset.intersection(*ANONYMOUS.values())


def disallowed_function(tree: exp.Expr, dialect: str | None) -> str | None:
    """The first function in ``tree`` that is not on the allow-list (its name), else None."""
    anonymous = allowed_anonymous(dialect)
    for node in tree.find_all(exp.Func):
        if isinstance(node, exp.Connector):
            continue  # AND, OR, XOR: operators, though sqlglot types them as functions
        if isinstance(node, exp.Anonymous):
            if str(node.this).lower() not in anonymous:
                return str(node.this)
        elif type(node).__name__ not in TYPED:
            return str(node.sql_name()) if hasattr(node, "sql_name") else type(node).__name__
    return None
