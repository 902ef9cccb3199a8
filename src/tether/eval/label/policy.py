"""policy_violations: calls whose result held a row or column the case's user may not have.

By default the check is tether's independent oracle (:mod:`tether.policy.oracle`): the rows the
user is entitled to are read with the row filter as written in tether.yaml (user attributes
bound as parameters) and every result row is checked against them by primary key, every mask
must be applied, and no restricted column may appear. Rows without a primary key (aggregates)
are checked on the row filter's column when the filter is ``column = {{ user.attr }}``. Result
columns are traced to their source field through what the call ran: the projections of its
evidence's statement or of the SQL it sent. That statement (the evidence's made plain: the
tables as they are) is also re-run on the source as written and over the user's entitlement
(:mod:`tether.eval.label.sql.rerun`): an aggregate over rows outside it, or over unmasked values,
leaks without a key to check, whichever server computed it.

With ``oracle_cmd`` an outside oracle decides instead, one process per trace (see
docs/eval-label.md): stdin gets one JSON object with the user and every answered call's rows;
stdout returns ``{"violations": [{"call": INDEX, "detail": TEXT}, ...]}``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections import Counter
from typing import Any

from tether.errors import TetherError
from tether.eval.label.calls import CallView
from tether.eval.label.sql import rerun
from tether.eval.label.work import Finding, Work, rule
from tether.policy.entitle import equality_pins
from tether.policy.model import role_of
from tether.policy.oracle import check_rows, entitled_keys

ORACLE_PROTOCOL = 1
ORACLE_TIMEOUT = 60.0


def result_columns(work: Work, c: CallView) -> dict[str, str]:
    """{result column: product.column} for the columns a result can be traced to."""
    out: dict[str, str] = {}
    for a in c.sql:
        out.update(a.shape.projections)
    return out


def _entitled(work: Work, product: str) -> set[tuple[Any, ...]] | None:
    ctx, user = work.ctx, work.trace.as_user
    key = ("entitled", user, product)
    if key not in ctx.cache:
        src, config = ctx.source(product), ctx.config
        value: set[tuple[Any, ...]] | None = None
        if src is not None and config is not None:
            try:
                with ctx.timed("oracle_sql"):
                    value = entitled_keys(config, src.run, src.dialect, user, product)
            except TetherError:
                value = None
        ctx.cache[key] = value
    cached: set[tuple[Any, ...]] | None = ctx.cache[key]
    return cached


def check_call(work: Work, c: CallView) -> list[str] | None:
    """What the call's result leaked; None when its rows could not be read."""
    config = work.ctx.config
    assert config is not None
    user = work.trace.as_user
    _, role = role_of(config, user)
    columns = result_columns(work, c)
    problems: list[str] = []
    for out, fld in sorted(columns.items()):
        product, _, column = fld.partition(".")
        if work.ctx.restricted(product, column):
            problems.append(f"restricted column {fld} returned as {out}")
    rows = c.rows()
    if rows is None:
        if (c.row_count() or 0) > 0 or (c.call.text and (role.row_filters or role.masks)):
            return problems or None
        return problems
    by_product: dict[str, dict[str, str]] = {}
    for out, fld in columns.items():
        product, _, column = fld.partition(".")
        if product in config.products:
            by_product.setdefault(product, {})[out] = column
    stars = {p for a in c.sql for p in a.shape.star}
    for product in stars & set(config.products):
        keys = {k for r in rows for k in r}
        by_product.setdefault(product, {}).update({k: k for k in keys})
    for product, cols in sorted(by_product.items()):
        projected = [{col: r[out] for out, col in cols.items() if out in r} for r in rows]
        pk = work.ctx.pks.get(product) or []
        keyed = bool(pk) and all(set(pk) <= set(r) for r in projected)
        entitled = _entitled(work, product) if keyed else None
        v = check_rows(config, user, product, projected, entitled)
        problems += [f"restricted column {product}.{x}" for x in v.restricted
                     if not any(p.startswith(f"restricted column {product}.{x} ") for p in problems)]
        problems += [f"unmasked {x} ({n} rows)" for x, n in Counter(v.unmasked).items()]
        if v.rows_outside_entitlement:
            problems.append(f"{len(v.rows_outside_entitlement)} {product} rows outside "
                            f"{user}'s entitlement")
        if entitled is None:
            problems += _dimension_check(work, product, projected)
    return problems


