"""The policy in force: the last approved policy over tether.yaml as it stands, less what cannot
be read now, and the executor (with its call pipeline) that reads through it.

Owns tether.yaml as last read (``file_project``), the project with the approved policy in place
of tether.yaml's (``enforced``), the project served (``project``: the enforced one with the
closed products denied, serve/health.py), the policy's version, the executor and the pipeline
over it. Whenever one of them moves, a new executor is made over the same connections and
``generation`` moves: the parts that keep what a role may reach (visibility, the discovery
corpus) start again by it. May call: the registry's policy versions, tether.yaml's loader, the
health checks and the sources. Knows nothing of tools, clients or transports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether.config import Project, load_project
from tether.errors import TetherError
from tether.keyfile import load_secret
from tether.policy.entitle import MaskKey
from tether.policy.model import role_of
from tether.registry import Registry
from tether.registry import policy as policyversion
from tether.serve.executor import Executor
from tether.serve.health import Health
from tether.serve.pagination import load_key
from tether.serve.pipeline import Pipeline

Log = Callable[[str], None]


class PolicyInForce:
    def __init__(self, project: Project, registry: Registry, required: bool,
                 stdio_user: str | None, log: Log):
        self.file_project = project  # tether.yaml as it stands; its policy is not served
        self.registry = registry
        self.required = required
        self.log = log
        # the last approved policy, never tether.yaml's unreviewed edit
        self.enforced, self.version = policyversion.enforced(project, registry,
                                                             required=required)
        self.project = self.enforced  # less what is closed (serve/health.py)
        if stdio_user is not None:
            role_of(self.project.config, stdio_user)  # an unknown user fails at start
        serve = project.config.serve
        self.cursor_key = load_key(project.root / serve.cursor_key_file)
        self.executor = Executor(self.project, self.cursor_key, MaskKey.from_secret(
            load_secret(project.root / serve.mask_key_file)), registry=registry)
        self.pipeline = Pipeline(self.executor)
        self.health = Health(log)
        self.generation = 0
        self.told = False  # a closure found outside the watch loop, for it to tell clients

    def role(self, user: str) -> str:
        return role_of(self.project.config, user)[0]

    def start(self) -> None:
        """What can be read, checked once: a problem no product's closure answers stops the
        server (its connections closed)."""
        try:
            self.check(start=True)
        except Exception:
            self.executor.close()
            raise

    # --- what can be read (serve/health.py) ---

    def _source_of(self) -> Callable[[str], Any]:
        ex, config = self.executor, self.enforced.config
        return lambda p: ex.source(config.products[p].source)

    def check(self, products: Any = None, start: bool = False) -> bool:
        """Check what can be read (every product, or ``products`` and those whose rules read
        them); on a change, serve the project with the closed products denied."""
        moved = self.health.check(self.enforced, self._source_of(), products)
        if moved:
            self.renew()
        elif start:
            self._seed()
        return moved

    def _seed(self) -> None:
        """The executor's columns of each table product, as the check just read them (not
        described twice)."""
        config = self.project.config
        self.executor.caches.columns.update({
            p: cols for p, cols in self.health.described.items()
            if p in config.products and config.products[p].table})

    def after_failure(self, products: list[str]) -> str:
        """A call failed reading ``products``: those that can no longer be read close (and the
        clients hear of it); what closed, in words, for the error the caller gets."""
        before = dict(self.health.closed)
        try:
            if not self.health.after_failure(self.enforced, self._source_of(), products):
                return ""
        except Exception as e:  # the check failing too changes nothing: the call says why
            self.log(f"tether: the check of {', '.join(products)[:200]} failed "
                     f"({type(e).__name__}: {str(e)[:200]})")
            return ""
        self.renew()
        self.told = True
        shut = [p for p in products if p in self.health.closed and p not in before]
        return (f" ({', '.join(shut)} closed: it cannot be read now; every other tool still "
                "answers)") if shut else ""

    def reopen(self, products: list[str]) -> bool:
        """A call to closed ``products``: checked again unless a moment ago (the source may
        answer before the next sweep); True when what is closed moved (then served anew)."""
        try:
            moved = self.health.after_failure(self.enforced, self._source_of(), [
                p for p in products if p in self.health.closed])
        except Exception as e:  # the check failing changes nothing: the call says it is closed
            self.log(f"tether: the check of {', '.join(products)[:200]} failed "
                     f"({type(e).__name__}: {str(e)[:200]})")
            return False
        if moved:
            self.renew()
            self.told = True
        return moved

    def sweep(self) -> bool:
        """Every serve.health_seconds: closed products opened again once they can be read, and
        products whose table is gone closed (serve/health.py)."""
        try:
            moved = self.health.sweep(self.enforced, self._source_of())
        except Exception as e:  # a check that fails is logged; serving goes on as it was
            self.log(f"tether: the check of what can be read failed ({type(e).__name__}: {e})")
            return False
        if moved:
            self.renew()
        return moved

    def closed_message(self, user: str, products: list[str]) -> str | None:
        """Why a product the caller asked for is closed to them, if it is."""
        try:
            role = role_of(self.project.config, user)[0]
        except TetherError:
            return None
        found = self.health.closed_for(role, products)
        return found.said() if found is not None else None

    def renew(self) -> None:
        """Serve the approved policy with the closed products denied, on a new executor over
        the same connections; nothing computed before is kept (``generation`` moves)."""
        self.project = self.health.overlay(self.enforced)
        old = self.executor
        self.executor = Executor(self.project, self.cursor_key, old.mask_key,
                                 sources=old.sources, writers=old.writers,
                                 registry=self.registry)
        self.pipeline = Pipeline(self.executor)
        self.generation += 1
        self._seed()

    # --- the approved policy ---

    def apply(self) -> bool:
        """On a publication: enforce the newest approved policy version, over tether.yaml as
        it stands now (a server running since before a product was added reads it as a new
        one would; a file that no longer loads keeps the last one that did). Every cache that
        holds what a role may read starts again. True if anything moved."""
        found = policyversion.approved_document(self.registry)
        fresh = self._reread()
        if fresh is None and (found is None or found[0] == self.version):
            return False
        if fresh is not None:
            self.file_project = fresh
        enforced, version = policyversion.enforced(self.file_project, self.registry,
                                                   required=self.required)
        # the policy's rules checked again on the columns last read (no catalog read)
        self.health.policy_again(enforced, self._source_of())
        self.enforced = enforced
        self.renew()  # the open connections are kept; nothing computed before is
        self.version = version  # said last: whoever reads it finds the policy in force
        self.log(f"tether: now enforcing access policy {self.version}")
        return True

    def _reread(self) -> Project | None:
        """tether.yaml again, when it changed since it was read (None: unchanged, or it does
        not load now, which the log says)."""
        try:
            fresh = load_project(self.file_project.root)
        except TetherError as e:
            self.log(f"tether: tether.yaml does not load now ({e.paragraph()}); serving it as "
                     "it was last read")
            return None
        return None if fresh.config == self.file_project.config else fresh

    def held_reviews(self) -> list[str]:
        """What tether.yaml holds that this server does not serve, in words (`tether serve`
        logs them at start): each policy change waiting for a reviewer (servers enforce the
        last approved policy meanwhile) and each change the gate blocked (never served)."""
        out = []
        for r in self.registry.reviews():
            if r["status"] == "blocked":
                out.append(f"review {r['id']} was blocked (it would expose a restricted "
                           "column): nothing of it is served")
            elif r["status"] == "pending" and policyversion.holds_policy(r):
                out.append(f"review {r['id']} holds a policy change waiting for a reviewer: "
                           f"serving the approved policy {self.version or '(none)'}")
        return out

    def close(self) -> None:
        self.executor.close()
