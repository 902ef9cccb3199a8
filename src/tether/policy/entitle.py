"""The one policy path: (user, product) -> the entitled relation.

Every read of a data product while serving (listing and metric tools, ``run_sql``, the probe,
counts, samples, distinct values, freshness) goes through :func:`entitle`: a SELECT of the
product's columns the user may see, masked columns replaced by their mask, restricted columns
absent, the role's row filter in its WHERE (user attributes as bound parameters, never text),
over the product's table or SQL. A product the role may not read (``tables: {allow, deny}``)
raises :class:`Refusal` instead. Callers put the relation where the product's table was; nothing
reads a product's table any other way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp

from tether.config import PII_SELECTOR, RoleConfig, TetherConfig
from tether.context.schema import Column
from tether.errors import ConfigError, TetherError
from tether.policy import templates
from tether.policy.model import exposable, role_of

RefusalReason = Literal["outside_entitlement", "restricted", "denied_table", "masked_predicate",
                        "function_not_allowed", "shadowed_name"]
REDACTED = "[redacted]"
MASK_KEY_PARAMS = ("mk_i", "mk_o")


def _text() -> exp.DataType:
    return exp.DataType.build("TEXT")


NOT_YOURS = ("No rows, counts or totals of it are available to you: the answer to the question "
             "is that this is not permitted.")
"""What an outside-the-scope refusal tells the agent beside the reason: a refusal is not a zero."""


class Refusal(TetherError):
    """A read the caller's policy forbids. The text starts "Not permitted:"; ``reason`` is one of
    the fixed refusal reasons, ``detail`` says what exactly (never a value the caller may not
    see)."""

    def __init__(self, reason: RefusalReason, detail: str, hint: str | None = None):
        super().__init__(f"Not permitted: {detail}", hint=hint)
        self.reason = reason
        self.detail = detail

    def meta(self) -> dict[str, str]:
        return {"reason": self.reason, "detail": self.detail}


# --- the hash mask's key -------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskKey:
    """The project's secret for the ``hash`` mask, as the two padded halves of an HMAC.

    Engines lack a common HMAC, so the mask is built from their sha256 the way HMAC is:
    ``sha256(k_o || sha256(k_i || value))`` over text, with ``k_i``/``k_o`` the key XOR the
    inner and outer pads, in hex. Both halves travel as bound parameters, never in SQL text.
    """

    inner: str
    outer: str

    @classmethod
    def from_secret(cls, secret: bytes) -> MaskKey:
        block = secret.ljust(64, b"\0")[:64]
        return cls(bytes(b ^ 0x36 for b in block).hex(), bytes(b ^ 0x5C for b in block).hex())

    def params(self) -> dict[str, str]:
        return {MASK_KEY_PARAMS[0]: self.inner, MASK_KEY_PARAMS[1]: self.outer}

    def digest(self, value: str) -> str:
        """The mask of ``value`` computed in Python: what the engine must return."""
        inner = hashlib.sha256((self.inner + value).encode()).hexdigest()
        return hashlib.sha256((self.outer + inner).encode()).hexdigest()


def _fn(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


_SHA256_HEX: dict[str, Callable[[exp.Expr], exp.Expr]] = {
    # SHA-256 of a text value, as 64 lowercase hex digits, in each engine's own functions
    "duckdb": lambda x: _fn("sha256", x),
    "postgres": lambda x: _fn("encode", _fn("sha256", _fn("convert_to", x,
                                                            exp.Literal.string("UTF8"))),
                              exp.Literal.string("hex")),
    "snowflake": lambda x: _fn("SHA2", x, exp.Literal.number(256)),
    "spark": lambda x: _fn("sha2", x, exp.Literal.number(256)),
    "databricks": lambda x: _fn("sha2", x, exp.Literal.number(256)),
    "bigquery": lambda x: _fn("TO_HEX", _fn("SHA256", x)),
    "trino": lambda x: _fn("lower", _fn("to_hex", _fn("sha256", _fn("to_utf8", x)))),
    "clickhouse": lambda x: _fn("lower", _fn("hex", _fn("SHA256", x))),
}
HASH_DIALECTS = frozenset(_SHA256_HEX)
"""The engines the hash mask is written for."""


def hash_mask(value: exp.Expr, dialect: str) -> exp.Expr:
    """The keyed hash of ``value`` (as text) in the engine, over the bound key halves."""
    text = exp.cast(value, _text())
    k_i, k_o = (exp.Placeholder(this=p) for p in MASK_KEY_PARAMS)
    sha = _SHA256_HEX.get(dialect)
    if sha is None:
        raise ConfigError(f"the hash mask is not available on {dialect} sources.",
                          hint="Use the redact or null mask there.")
    return sha(exp.DPipe(this=k_o, expression=sha(exp.DPipe(this=k_i, expression=text))))


def mask_expr(value: exp.Expr, mask: str, dialect: str) -> exp.Expr:
    """redact -> a constant, hash -> the keyed hash, null -> NULL (all typed as text)."""
    if mask == "redact":
        return exp.cast(exp.Literal.string(REDACTED), _text())
    if mask == "hash":
        return hash_mask(value, dialect)
    return exp.cast(exp.null(), _text())


# --- what a role may read ------------------------------------------------------------------------


def table_allowed(config: TetherConfig, user: str, product: str) -> bool:
    """Whether the user's role may read ``product`` at all (``tables``: deny wins over allow)."""
    rule = role_of(config, user)[1].tables
    return rule.reads(product)


