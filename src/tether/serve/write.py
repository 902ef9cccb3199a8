"""Running a write tool: a dry run, a signed confirmation, then one transaction.

The rows a call names are read from the product's table under the caller's row filter (the same
template the entitled relation puts in its WHERE, ``policy.entitle.row_filter``): a key the
caller may not see is refused exactly as one that does not exist. A column the write picks by
or changes must not be masked for the caller. The dry run checks each row's move against the
transitions and each precondition before and after, works out the consequences (a governed
metric over this product is computed over the rows before and after), and signs a confirmation
bound to the caller, the tool's version, the arguments and a digest of the rows as read.

The real call checks the confirmation, claims its idempotency key in the registry, and in one
transaction on the writer connection reads the rows again (locking them where the engine can),
refuses if their digest moved, re-checks the moves, the preconditions and the row filter,
updates with all of them in the UPDATE's WHERE, and checks after the update that every row
still satisfies the preconditions and the caller's row filter; anything off rolls it all back.
The registry keeps the rows before and after; the result names the inverse calls that undo it.
Nothing here is reachable from run_sql: it runs only a published write tool's plan.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from tether.errors import TetherError
from tether.policy.entitle import Refusal, require_table
from tether.policy.model import restricted_columns, role_of
from tether.registry import open_registry
from tether.registry import writes as log
from tether.serve import sqlguard
from tether.serve.executor import Executor, jsonable
from tether.serve.kinds import Answered, Call, ToolError, superseded
from tether.serve.runners import Runner, register
from tether.serve.writeconfirm import asked, confirmed, digest, sign
from tether.serve.writesql import Statements
from tether.sources.writer import Writer
from tether.toolgen.describe import grain_noun, plural
from tether.toolgen.model import ActionPlan
from tether.toolgen.write import IDEMPOTENCY_KEY_MAX, columns_of

# --- who may, which rows -------------------------------------------------------------------------


def may_write(ex: Executor, user: str, act: ActionPlan, product: str) -> None:
    """The caller's role is one the action names, it may read the product, and nothing the
    write picks by or changes is masked or restricted for it."""
    config = ex.project.config
    role, _ = role_of(config, user)
    if role not in act.roles:
        raise Refusal("outside_entitlement", f"your role ({role}) may not {act.name}",
                      hint=f"Roles that may: {', '.join(sorted(act.roles))}.")
    require_table(config, user, product)
    masks, _ = ex.policy_of(user, product)
    touched = [*act.keys.values(), *act.sets.values()]
    for col in touched:
        if col in masks:
            raise Refusal("masked_predicate", f"{col} is masked for your role, so a write may "
                          "not pick or change it")
    hidden = restricted_columns(config, product, touched)
    if hidden:
        raise Refusal("restricted", f"{', '.join(sorted(hidden))} is restricted: no write "
                      "through this server may pick or change it")
    checked = sorted({c for text in act.require for c in columns_of(text, product)})
    unseen = sorted(set(checked) & (set(masks) | restricted_columns(config, product, checked)))
    if unseen:  # a precondition's outcome row by row would tell what the caller may not see
        raise Refusal("masked_predicate", f"a precondition of {act.name} reads "
                      f"{', '.join(unseen)}, which your role may not see, so you may not call it")


def _coerce(kind: str, value: Any) -> Any:
    """An argument as its column holds it (a date column compared with a date, not text)."""
    if value is None or not isinstance(value, str):
        return value
    try:
        if kind == "date":
            return dt.date.fromisoformat(value)
        if kind == "timestamp":
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"{value[:40]!r} is not a {kind} (use ISO 8601)") from None
    return value


def folded(act: ActionPlan, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments with a key given more than once kept once, in the order given: what is
    confirmed, stored and compared is the set of rows named, not how often each was named."""
    params = list(act.keys)
    given = args.get(params[0]) if len(params) == 1 else None
    if not isinstance(given, list):
        return args
    once = list({json.dumps(v, sort_keys=True, default=str): v for v in given}.values())
    return args if len(once) == len(given) else {**args, params[0]: once}


