"""The access policy as one versioned document, what changed between two in words, and whether
a change can only narrow what anyone reads.

The document holds everything that decides who sees what: roles (tool globs, table rules, row
filters, masks, the reviewer flag), users (role and attributes), the restricted globs, the
columns classified ``pii`` or ``restricted``, the products it was approved over, and the
coverage gaps a reviewer accepted. A server enforces the last approved document
(:func:`apply`), whatever tether.yaml says now.

A change is *narrowing* only when its structure proves it: a conjunct added to a row filter (or
a filter where there was none), a mask, deny, restricted glob or classification added, a mask
turned from hash to a constant, a user or role removed, tool or table globs narrowed, a reviewer
flag withdrawn. Anything else is *widening* and waits for a reviewer; when unsure, it waits.
Products added or removed without a new gap are *neutral*.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from sqlglot import exp

from tether.config import (
    PII_SELECTOR,
    Acceptance,
    ColumnFacts,
    PoliciesConfig,
    RoleConfig,
    TableRule,
    TetherConfig,
    UserConfig,
)
from tether.policy import templates

POLICY_KIND = "policy"
"""The plan kind (and tool name) policy versions are published under."""
CLASSIFIED = ("pii", "restricted")
Effect = Literal["narrowing", "neutral", "widening"]
Document = dict[str, Any]


def document(config: TetherConfig, gaps: Iterable[str] = ()) -> Document:
    """The policy of ``config`` as plain JSON (sorted, so equal policies are equal documents);
    ``gaps`` are the coverage gaps (sentences) it stands with."""
    pol = config.policies
    return {
        "roles": {name: {"tools": list(r.tools),
                         "tables": {"allow": list(r.tables.allow), "deny": list(r.tables.deny)},
                         "row_filters": dict(sorted(r.row_filters.items())),
                         "masks": dict(sorted(r.masks.items())),
                         "reviewer": r.reviewer}
                  for name, r in sorted(pol.roles.items())},
        "users": {name: {"role": u.role, "attributes": dict(sorted(u.attributes().items()))}
                  for name, u in sorted(pol.users.items())},
        "restricted": sorted(pol.restricted),
        "classified": classified(config),
        "products": sorted(config.products),
        "gaps": sorted(set(gaps)),
        "accepted": [a.model_dump() for a in sorted(
            config.ci.accept, key=lambda a: (a.item, a.product or "", a.role or ""))],
    }


def classified(config: TetherConfig) -> dict[str, str]:
    """{product.column: pii | restricted} as the products (and their imports) classify them."""
    return {f"{p}.{c}": str(f.classification) for p, prod in sorted(config.products.items())
            for c, f in sorted(prod.columns.items()) if f.classification in CLASSIFIED}


def same(a: Document | None, b: Document | None) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                    default=str)


def apply(config: TetherConfig, doc: Document) -> TetherConfig:
    """``config`` enforcing ``doc``: its roles, users and restricted globs, its pii
    classifications, every restricted classification of either, and every product the
    document does not know denied to every role (a product added since waits with it)."""
    unknown = sorted(set(config.products) - set(doc.get("products", [])))
    roles = {}
    for name, r in doc["roles"].items():
        here = config.policies.roles.get(name)
        tables = TableRule(allow=list(r["tables"]["allow"]),
                           deny=list(r["tables"]["deny"]) + unknown)
        roles[name] = RoleConfig(tools=list(r["tools"]), tables=tables,
                                 row_filters=dict(r["row_filters"]), masks=dict(r["masks"]),
                                 reviewer=bool(r["reviewer"]),
                                 description=here.description if here else None)
    users = {name: UserConfig(role=u["role"], **u["attributes"]) for name, u in doc["users"].items()}
    policies = PoliciesConfig(roles=roles, users=users, restricted=list(doc["restricted"]))
    approved = doc.get("classified", {})
    products = {}
    for pname, p in config.products.items():
        columns = dict(p.columns)
        for cname, facts in list(columns.items()):
            want = approved.get(f"{pname}.{cname}")
            if facts.classification == "restricted" or want == facts.classification:
                continue
            if want is not None or facts.classification == "pii":
                columns[cname] = facts.model_copy(update={"classification": want})
        for target, want in approved.items():
            table, _, cname = target.partition(".")
            if table == pname and cname not in columns:
                columns[cname] = ColumnFacts.model_validate({"classification": want})
        products[pname] = p if columns == p.columns else p.model_copy(update={"columns": columns})
    return config.model_copy(update={"policies": policies, "products": products})


# --- what changed, in words ----------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One difference between two documents: whom it concerns (a role, or None for the whole
    policy), what it is in words, and its effect."""

    role: str | None
    words: str
    effect: Effect

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "words": self.words, "effect": self.effect}