def require_table(config: TetherConfig, user: str, product: str) -> None:
    if not table_allowed(config, user, product):
        raise Refusal("denied_table", f"your role may not read {product}")


def column_masks(config: TetherConfig, user: str, product: str) -> dict[str, str]:
    """{column: mask} for the user on ``product``: the role's ``product.column`` masks, and the
    ``pii`` selector over every column classified pii (an explicit mask wins)."""
    return role_masks(config, role_of(config, user)[1], product)


def role_masks(config: TetherConfig, role: RoleConfig | str, product: str) -> dict[str, str]:
    """{column: mask} a role (or the role of that name) has on ``product`` (see
    :func:`column_masks`)."""
    if isinstance(role, str):
        role = config.policies.roles[role]
    out: dict[str, str] = {}
    selector = role.masks.get(PII_SELECTOR)
    p = config.products.get(product)
    if selector and p is not None:
        out |= {c: selector for c, f in p.columns.items() if f.classification == "pii"}
    for target, mask in role.masks.items():
        table, _, column = target.partition(".")
        if table == product and column:
            out[column] = mask
    return out


def user_params(config: TetherConfig, user: str) -> dict[str, Any]:
    """The user's attributes as bound parameters ``u_<attr>``."""
    return {f"u_{k}": v for k, v in config.policies.users[user].attributes().items()}


def row_filter(config: TetherConfig, user: str, product: str, alias: str,
               dialect: str = "duckdb") -> exp.Expr | None:
    """The role's row filter on ``product`` as an AST over ``alias`` (attributes as
    placeholders ``u_<attr>``), or None when the role reads the product unfiltered."""
    template = role_of(config, user)[1].row_filters.get(product)
    if template is None:
        return None
    parsed = templates.parse(template, dialect, where=f"the row filter on {product}")
    missing = parsed.missing(config.policies.users[user].attributes())
    if missing:
        raise Refusal("outside_entitlement",
                      f"user {user} has no attribute {', '.join(missing)}, which the row filter "
                      f"on {product} needs", hint="Add the attribute to the user in "
                      "policies.users.")
    return _qualify_top_level(parsed.tree(), alias)


