"""The statements of one write (serve/write.py): the rows it names read as they are, as a dry
run shows them and with their new values, each precondition row by row, a metric over them, the
UPDATE with every condition in its WHERE, and what is left outside the preconditions or the
caller's scope after it. Over the product's table aliased by the product's name, with the
caller's row filter; every value a bound parameter.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from tether.policy.entitle import row_filter, user_params
from tether.serve.executor import Executor
from tether.serve.kinds import Call, ToolError
from tether.toolgen.model import ActionPlan, Consequence


class Statements:
    """The statements of one write, over the product's table aliased by the product's name, with
    the caller's row filter; every value a bound parameter."""

    def __init__(self, ex: Executor, call: Call, keys: list[tuple[Any, ...]],
                 dialect: str, schema_table: exp.Table):
        self.ex, self.call = ex, call
        self.act: ActionPlan = call.plan.action  # type: ignore[assignment]
        self.product = call.plan.product or ""
        self.dialect = dialect
        self.table = schema_table
        self.params: dict[str, Any] = {}
        self.key_cols = list(self.act.keys.values())
        ors = []
        for i, key in enumerate(keys):
            parts = []
            for j, col in enumerate(self.key_cols):
                self.params[f"k{i}_{j}"] = key[j]
                parts.append(exp.EQ(this=self.col(col), expression=exp.Placeholder(
                    this=f"k{i}_{j}")))
            ors.append(exp.and_(*parts) if len(parts) > 1 else parts[0])
        self.picked: exp.Expr = exp.or_(*ors) if len(ors) > 1 else ors[0]
        config = ex.project.config
        pred = row_filter(config, call.user, self.product, self.product, dialect)
        self.scope: exp.Expr | None = pred
        if pred is not None:
            used = {p.name for p in pred.find_all(exp.Placeholder)}
            self.params |= {k: v for k, v in user_params(config, call.user).items() if k in used}

    def parsed(self, text: str) -> exp.Expr:
        """An expression of the action's (a precondition, a metric's SQL) in the engine's SQL."""
        try:
            return sqlglot.parse_one(text, read=self.dialect)
        except sqlglot.errors.SqlglotError:
            raise ToolError(f"{self.act.name}: {text[:80]!r} does not parse as this engine's "
                            "SQL; fix it in tether.yaml") from None

    def bound(self, expr: exp.Expr) -> dict[str, Any]:
        """The values of the placeholders ``expr`` holds (an engine refuses any other)."""
        used = {p.name for p in expr.find_all(exp.Placeholder)}
        return {k: v for k, v in self.params.items() if k in used}

    def col(self, name: str) -> exp.Column:
        return exp.column(name, table=self.product, quoted=True)

    def source(self) -> exp.Table:
        t = self.table.copy()
        t.set("alias", exp.TableAlias(this=exp.to_identifier(self.product, quoted=True)))
        return t

    def where(self) -> exp.Expr:
        return exp.and_(self.picked, self.scope) if self.scope is not None else self.picked

    def read(self, lock: bool = False) -> exp.Select:
        """The rows named, as they are, in the caller's scope."""
        q = exp.select(*[self.col(c) for c in self.act.reads]).from_(self.source()).where(
            self.where()).order_by(*[self.col(c) for c in self.key_cols])
        return q.lock(update=True) if lock and self.dialect == "postgres" else q

    def shown(self) -> exp.Select:
        """The rows named as a dry run shows them: their keys and the columns set."""
        cols = [*self.key_cols, *[c for c in self.act.sets.values() if c not in self.key_cols]]
        return exp.select(*[self.col(c) for c in cols]).from_(self.source()).where(
            self.where()).order_by(*[self.col(c) for c in self.key_cols])

    def rows_as(self, after: dict[str, Any] | None) -> exp.Select:
        """The rows named, with the set columns at their new values (``after``) or as they are."""
        cols: list[exp.Expr] = []
        for c in self.act.reads:
            if after is not None and c in after:
                self.params[f"to_{c}"] = after[c]
                cols.append(exp.Placeholder(this=f"to_{c}").as_(c, quoted=True))
            else:
                cols.append(self.col(c).as_(c, quoted=True))
        return exp.select(*cols).from_(self.source()).where(self.where())

    def require(self, after: dict[str, Any] | None) -> exp.Select:
        """Each row's key and, per precondition, whether it holds (before, or with ``after``)."""
        inner = self.rows_as(after).subquery(self.product)
        checks: list[exp.Expr] = [exp.column(c, table=self.product, quoted=True)
                                  for c in self.key_cols]
        for i, text in enumerate(self.act.require):
            pred = self.parsed(text)
            checks.append(exp.func("COALESCE", exp.paren(pred), exp.false()).as_(f"r{i}"))
        return exp.select(*checks).from_(inner)

    def metric(self, q: Consequence, after: dict[str, Any] | None) -> exp.Select:
        """A metric's value and how many rows it counts, over the rows named."""
        inner = self.rows_as(after).subquery(self.product)
        assert q.measure is not None
        measure = self.parsed(q.measure)
        sel = exp.select(measure.as_("v"), exp.func("COUNT", exp.Star()).as_("n")).from_(inner)
        if q.predicate:
            sel = sel.where(self.parsed(q.predicate))
        return sel

    def update(self, to: dict[str, Any]) -> exp.Expr:
        """The change, with every condition in its WHERE: the rows named in the caller's scope,
        each in a state it may move from, each precondition holding now."""
        conds: list[exp.Expr] = [self.where()]
        for col, moves in self.act.transitions.items():
            froms = sorted(frm for frm, tos in moves.items() if to.get(col) in tos)
            for i, frm in enumerate(froms):
                self.params[f"from_{col}_{i}"] = frm
            conds.append(exp.In(this=self.col(col), expressions=[
                exp.Placeholder(this=f"from_{col}_{i}") for i in range(len(froms))])
                if froms else exp.false())
        for text in self.act.require:
            conds.append(exp.paren(self.parsed(text)))
        where = exp.and_(*conds)
        sets = []
        for col, value in to.items():
            self.params[f"to_{col}"] = value
            sets.append(exp.EQ(this=exp.column(col, quoted=True),
                               expression=exp.Placeholder(this=f"to_{col}")))
        # the table aliased by the product's name, as every statement here reads it: the row
        # filter's own columns (a correlated subquery's too) keep their meaning
        return exp.Update(this=self.source(), expressions=sets, where=exp.Where(this=where))

    def outside(self) -> exp.Select:
        """How many of the rows named no longer satisfy a precondition or the caller's scope."""
        ok: list[exp.Expr] = [exp.paren(self.parsed(t)) for t in self.act.require]
        if self.scope is not None:
            ok.append(exp.paren(self.scope.copy()))
        cond = exp.and_(*ok) if ok else exp.true()
        return exp.select(exp.func("COUNT", exp.Star()).as_("n")).from_(self.source()).where(
            exp.and_(self.picked, exp.Not(this=exp.func("COALESCE", exp.paren(cond),
                                                          exp.false()))))