def picked(act: ActionPlan, args: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The key of each row the call names, in the order given, each once."""
    params = list(act.keys)
    if len(params) == 1:
        given = args.get(params[0])
        values = given if isinstance(given, list) else [given]
        keys = [(_coerce(act.kinds.get(act.keys[params[0]], ""), v),) for v in values]
    else:
        keys = [tuple(_coerce(act.kinds.get(act.keys[p], ""), args.get(p)) for p in params)]
    if any(v is None for k in keys for v in k):
        raise ToolError(f"name the rows to change: {', '.join(params)}")
    unique = list(dict.fromkeys(keys))
    if len(unique) > act.max_rows:
        raise ToolError(f"at most {act.max_rows} rows a call; split the call")
    return unique


def targets(call: Call, act: ActionPlan) -> dict[str, Any]:
    """Column -> the value it is set to (a parameter's default where it has one)."""
    props = (call.definition.get("inputSchema") or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for param, col in act.sets.items():
        if param in call.args:
            out[col] = _coerce(act.kinds.get(col, ""), call.args[param])
        elif isinstance(props.get(param), dict) and "default" in props[param]:
            out[col] = props[param]["default"]
        else:
            raise ToolError(f"give {param}: the value {col} is set to")
    return out


# --- checks --------------------------------------------------------------------------------------


def _key_of(row: dict[str, Any], cols: list[str]) -> tuple[Any, ...]:
    return tuple(row[c] for c in cols)


def _shown(key: tuple[Any, ...]) -> str:
    return "/".join(str(jsonable(v))[:60] for v in key)


def found_all(st: Statements, keys: list[tuple[Any, ...]], rows: list[dict[str, Any]],
              noun: str) -> None:
    """Every key named is a row the caller may change (one outside the scope reads as absent)."""
    have = {tuple(str(jsonable(v)) for v in _key_of(r, st.key_cols)) for r in rows}
    missing = [k for k in keys if tuple(str(jsonable(v)) for v in k) not in have]
    if missing:
        raise Refusal("outside_entitlement", f"no {noun} with {'/'.join(st.key_cols)} "
                      f"{', '.join(_shown(k) for k in missing[:10])} among the rows you may "
                      "change", hint="Nothing was changed: the answer is that this is not "
                      "permitted.")


def moves_allowed(act: ActionPlan, rows: list[dict[str, Any]], to: dict[str, Any],
                  key_cols: list[str]) -> None:
    for col, moves in act.transitions.items():
        for r in rows:
            now = r.get(col)
            allowed = moves.get(str(now)) if now is not None else None
            if not allowed or to.get(col) not in allowed:
                options = (f"from {now} it may move to {', '.join(allowed)}" if allowed
                           else f"nothing moves a row out of {now}")
                raise ToolError(
                    f"Not allowed: {col} {now} -> {to.get(col)} for "
                    f"{_shown(_key_of(r, key_cols))}; {options}. Allowed moves: " + "; ".join(
                        f"{f} -> {', '.join(t)}" for f, t in sorted(moves.items())),
                    refusal={"reason": "forbidden_transition",
                             "detail": f"{col} {now} -> {to.get(col)}"})


def _same(a: Any, b: Any) -> bool:
    return json.dumps(jsonable(a), sort_keys=True, default=str) == json.dumps(
        jsonable(b), sort_keys=True, default=str)


def returns_home(ex: Executor, st: Statements, rows: list[dict[str, Any]],
                 to: dict[str, Any]) -> None:
    """An inverse returns each row to the state it came from: where the newest write that
    changed a row was made by an action this one undoes (one that names it as its inverse) and
    the row still holds what that write left, the values set must be those it found there (not
    any state this action's moves allow)."""
    actions = ex.project.config.products[st.product].actions
    undoes = {name for name, a in actions.items() if a.inverse == st.act.name}
    if not undoes or not rows:
        return
    keys = [{c: jsonable(r[c]) for c in st.key_cols} for r in rows]
    found = log.origins(_registry(ex), st.product, keys)
    for r, key in zip(rows, keys, strict=True):
        came = found.get(log.row_key(key))
        if came is None or came["tool"] not in undoes or not all(
                c in r and _same(r[c], v) for c, v in came["after"].items()):
            continue  # no write of the action it undoes left the row as it is
        off = {c: v for c, v in came["before"].items() if c in to and not _same(to[c], v)}
        if off:
            home = ", ".join(f"{c} {v}" for c, v in sorted(off.items()))
            raise ToolError(
                f"Not allowed: {st.act.name} returns a row to the state it came from: "
                f"{_shown(_key_of(r, st.key_cols))} came to "
                + ", ".join(f"{c} {came['after'][c]}" for c in sorted(off)) + f" from {home} "
                f"by {came['tool']} (write {came['write_id']}); call {st.act.name} with "
                f"{', '.join(f'{c} {v}' for c, v in sorted(off.items()))} for it",
                refusal={"reason": "forbidden_transition",
                         "detail": "; ".join(f"{c} {r.get(c)} -> {to.get(c)}, came from {v}"
                                             for c, v in sorted(off.items()))})


def preconditions(act: ActionPlan, before: list[dict[str, Any]], after: list[dict[str, Any]],
                  key_cols: list[str]) -> list[dict[str, Any]]:
    """Each precondition, checked on every row before and after; a row where one fails
    refuses the write, naming the row and the rule."""
    out = []
    for i, text in enumerate(act.require):
        for when, rows in (("before", before), ("after", after)):
            bad = [_shown(_key_of(r, key_cols)) for r in rows if not r.get(f"r{i}")]
            if bad:
                raise ToolError(f"Not allowed: the precondition {text!r} does not hold {when} "
                                f"the change for {', '.join(bad[:10])}",
                                refusal={"reason": "precondition_failed", "detail": text})
        out.append({"rule": text, "before": "holds", "after": "holds", "rows": len(before)})
    return out


def _verb(word: str, n: int) -> str:
    return word + "s" if n == 1 else word


def _number(v: Any) -> str:
    v = jsonable(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return str(v)


def effects(st: Statements, run: Callable[[exp.Expr], list[dict[str, Any]]],
            to: dict[str, Any], noun: str, masked: set[str]) -> list[str]:
    """The consequences in words: each metric computed over the rows before and after (where
    the caller may read every column it reads: none masked for them, none restricted), then
    what else reacts."""
    out = []
    config = st.ex.project.config
    for q in st.act.consequences:
        if (q.measure is None or not q.columns or set(q.columns) & masked
                or restricted_columns(config, st.product, list(q.columns))):
            out.append(q.text[:1].upper() + q.text[1:] + ".")
            continue
        b = run(st.metric(q, None))[0]
        a = run(st.metric(q, to))[0]
        parts = []
        nb, na = int(b.get("n") or 0), int(a.get("n") or 0)
        if nb != na:
            n = abs(nb - na)
            parts.append(f"{n} {noun if n == 1 else plural(noun)} "
                         f"{_verb('leave' if nb > na else 'enter', n)} the metric {q.name}")
        vb, va = jsonable(b.get("v")) or 0, jsonable(a.get("v")) or 0
        if isinstance(vb, float) or isinstance(va, float):  # one form for both
            vb, va = float(vb), float(va)
        if isinstance(vb, int | float) and isinstance(va, int | float):
            delta = va - vb
            unit = f" {q.unit}" if q.unit and q.unit != "none" else ""
            moved = ("does not move" if delta == 0 else
                     f"{'falls' if delta < 0 else 'rises'} by {_number(abs(delta))}")
            parts.append(f"{'it' if parts else 'the metric ' + str(q.name)} {moved} (from "
                         f"{_number(vb)} to {_number(va)}{unit} over these rows)")
        text = "; ".join(parts)
        out.append(text[:1].upper() + text[1:] + ".")
    return out


# --- running -------------------------------------------------------------------------------------


def _shape(st: Statements, rows: list[dict[str, Any]], to: dict[str, Any]
           ) -> list[dict[str, Any]]:
    """Each row's change: its key, the values before and after."""
    return [{"key": {c: jsonable(r[c]) for c in st.key_cols},
             "before": {c: jsonable(r[c]) for c in to}, "after": {c: jsonable(v)
                                                                 for c, v in to.items()}}
            for r in rows]


def _flat(changes: list[dict[str, Any]], side: str) -> list[dict[str, Any]]:
    """The rows as they are on one side of the change: key and set columns, one object each
    (what the evidence's statement reads, for a dry run)."""
    return [{**c["key"], **c[side]} for c in changes]


def undo(act: ActionPlan, st: Statements, shaped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The inverse calls that put the before values back, one per distinct before state."""
    if not act.inverse:
        return []
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in shaped:
        groups.setdefault(json.dumps(r["before"], sort_keys=True, default=str), []).append(r)
    out = []
    params = {c: p for p, c in act.sets.items()}
    keys = {c: p for p, c in act.keys.items()}
    for before, rows in groups.items():
        args: dict[str, Any] = {params[c]: v for c, v in json.loads(before).items()}
        if len(keys) == 1:
            (col, param), = keys.items()
            args[param] = [r["key"][col] for r in rows]
        else:
            args |= {param: rows[0]["key"][col] for col, param in keys.items()}
        out.append({"tool": act.inverse, "arguments": {**args, "dry_run": True}})
    return out


def _writer(ex: Executor, source: str | None) -> Writer:
    name = source or next(iter(ex.project.config.sources))
    if name not in ex.writers:
        ex.writers[name] = Writer(name, ex.project.config.sources[name], ex.project.root)
    return ex.writers[name]


def run(ex: Executor, call: Call) -> Answered:
    plan = call.plan
    act = plan.action
    if act is None:
        raise ToolError(f"{call.tool} has no action in its plan; run tether build")
    product = plan.product or ""
    may_write(ex, call.user, act, product)
    call = dataclasses.replace(call, args=folded(act, call.args))
    given = call.args.get("idempotency_key")
    if isinstance(given, str) and len(given) > IDEMPOTENCY_KEY_MAX:
        raise ToolError(f"idempotency_key: at most {IDEMPOTENCY_KEY_MAX} characters; use a "
                        "shorter key of your own")
    keys = picked(act, call.args)
    to = targets(call, act)
    config = ex.project.config
    noun = grain_noun(config.products[product].grain, product)
    src = ex.source(plan.source)
    st = Statements(ex, call, keys, src.dialect, src.table_expr(act.table))
    masks, _ = ex.policy_of(call.user, product)
    what = asked(keys, to)
    if call.args.get("dry_run", True) is not False:
        return _dry_run(ex, call, st, keys, to, noun, set(masks), what)
    same_rows = confirmed(ex, call, call.args.get("confirmation"), what)
    return _apply(ex, call, st, keys, to, noun, set(masks), same_rows)


def _run_on(ex: Executor, src: Any, st: Statements) -> Callable[[exp.Expr], list[dict[str, Any]]]:
    def go(q: exp.Expr) -> list[dict[str, Any]]:
        fetched = ex.fetch(src, src.render(q), st.bound(q), st.act.max_rows + 1)
        return [dict(zip(fetched.names, r, strict=True)) for r in fetched.rows]
    return go


def _dry_run(ex: Executor, call: Call, st: Statements, keys: list[tuple[Any, ...]],
             to: dict[str, Any], noun: str, masked: set[str], what: str) -> Answered:
    src = ex.source(call.plan.source)
    read = _run_on(ex, src, st)
    rows = read(st.read())
    found_all(st, keys, rows, noun)
    moves_allowed(st.act, rows, to, st.key_cols)
    returns_home(ex, st, rows, to)
    checks = preconditions(st.act, read(st.require(None)), read(st.require(to)), st.key_cols)
    said = effects(st, read, to, noun, masked)
    until = time.time() + ex.project.config.serve.confirmation_seconds
    shaped = _shape(st, rows, to)
    shown = st.shown()  # what the result's rows are: the evidence's statement
    now = read(shown)
    token = sign(ex, call, what, digest(rows), until)
    apply_with = {**{k: v for k, v in call.args.items() if k not in ("dry_run", "confirmation")},
                  "dry_run": False, "confirmation": token}
    result = {"action": st.act.name, "dry_run": True, "applied": False,
              "rows": [{k: jsonable(v) for k, v in r.items()} for r in now],
              "row_count": len(shaped), "changes": shaped, "preconditions": checks,
              "consequences": said,
              "confirmation": token, "apply_with": apply_with,
              "confirmation_expires_at": dt.datetime.fromtimestamp(until, dt.UTC).isoformat(),
              "as_of": dt.datetime.now(dt.UTC).isoformat()}
    evidence = ex.evidence(call, src, src.display(shown), st.bound(shown), [st.product])
    return Answered(result, evidence)


def _registry(ex: Executor) -> Any:
    if ex.registry is None:
        ex.registry = open_registry(ex.project)
    return ex.registry


def _apply(ex: Executor, call: Call, st: Statements, keys: list[tuple[Any, ...]],
           to: dict[str, Any], noun: str, masked: set[str],
           same_rows: Callable[[str], bool]) -> Answered:
    registry = _registry(ex)
    token = str(call.args.get("confirmation")).strip().lower()
    key = log.write_key(call.user, call.tool, token)
    given = call.args.get("idempotency_key")
    idem = log.write_key(call.user, call.tool, "key:" + str(given)) if given else None
    logged = {k: v for k, v in call.args.items() if k != "confirmation"}
    wid, held = log.claim(registry, key, idem, call.user, call.tool, call.version, logged,
                          dt.datetime.now(dt.UTC))
    if held is not None:
        if held["idem_key"] != idem or (idem is None and held["key"] != key):
            raise ToolError(f"Not allowed: this confirmation was already spent (write {wid}); "
                            "a confirmation applies once: call again with dry_run true for a "
                            "new one", refusal={"reason": "confirmation_invalid",
                                                "detail": "already used"})
        if held["arguments"] != json.loads(json.dumps(logged, sort_keys=True, default=str)):
            raise ToolError(f"Not allowed: idempotency key {str(given)[:80]!r} was used for "
                            f"other arguments (write {wid}); use a new key",
                            refusal={"reason": "confirmation_invalid",
                                     "detail": "idempotency key reused"})
        if held["status"] == "applied" and held["body"]:
            replay = dict(held["body"])
            replay["replayed"] = True
            src = ex.source(call.plan.source)
            return Answered(replay, ex.evidence(call, src, None, {}, [st.product]))
        if held["status"] in ("committing", "unsure"):
            raise ToolError(f"Not allowed: write {wid} under this key did not finish (its "
                            "server stopped or its engine failed at the commit): check the "
                            "rows; a new dry run gives a new confirmation",
                            refusal={"reason": "write_in_progress", "detail": wid})
        raise ToolError(f"Not allowed: write {wid} with this key is being applied (or its "
                        "server stopped while it was); ask again in a moment, or check the "
                        "rows and make a new dry run", refusal={"reason": "write_in_progress",
                                                                "detail": wid})
    written = False  # past the UPDATE: a failure from here may have committed
    try:
        writer = _writer(ex, call.plan.source)
        with writer.transaction(ex.timeout) as tx:
            def on_tx(q: exp.Expr) -> list[dict[str, Any]]:
                return tx.rows(q, st.bound(q))

            rows = on_tx(st.read(lock=True))
            found_all(st, keys, rows, noun)
            if not same_rows(digest(rows)):
                raise ToolError(
                    "Not allowed: the rows changed since the dry run; call again with dry_run "
                    "true and confirm what it shows now",
                    refusal={"reason": "confirmation_invalid", "detail": "the rows changed"})
            moves_allowed(st.act, rows, to, st.key_cols)
            returns_home(ex, st, rows, to)
            checks = preconditions(st.act, on_tx(st.require(None)), on_tx(st.require(to)),
                                   st.key_cols)
            said = effects(st, on_tx, to, noun, masked)
            change = st.update(to)
            written = True
            changed = tx.execute(change, st.bound(change))
            if changed != len(rows):
                raise ToolError(f"Not allowed: {changed} of {len(rows)} rows could be changed "
                                "as checked; nothing was applied",
                                refusal={"reason": "confirmation_invalid",
                                         "detail": "the rows changed"})
            left = on_tx(st.outside())
            if left and int(left[0]["n"] or 0):
                raise ToolError("Not allowed: after the change, a row would no longer satisfy "
                                "the preconditions or your row filter; nothing was applied",
                                refusal={"reason": "precondition_failed",
                                         "detail": "after the change"})
            shaped = _shape(st, rows, to)
            result = {"action": st.act.name, "dry_run": False, "applied": True,
                      "rows": _flat(shaped, "after"), "row_count": len(shaped),
                      "changes": shaped, "preconditions": checks, "consequences": said,
                      "write_id": wid, "undo": undo(st.act, st, shaped),
                      "as_of": dt.datetime.now(dt.UTC).isoformat()}
            # kept before the COMMIT: a process that dies after it leaves what it wrote on record
            log.finish(registry, wid, result, dt.datetime.now(dt.UTC), "committing",
                       product=st.product)
        log.finish(registry, wid, result, dt.datetime.now(dt.UTC), "applied")
    except (ToolError, Refusal):  # refused before anything was committed: the key is free
        log.release(registry, wid)
        raise
    except BaseException as e:
        if written:  # the engine failed at or after the UPDATE: whether it committed is unknown
            log.unsure(registry, wid, dt.datetime.now(dt.UTC))
        else:
            log.release(registry, wid)
        if isinstance(e, TetherError):
            known = [str(v) for v in _strings(call.args)]
            raise ToolError(sqlguard.scrub(e.paragraph(), *known)) from None
        raise
    src = ex.source(call.plan.source)
    evidence = ex.evidence(call, src, src.display(change), _shown_params(st.bound(change)),
                           [st.product])
    return Answered(result, evidence)


def _strings(value: Any) -> list[str]:
    """The strings and numbers a caller's arguments hold (an engine error may quote them)."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [str(value)] if value is not None else []


def _shown_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: jsonable(v) for k, v in params.items()}


def _opening(plan: Any, result: dict[str, Any]) -> str:
    n = int(result.get("row_count") or 0)
    rows = f"{n} row" + ("" if n == 1 else "s")
    if result.get("replayed"):
        return f"Already applied (write {result.get('write_id')}): {rows}; nothing more changed"
    if result.get("applied"):
        return f"Applied {result.get('action')} to {rows} (write {result.get('write_id')})"
    apply_with = json.dumps(result.get("apply_with") or {}, separators=(", ", ": "))
    return (f"Dry run of {result.get('action')}: {rows} would change; nothing changed yet. "
            f"To apply it, call {result.get('action')} with {apply_with}")


def _pinned(pinned: Any, current: Any) -> Any:
    """A write pinned to a superseded version runs as the current one (its moves, preconditions,
    roles and consequences, and its confirmations are bound to it) when that takes the same
    arguments; otherwise it is refused, naming the current version."""
    old, new = pinned.plan.action, current.plan.action
    if old is not None and new is not None and (old.keys, old.sets, old.kinds) == (
            new.keys, new.sets, new.kinds):
        return dataclasses.replace(current, asked=pinned.version)
    raise superseded(pinned, current, "a write runs under the current version's rules, which "
                     "take other arguments")


RUNNER = register(Runner("write", run, opening=_opening, whole=True, pinned=_pinned))