def _qualify_top_level(pred: exp.Expr, alias: str) -> exp.Expr:
    """Qualify the predicate's own bare columns with the relation's alias (not a subquery's)."""
    def fix(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.find_ancestor(
                exp.Select) is None:
            return exp.column(node.name, table=alias, quoted=True)
        return node

    return pred.transform(fix)


def equality_scope(config: TetherConfig, user: str, product: str) -> dict[str, set[Any]]:
    """{column: values} a simple row filter pins (``col = {{ user.x }}``, or several such
    joined by AND): the values of that column the user may see. Empty for other filters."""
    return {col: values for col, (_, values) in equality_pins(config, user, product).items()}


def equality_pins(config: TetherConfig, user: str, product: str
                  ) -> dict[str, tuple[str, set[Any]]]:
    """{column: (attribute, values)}: :func:`equality_scope` with the user attribute that pins
    each column (what a sentence about the scope names)."""
    template = role_of(config, user)[1].row_filters.get(product)
    if template is None:
        return {}
    attrs = config.policies.users[user].attributes()
    try:
        parsed = templates.parse(template)
    except templates.TemplateError:
        return {}
    out: dict[str, tuple[str, set[Any]]] = {}
    for part in parsed.conjuncts():
        if not isinstance(part, exp.EQ):
            continue
        col, mark = part.this, part.expression
        if isinstance(mark, exp.Column):
            col, mark = mark, col
        name = str(mark.name) if isinstance(mark, exp.Placeholder) else ""
        attr = name[len(templates.USER_PREFIX):]
        if isinstance(col, exp.Column) and name.startswith(templates.USER_PREFIX) and attr in attrs:
            value = attrs[attr]
            out[col.name] = (attr, set(value) if isinstance(value, list | tuple | set)
                             else {value})
    return out


# --- the entitled relation -----------------------------------------------------------------------


@dataclass(frozen=True)
class Entitled:
    """What ``user`` may read of ``product``: :attr:`query` selects exactly :attr:`columns`."""

    product: str
    query: exp.Select
    params: dict[str, Any]
    columns: tuple[str, ...]
    masks: dict[str, str] = field(default_factory=dict)
    row_filter: str | None = None
    inner: tuple[Entitled, ...] = ()
    """The products a SQL product reads, as the same user may read them (policy/inherit.py)."""

    def subquery(self, alias: str) -> exp.Subquery:
        return exp.Subquery(this=self.query.copy(),
                            alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))

    def policy_sql(self, render: Callable[[exp.Expr], str]) -> list[str]:
        """The row filter and the mask expressions the policy adds, as the engine reads them
        (for evidence: what the caller did not choose)."""
        where = self.query.args.get("where")
        out = [render(where.this)] if where is not None else []
        for p in self.query.expressions:
            if isinstance(p, exp.Alias) and p.alias in self.masks:
                out.append(render(p))
        for rel in self.inner:  # what the products it reads add, inherited
            out += [x for x in rel.policy_sql(render) if x not in out]
        return out


def entitle(config: TetherConfig, user: str, product: str, columns: Sequence[Column],
            base: exp.Expr, dialect: str, mask_key: MaskKey | None = None,
            fence: bool = False) -> Entitled:
    """The entitled relation of ``product`` for ``user``. ``columns`` are the product's columns
    as the source describes them; ``base`` reads the product as it is (its table, or its SQL as
    a subquery). Refusal when the role may not read the product at all. ``fence`` (for SQL the
    caller wrote) keeps the engine from evaluating the caller's predicates before the row
    filter; tether's own plans compare only with bound values and stay unfenced, so the engine
    may push their filters into the scan."""
    require_table(config, user, product)
    shown = exposable(config, product, list(columns))  # no restricted column or field
    masks = {c: m for c, m in column_masks(config, user, product).items() if c in shown}
    alias = product
    source = base.copy()
    source.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    projections: list[exp.Expr] = []
    for name in shown:
        ref = exp.column(name, table=alias, quoted=True)
        mask = masks.get(name)
        projections.append(mask_expr(ref, mask, dialect).as_(name, quoted=True) if mask else ref)
    query = exp.select(*projections).from_(source)
    params: dict[str, Any] = {}
    pred = row_filter(config, user, product, alias, dialect)
    if pred is not None:
        query = query.where(pred)
        if fence:
            # OFFSET 0 fences the relation: the engine may not pull it up or push the caller's
            # predicates below the row filter, where one that raises an error on a row outside
            # the entitlement would tell the caller that the row exists (PostgreSQL does)
            query = query.offset(0)
        used = {p.name for p in pred.find_all(exp.Placeholder)}
        params |= {k: v for k, v in user_params(config, user).items() if k in used}
    if "hash" in masks.values():
        if mask_key is None:
            raise ConfigError(f"{product} has a hash mask for {user}, but no mask key was "
                              "loaded.", hint="Set serve.mask_key_file (created on first use).")
        params |= mask_key.params()
    template = role_of(config, user)[1].row_filters.get(product)
    return Entitled(product, query, params, tuple(shown), masks, template)
