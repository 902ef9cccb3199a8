"""What the server can read now: products closed where they fail, so every other tool answers.

A product is **closed** when its source cannot be reached (``source_unreachable``), its table or
SQL cannot be read (``missing_table``), or a rule of the access policy that guards it no longer
holds on the source (``policy``: a row filter that does not compile because a table it reads is
gone, a mask or restricted entry that names no column now). A policy problem closes the product
for the role whose rule it is (a restricted entry or a freshness condition: for every role);
the others close it for everyone. A closed product is denied to those roles through the one
answer to "may this role read this product?" (the roles' ``tables.deny``, in the project the
server enforces), so no surface lists it, searches it or reads it, and a call to it says what
failed and what to do.

The server checks every product when it starts, the products a failed call or a failed shaping
read, and every ``serve.health_seconds`` the closed products (to open them again once they can be
read) and the products whose table a source no longer lists (one catalog read per source). A
change of what is closed starts the server's caches again and tells its clients.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable

from tether.config import Project
from tether.context.schema import Column
from tether.errors import ConfigError
from tether.profiling.policycheck import policy_problems
from tether.profiling.readable import Closed, column_names, read_product, readers, unlisted
from tether.sources import Source

AGAIN = 2.0
"""Seconds after a failed call had a product checked before another failure checks it again (a
burst of failing calls checks it once)."""


Columns = dict[str, list[str]]


class Health:
    """The closed products of one server, and the checks that find them."""

    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self.closed: dict[str, list[Closed]] = {}
        self.columns: Columns = {}  # each readable product's column names, as last read
        self.described: dict[str, list[Column]] = {}  # and its columns, as its source says
        self._failed: dict[str, float] = {}  # when a failure last had a product checked
        self._swept = 0.0
        self._lock = threading.Lock()

    # --- asking ---

    def closed_for(self, role: str, products: Iterable[str]) -> Closed | None:
        """The first closure among ``products`` that applies to ``role``."""
        for p in products:
            for c in self.closed.get(p, []):
                if c.applies_to(role):
                    return c
        return None

    def overlay(self, project: Project) -> Project:
        """``project`` with each closed product denied to the roles it is closed for."""
        if not self.closed:
            return project
        clone = copy.copy(project)
        config = project.config.model_copy(deep=True)
        for name, role in config.policies.roles.items():
            shut = sorted(p for p, cs in self.closed.items() if any(c.applies_to(name)
                                                                     for c in cs))
            if shut:
                role.tables = role.tables.model_copy(
                    update={"deny": [*role.tables.deny, *(_literal(p) for p in shut)]})
        clone.config = config
        return clone

    # --- checking ---

    def check(self, project: Project, source: Callable[[str], Source],
              products: Iterable[str] | None = None) -> bool:
        """Check ``products`` (default: all) and those whose row filter or SQL reads their
        tables; True when what is closed moved. A policy problem of a product this server
        cannot close (none named) fails as before: the server does not start."""
        config = project.config
        wanted = set(config.products) if products is None else set(products) & set(
            config.products)
        wanted |= readers(project, wanted)
        found: list[Closed] = []
        with self._lock:
            for p in sorted(wanted):
                got = read_product(project, source, p)
                if isinstance(got, Closed):
                    found.append(got)
                    self.columns.pop(p, None)
                    self.described.pop(p, None)
                else:
                    self.columns[p] = column_names(got)
                    self.described[p] = got
            found += self._policy(project, source, {p: self.columns[p] for p in wanted
                                                    if p in self.columns})
            return self._settle({p: cs for p, cs in self.closed.items() if p not in wanted},
                                found)

    def policy_again(self, project: Project, source: Callable[[str], Source]) -> bool:
        """Another policy (or tether.yaml read again): its rules over the columns last read,
        and a whole check of the products not read yet; True when what is closed moved."""
        config = project.config
        with self._lock:
            kept = {p: [c for c in cs if c.kind != "policy"] for p, cs in self.closed.items()
                    if p in config.products}
            columns = {p: cols for p, cols in self.columns.items() if p in config.products}
            moved = self._settle({p: cs for p, cs in kept.items() if cs},
                                 self._policy(project, source, columns))
        fresh = [p for p in config.products if p not in self.columns and p not in self.closed]
        return self.check(project, source, fresh) or moved if fresh else moved

    def _settle(self, kept: dict[str, list[Closed]], found: list[Closed]) -> bool:
        """What is closed now: ``kept`` and ``found``; each change logged. True if it moved."""
        now = {p: list(cs) for p, cs in kept.items()}
        for c in found:
            now.setdefault(c.product, []).append(c)
        moved = now != self.closed
        for p in sorted(now):
            if now[p] != self.closed.get(p):
                self.log(f"tether: closed {p}: " + "; ".join(
                    f"{c.kind} ({c.reason[:300]})" + (f" for {', '.join(sorted(c.roles))}"
                                                      if c.roles else "") for c in now[p]))
        for p in sorted(set(self.closed) - set(now)):
            self.log(f"tether: {p} can be read again; it is open")
        self.closed = now
        return moved

    def _policy(self, project: Project, source: Callable[[str], Source], columns: Columns
                ) -> list[Closed]:
        """Each policy problem of these products, as the closure of what it guards."""
        if not columns:
            return []
        out = []
        for prob in policy_problems(project, columns, source):
            if prob.product is None:
                raise ConfigError(prob.message, where=project.where(*prob.loc),
                                  hint="Fix the key named in tether.yaml; nothing was served.")
            out.append(Closed(prob.product, "policy", f"{project.where(*prob.loc)}: "
                              f"{prob.message}", frozenset([prob.role]) if prob.role else None))
        return out

    def after_failure(self, project: Project, source: Callable[[str], Source],
                      products: Iterable[str]) -> bool:
        """A call or a shaping failed reading ``products``: check those not checked a moment
        ago; True when what is closed moved."""
        now = time.monotonic()
        stale = [p for p in products if p in project.config.products
                 and now - self._failed.get(p, -AGAIN) >= AGAIN]
        self._failed |= dict.fromkeys(stale, now)
        return bool(stale) and self.check(project, source, stale)

    def sweep(self, project: Project, source: Callable[[str], Source]) -> bool:
        """Every ``serve.health_seconds``: the closed products, and those whose table its
        source no longer lists; True when what is closed moved."""
        if time.monotonic() - self._swept < project.config.serve.health_seconds:
            return False
        self._swept = time.monotonic()
        suspects = set(self.closed) | unlisted(project, source)
        return bool(suspects) and self.check(project, source, suspects)


def _literal(name: str) -> str:
    """A product name as a ``tables`` glob matching only itself."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in name)