def changes(old: Document | None, new: Document) -> list[Change]:
    """Every difference from ``old`` to ``new``, role by role (``old`` None: the first)."""
    if old is None:
        return [Change(None, "the first policy version", "neutral")]
    out: list[Change] = []
    for name in sorted(set(old["roles"]) | set(new["roles"])):
        a, b = old["roles"].get(name), new["roles"].get(name)
        if a is None:
            out.append(Change(name, f"role {name} added ({_role_words(b)})", "widening"))
        elif b is None:
            out.append(Change(name, f"role {name} removed", "narrowing"))
        else:
            out += _role_changes(name, a, b, old, new)
    out += _user_changes(old["users"], new["users"])
    out += _set_changes(None, "restricted", set(old["restricted"]), set(new["restricted"]),
                        "now restricted: {}", "no longer restricted: {}")
    out += _classified_changes(old.get("classified", {}), new.get("classified", {}))
    for p in sorted(set(new.get("products", [])) - set(old.get("products", []))):
        out.append(Change(None, f"product {p} added", "neutral"))
    for p in sorted(set(old.get("products", [])) - set(new.get("products", []))):
        out.append(Change(None, f"product {p} removed", "neutral"))
    out += _set_changes(None, "gaps", set(old.get("gaps", [])), set(new.get("gaps", [])),
                        "a gap in the policy's coverage: {}", "gap closed: {}")
    out += _set_changes(None, "accepted", set(map(accepted_words, old.get("accepted", []))),
                        set(map(accepted_words, new.get("accepted", []))),
                        "a `tether ci` finding accepted: {}", "acceptance withdrawn: {}")
    return out


def accepted_words(entry: dict[str, Any]) -> str:
    """An acceptance of a document in words (config_model.Acceptance.words)."""
    return Acceptance.model_validate(entry).words()


def effect(found: list[Change]) -> Effect:
    """The effect of a whole change: widening if any part widens, else narrowing if any part
    narrows, else neutral."""
    kinds = {c.effect for c in found}
    return "widening" if "widening" in kinds else "narrowing" if "narrowing" in kinds else (
        "neutral")


def _role_words(r: dict[str, Any]) -> str:
    filters = ", ".join(f"{p}: {templates.in_words(t)}" for p, t in r["row_filters"].items())
    return (f"tools {', '.join(r['tools'])}; " + (f"rows where {filters}" if filters
                                                    else "every row of what it may read"))


def _role_changes(name: str, a: dict[str, Any], b: dict[str, Any], old: Document,
                  new: Document) -> list[Change]:
    out: list[Change] = []
    for product in sorted(set(a["row_filters"]) | set(b["row_filters"])):
        fa, fb = a["row_filters"].get(product), b["row_filters"].get(product)
        if fa == fb:
            continue
        if fb is None:
            out.append(Change(name, f"{name} on {product}: every row, was only rows where "
                              f"{templates.in_words(fa or '')}", "widening"))
        elif fa is None:
            out.append(Change(name, f"{name} on {product}: now only rows where "
                              f"{templates.in_words(fb)} (was every row)", "narrowing"))
        else:
            out.append(Change(name, f"{name} on {product}: rows where "
                              f"{templates.in_words(fa)}, now {templates.in_words(fb)}",
                              "narrowing" if narrows(fa, fb) else "widening"))
    out += _mask_changes(name, a["masks"], b["masks"], old, new)
    if a["tools"] != b["tools"]:
        out.append(Change(name, f"{name}: tools {', '.join(b['tools']) or '(none)'} (was "
                          f"{', '.join(a['tools']) or '(none)'})",
                          "narrowing" if globs_within(b["tools"], a["tools"]) else "widening"))
    ta, tb = a["tables"], b["tables"]
    if ta != tb:
        narrower = globs_within(tb["allow"], ta["allow"]) and globs_within(ta["deny"], tb["deny"])
        out.append(Change(name, f"{name}: tables allow {', '.join(tb['allow']) or '(none)'}, "
                          f"deny {', '.join(tb['deny']) or '(none)'} (was allow "
                          f"{', '.join(ta['allow']) or '(none)'}, deny "
                          f"{', '.join(ta['deny']) or '(none)'})",
                          "narrowing" if narrower else "widening"))
    if a["reviewer"] != b["reviewer"]:
        out.append(Change(name, f"{name}: " + ("may now decide reviews" if b["reviewer"]
                                               else "no longer decides reviews"),
                          "widening" if b["reviewer"] else "narrowing"))
    return out


MASK_STRENGTH = {"hash": 1, "redact": 2, "null": 2}
"""How little a mask shows: a hash still tells equal values apart; redact and null show nothing."""


def _mask_changes(name: str, a: dict[str, str], b: dict[str, str], old: Document,
                  new: Document) -> list[Change]:
    out = []
    # as they apply: the pii selector over the columns each document classifies pii
    ea, eb = _expanded(a, old), _expanded(b, new)
    for target in sorted(set(ea) | set(eb)):
        ma, mb = ea.get(target), eb.get(target)
        if ma == mb:
            continue
        if mb is None:
            out.append(Change(name, f"{name}: {target} no longer masked (was {ma})", "widening"))
        elif ma is None:
            out.append(Change(name, f"{name}: {target} now masked ({mb})", "narrowing"))
        else:
            out.append(Change(name, f"{name}: {target} masked by {mb}, was {ma}",
                              "narrowing" if MASK_STRENGTH[mb] > MASK_STRENGTH[ma]
                              else "widening"))
    selector = _selector_change(a, b)
    if selector is not None:
        out.append(Change(name, f"{name}: {selector[0]}", selector[1]))
    return out


