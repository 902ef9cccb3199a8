"""Run a statement a result's evidence names (its as_of statement, say) on the project's source,
with the evidence's bound values, to check the result's claims against the data itself."""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.meta import MASK_KEY_SHOWN, Evidence
from tether.errors import TetherError
from tether.eval.label.sql.rerun import Undecided, mask_key
from tether.eval.label.work import Work


def run_evidence(work: Work, ev: Evidence, sql: str) -> list[tuple[Any, ...]] | str:
    """The rows of ``sql`` (a statement from ``ev``) run on the source with ``ev``'s values, or
    why it could not run. Memoised per statement and values."""
    key = ("evidence_run", ev.dialect, sql, repr(sorted(ev.params.items())))
    ctx = work.ctx
    if key in ctx.cache:
        hit: list[tuple[Any, ...]] | str = ctx.cache[key]
        return hit
    src = ctx.source(ev.tables[0] if ev.tables and ev.tables[0] in ctx.pks else None)
    out: list[tuple[Any, ...]] | str
    if src is None:
        out = f"the source is unavailable ({ctx.source_problem()})"
    else:
        try:
            tree = sqlglot.parse_one(sql, read=ev.dialect or src.dialect)
            used = {p.name for p in tree.find_all(exp.Placeholder)}
            params: dict[str, Any] = {}
            for name in used:
                value = ev.params.get(name)
                if value == MASK_KEY_SHOWN:

                    try:
                        params |= mask_key(work).params()
                    except Undecided as e:
                        raise ValueError(str(e)) from None
                elif name in ev.params:
                    params[name] = value
                else:
                    raise ValueError(f"no value for its placeholder {name}")
            out = src.run(src.render(tree), params, ctx.statement_timeout)
        except (sqlglot.errors.SqlglotError, ValueError) as e:
            out = str(e).splitlines()[0]
        except TetherError as e:
            out = e.message
    ctx.cache[key] = out
    return out