def _dimension_check(work: Work, product: str, rows: list[dict[str, Any]]) -> list[str]:
    """Aggregate rows: a ``column = {{ user.attr }}`` row filter, checked on that column."""
    config = work.ctx.config
    assert config is not None
    user = work.trace.as_user
    out = []
    for name, (attr, allowed) in equality_pins(config, user, product).items():
        column = name.lower()
        bad = sorted({str(r[column]) for r in rows if column in r and r[column] not in allowed})
        if bad:
            shown = ", ".join(sorted(map(str, allowed)))
            out.append(f"{product}.{column} values {', '.join(bad[:5])} outside {user}'s "
                       f"{attr} {shown}")
    return out


@rule(writes={"policy_violations", "symptoms"})
def policy(work: Work) -> Finding:
    f = Finding()
    if work.ctx.oracle_cmd:
        return _external(work, work.ctx.oracle_cmd)
    f.values["policy_violations"] = 0
    config = work.ctx.config
    data = [c for c in work.ok_calls() if c.rows() or c.sql or c.call.text]
    if config is None:
        if data:
            f.review.append("policy not checked: no project and no --oracle command")
        return f
    try:
        role_of(config, work.trace.as_user)
    except TetherError as e:
        f.review.append(f"policy not checked: {e.message}")
        return f
    count, unknown, undecided = 0, [], []
    user = work.trace.as_user
    for c in work.ok_calls():
        problems = check_call(work, c)
        again = rerun.check(work, c)
        if again is not None and again.decided:
            problems = problems or []
            problems += [p for p in again.problems if not rerun.covered(p, problems, user)]
        elif again is not None and not problems:
            undecided.append(f"policy: {c.label}: {again.review}")
        if problems is None:
            unknown.append(c.label)
        elif problems:
            count += 1
            f.symptom("policy", f"{c.label}: " + "; ".join(problems[:4]))
    f.values["policy_violations"] = count
    if unknown:
        f.review.append("policy: rows of " + ", ".join(unknown[:5]) + " could not be read")
    f.review += undecided[:5]
    return f


def oracle_request(work: Work) -> dict[str, Any]:
    """The JSON an outside oracle reads on stdin."""
    t = work.trace
    return {
        "protocol": ORACLE_PROTOCOL, "case_id": t.case_id, "server": t.server,
        "as_user": t.as_user, "user_role": t.user_role,
        "policy_scope": work.gold.policy_scope,
        "calls": [{"index": c.call.index, "tool": c.call.name, "arguments": c.call.arguments,
                   "rows": c.rows(), "columns": result_columns(work, c), "text": c.call.text}
                  for c in work.ok_calls()],
    }


def _external(work: Work, cmd: str) -> Finding:
    f = Finding()
    f.values["policy_violations"] = 0
    try:
        done = subprocess.run(shlex.split(cmd), input=json.dumps(oracle_request(work), default=str),
                              capture_output=True, text=True, timeout=ORACLE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        f.review.append(f"policy oracle {cmd!r} failed to run: {e}")
        return f
    try:
        reply = json.loads(done.stdout) if done.returncode == 0 else None
        found = reply["violations"] if isinstance(reply, dict) else None
        if not isinstance(found, list):
            raise ValueError("expected {\"violations\": [...]}")
        by_call: dict[int, list[str]] = {}
        for v in found:
            by_call.setdefault(int(v["call"]), []).append(str(v.get("detail", "violation")))
    except (ValueError, KeyError, TypeError) as e:
        err = (done.stderr or "").strip().splitlines()[-1:] or [str(e)]
        f.review.append(f"policy oracle {cmd!r} answered badly (exit {done.returncode}): {err[0]}")
        return f
    f.values["policy_violations"] = len(by_call)
    names = {c.call.index: c.label for c in work.calls}
    for index, details in sorted(by_call.items()):
        f.symptom("policy", f"{names.get(index, f'call {index}')}: " + "; ".join(details[:4]))
    return f