def _selector_change(a: dict[str, str], b: dict[str, str]) -> tuple[str, Effect] | None:
    """The pii selector itself, apart from the columns it covers today (a selector removed
    unmasks the pii columns of tomorrow)."""
    sa, sb = a.get(PII_SELECTOR), b.get(PII_SELECTOR)
    if sa == sb:
        return None
    if sb is None:
        return f"the {PII_SELECTOR} mask selector removed (was {sa})", "widening"
    if sa is None:
        return f"the {PII_SELECTOR} mask selector added ({sb})", "narrowing"
    return (f"the {PII_SELECTOR} mask selector {sb} (was {sa})",
            "narrowing" if MASK_STRENGTH[sb] > MASK_STRENGTH[sa] else "widening")


def _expanded(masks: dict[str, str], doc: Document) -> dict[str, str]:
    out: dict[str, str] = {}
    if PII_SELECTOR in masks:
        out |= {t: masks[PII_SELECTOR] for t, c in doc.get("classified", {}).items()
                if c == "pii"}
    return out | {t: m for t, m in masks.items() if t != PII_SELECTOR}


def _user_changes(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    out = []
    for name in sorted(set(a) | set(b)):
        ua: dict[str, Any] = a.get(name) or {}
        ub: dict[str, Any] = b.get(name) or {}
        if ua == ub:
            continue
        if not ua:
            attrs = ", ".join(f"{k} {v}" for k, v in ub["attributes"].items())
            out.append(Change(ub["role"], f"user {name} added (role {ub['role']}"
                              + (f"; {attrs}" if attrs else "") + ")", "widening"))
        elif not ub:
            out.append(Change(ua["role"], f"user {name} removed", "narrowing"))
        else:
            if ua["role"] != ub["role"]:
                out.append(Change(ub["role"], f"user {name}: role {ub['role']} (was "
                                  f"{ua['role']})", "widening"))
            for k in sorted(set(ua["attributes"]) | set(ub["attributes"])):
                va, vb = ua["attributes"].get(k), ub["attributes"].get(k)
                if va != vb:
                    out.append(Change(ub["role"], f"user {name}: {k} {_shown(vb)} (was "
                                      f"{_shown(va)})", "widening"))
    return out


def _shown(v: Any) -> str:
    return "(none)" if v is None else str(v)


def _set_changes(role: str | None, what: str, a: set[str], b: set[str], added: str,
                 removed: str) -> list[Change]:
    """Entries of a restricting list: one added narrows, one removed widens (for ``gaps``,
    the other way round: a new gap widens)."""
    grows: Effect = "widening" if what in ("gaps", "accepted") else "narrowing"
    shrinks: Effect = "narrowing" if what in ("gaps", "accepted") else "widening"
    return ([Change(role, added.format(x), grows) for x in sorted(b - a)]
            + [Change(role, removed.format(x), shrinks) for x in sorted(a - b)])


def _classified_changes(a: dict[str, str], b: dict[str, str]) -> list[Change]:
    out = []
    rank = {None: 0, "pii": 1, "restricted": 2}
    for target in sorted(set(a) | set(b)):
        ca, cb = a.get(target), b.get(target)
        if ca == cb:
            continue
        words = (f"{target} classified {cb}" + (f" (was {ca})" if ca else "")) if cb else (
            f"{target} no longer classified {ca}")
        out.append(Change(None, words, "narrowing" if rank[cb] > rank[ca] else "widening"))
    return out


# --- narrowing, by structure ---------------------------------------------------------------------


def narrows(old: str, new: str, dialect: str = "duckdb") -> bool:
    """Whether row filter ``new`` can only keep rows ``old`` keeps: every conjunct of ``old``
    is a conjunct of ``new`` (so ``new`` is ``old AND ...``). Unparsable: not proven."""
    try:
        a, b = templates.parse(old, dialect), templates.parse(new, dialect)
    except templates.TemplateError:
        return False
    have = {_canonical(c) for c in b.conjuncts()}
    return all(_canonical(c) in have for c in a.conjuncts())


def _canonical(e: exp.Expr) -> str:
    while isinstance(e, exp.Paren):
        e = e.this
    return e.sql(dialect="duckdb")  # identifiers as written: "A" and a may differ


def glob_within(glob: str, outer: str) -> bool:
    """Whether every name ``glob`` matches, ``outer`` matches too (proven, or False)."""
    if glob == outer or outer == "*":
        return True
    wild = any(ch in glob for ch in "*?[")
    if not wild:
        return fnmatchcase(glob, outer)
    prefix = outer[:-1]
    return outer.endswith("*") and not any(ch in prefix for ch in "*?[") and glob.startswith(
        prefix)


def globs_within(globs: list[str], outer: list[str]) -> bool:
    """Whether the names ``globs`` match are all matched by ``outer``."""
    return all(any(glob_within(g, o) for o in outer) for g in globs)
