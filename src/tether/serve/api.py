"""Running an api tool: the operation's requests, as the caller, then the caller's policy.

The request is the published plan's (method, path, parameters, paging: a changed spec reaches a
caller only through the gate), sent with the caller's own credential (refused when they hold
none) to the source's base URL. The pages are followed within the rows and bytes caps and the
call's time. The rows that come back are put in a DuckDB table of their own and read through the
caller's entitled relation, as any product's rows are: a restricted field never leaves, masks
and row filters apply. The result states as_of (the response's Date header, else the time of the
request), units, and a cursor that continues where the pages stopped; the evidence lists each
request (the credential never shown) and the policy's statement over the rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from sqlglot import exp

from tether.context.schema import Column
from tether.errors import TetherError
from tether.policy.entitle import entitle
from tether.serve import pagination
from tether.serve.executor import Executor, jsonable
from tether.serve.kinds import Answered, Call, ToolError, superseded
from tether.serve.runners import Runner, register
from tether.sources.apiclient import ApiClient, ApiError
from tether.sources.apisource import OpenAPISource, rows_table


def run(ex: Executor, call: Call) -> Answered:
    plan = call.plan
    req = plan.request or {}
    product = plan.product or ""
    source = ex.source(plan.source)
    if not isinstance(source, OpenAPISource):
        raise ToolError(f"{call.tool} reads an HTTP API, and source {plan.source!r} is no "
                        "longer one; run tether check.")
    serve = ex.project.config.serve
    limit = int(call.args.get("limit") or plan.default_rows)
    limit = max(1, min(limit, plan.max_rows, serve.max_result_rows))
    given = {k: v for k, v in call.args.items() if k not in ("limit", "cursor") and v is not None}
    mapping: dict[str, str] = req.get("args") or {}
    api_args = {mapping.get(k, k): v for k, v in given.items()}
    state = None
    if call.args.get("cursor"):
        kept = pagination.decode(ex.cursor_key, str(call.args["cursor"]), call.user, call.tool,
                                 call.version, call.args)
        state = json.loads(kept[0]) if kept and isinstance(kept[0], str) else None
    try:
        credential = source.credential(call.user, list(req.get("security") or []),
                                       req.get("scheme"))
    except ApiError as e:
        raise ToolError(e.paragraph(), refusal={"reason": "no_credential",
                                                "detail": e.message}) from None
    try:
        base = source.base_url(req.get("server"))
    except TetherError as e:
        raise ToolError(e.paragraph()) from None
    # one a call: no cookie or connection outlives a caller
    client = ApiClient(base, ex.timeout, serve.max_api_call_bytes)
    asked = dt.datetime.now(dt.UTC)
    try:
        fetched = client.rows(req, api_args, credential, limit, state)
    except ApiError as e:
        raise ToolError(e.paragraph()) from None
    finally:
        client.close()
    columns = [Column(name=c["name"], type=c["type"], kind=c["kind"], nullable=True)
               for c in req.get("columns") or []]
    # the rows' table is the product's own (its operation): the statement in the evidence reads
    # as any product's does, so a labeller maps it to the product like a warehouse table
    table = ex.project.product(product).table or product
    con = rows_table(columns, fetched.rows, table)
    try:
        rel = entitle(ex.project.config, call.user, product, columns,
                      exp.table_(exp.to_identifier(table, quoted=True)), "duckdb", ex.keys())
        statement = rel.query.sql(dialect="duckdb")
        cur = con.execute(statement, rel.params)
        names = [d[0] for d in cur.description or []]
        raw = cur.fetchall()
    finally:
        con.close()
    rows, size, capped = [], 0, False
    for r in raw:
        row = {n: jsonable(v) for n, v in zip(names, r, strict=True)}
        size += len(json.dumps(row, default=str))
        if size > serve.max_result_bytes:
            capped = True
            break
        rows.append(row)
    more = fetched.next_state is not None or capped
    resume = fetched.next_state
    if capped:  # the bytes cap: go on from the first row not given, where rows map one to one
        resume = (fetched.marks[len(rows)] if rel.row_filter is None
                  and len(fetched.marks) == len(fetched.rows) else None)
    next_cursor = None
    if resume is not None:
        next_cursor = pagination.encode(ex.cursor_key, call.user, call.tool, call.version,
                                        call.args, [json.dumps(resume)])
    out = ex.result(call, rows, [product], paged=True, truncated=more, next_cursor=next_cursor)
    when = min(fetched.date, ex.project.now()) if fetched.date else asked
    out["as_of"] = when.isoformat()  # the API's answer, not a column of it
    out["as_of_basis"] = ("the API response's Date header" if fetched.date
                          else "the time of the request")
    if capped:
        out["capped"] = "bytes"
    if fetched.retries:
        out["retried"] = fetched.retries
    evidence = ex.evidence(call, source, statement, rel.params, [product])
    evidence.requests = fetched.requests
    return Answered(out, evidence)


RULES = ("server", "security", "scheme")
"""What an API tool's request carries that decides where a caller's credential goes and how: a
call pinned to a superseded version sends the old request's shape with the current ones."""


def _pinned(pinned: Any, current: Any) -> Any:
    """A call pinned to a superseded version of an API tool: its parameters, paging and columns
    as pinned, the server and security scheme of the current version."""
    old, new = pinned.plan.request, current.plan.request
    if old is None or new is None:
        raise superseded(pinned, current, "the current version reads no HTTP API")
    request = {**old, **{k: new.get(k) for k in RULES}}
    return dataclasses.replace(pinned, plan=pinned.plan.model_copy(update={"request": request}))


RUNNER = register(Runner("api", run, pinned=_pinned))
