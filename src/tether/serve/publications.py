"""The publications this server serves: the newest safe version of each tool, the versions before
it (a pinned caller gets one inside its deprecation window), what is withheld and why, which
tools the list holds (serve.dedicated_tools), and the loop that hears of new publications.

Owns ``current``, ``history``, ``listed``, ``withheld`` and the publication they were read at.
:meth:`Publications.reload` reads the registry again (the approved policy first, through the
policy in force), and :meth:`Publications.watch` does it whenever a publication is announced
(or every few seconds), flushes the call log, lets the policy in force check what can be read,
and tells the clients when anything moved. May call: the registry, generation (the bare and
generic modes, which publish nothing), the exposure check, and the parts it is given.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Protocol

import anyio
import sqlalchemy as sa

from tether.context.meta import retired_info
from tether.errors import ConfigError, TetherError
from tether.policy import exposure as exposing
from tether.profiling import profile_project
from tether.registry import Registry, ToolVersion
from tether.registry.announce import Listener
from tether.serve.calllog import CallLog
from tether.serve.inforce import PolicyInForce
from tether.serve.kinds import Version
from tether.toolgen import Mode, QueryPlan, generate
from tether.toolgen.discovery import Listed, Setting, listed
from tether.toolgen.kinds import KINDS
from tether.toolgen.modes import strip_grounding

CATCH_UP = 5.0
"""Seconds between reads of a PostgreSQL registry when nothing was announced (what a missed
notification costs at most)."""


class Telling(Protocol):
    """Who hears that the tool list changed (serve/sessions.py's Clients)."""

    async def tell(self) -> None: ...


class Publications:
    def __init__(self, registry: Registry, policy: PolicyInForce, mode: Mode,
                 dedicated_tools: Setting, log: Callable[[str], None]):
        self.registry = registry
        self.policy = policy
        self.mode = mode
        self.dedicated_tools = dedicated_tools
        self.log = log
        self.publication = -1
        self.current: dict[str, Version] = {}
        self.history: dict[tuple[str, str], Version] = {}
        self.listed = Listed(frozenset(), "dedicated", 0, 0)
        self.withheld: dict[tuple[str, str], list[str]] = {}
        self.ear: Listener | None = None

    def reload(self) -> bool:
        """Load the published (or generated) tools and the approved policy; True if either
        changed."""
        latest = self.registry.latest_publication()
        if latest == self.publication:
            return False
        moved = self.policy.apply()
        if self.mode != "grounded":
            self.publication = latest
            return self._generated() or moved
        versions = self.registry.versions()
        if not versions:
            raise ConfigError("no published tools to serve.",
                              where=str(self.policy.project.root),
                              hint="Run `tether build` first.")
        self._load(self._safe(versions))
        self.publication = latest
        return True

    def _generated(self) -> bool:
        """Bare and generic mode: the tools generated once from the data (bare serves what
        grounded serves, with the grounding stripped: the same list)."""
        if self.current:
            return False
        project = self.policy.project
        profiles = {p.product: p for p in profile_project(project)}
        tools = generate(project, profiles, "grounded" if self.mode == "bare" else self.mode)
        self.listed = listed(project.config, [(t.name, t.wire(), t.plan) for t in tools],
                             self.dedicated_tools)
        for t in tools:
            t = strip_grounding(t) if self.mode == "bare" else t
            self.current[t.name] = Version(t.name, "1.0.0", t.wire(), t.plan)
        return True

    def _load(self, versions: list[ToolVersion]) -> None:
        """Each tool's versions, oldest first: a superseded one served until its window ends
        (its description says so), a retired tool until its own."""
        days = self.policy.project.config.drift.deprecation_days
        by_name: dict[str, list[Version]] = {}
        for v in versions:
            by_name.setdefault(v.name, []).append(
                Version(v.name, v.version, v.definition, QueryPlan.model_validate(v.plan)))
            if len(by_name[v.name]) > 1:
                prev = by_name[v.name][-2]
                prev.successor = v.version
                prev.served_until = dt.datetime.fromisoformat(v.published_at) + dt.timedelta(
                    days=days)
                by_name[v.name][-1].noted_until = prev.served_until
                # the superseded definition states its window where a pinned model reads it
                prev.definition = {**prev.definition, "description": (
                    f"{prev.definition.get('description', '')} Deprecated: served until "
                    f"{prev.served_until:%Y-%m-%d}; use version {v.version}.")}
        for vs in by_name.values():
            last = vs[-1]
            info = retired_info(last.definition)
            if info is None:
                continue
            published = next(v.published_at for v in versions
                             if (v.name, v.version) == (last.name, last.version))
            last.served_until = dt.datetime.fromisoformat(published) + dt.timedelta(days=days)
            last.definition = {**last.definition, "description": (
                f"{last.definition.get('description', '')} Served until "
                f"{last.served_until:%Y-%m-%d}, then removed.")}
        current = {n: vs[-1] for n, vs in by_name.items()}
        self.listed = listed(self.policy.project.config, [(n, v.definition, v.plan)
                                                          for n, v in current.items()],
                             self.dedicated_tools)
        self.current = current
        self.history = {(v.name, v.version): v for vs in by_name.values() for v in vs}

    def _safe(self, versions: list[ToolVersion]) -> list[ToolVersion]:
        """The versions the policy as it stands lets this server serve: a version that would
        expose a restricted column (however it reached the registry) is withheld, and the
        tool is served at its newest safe version, if any."""
        restricted = exposing.restricted_by(self.policy.project,
                                            self.registry.state(prefix="product:"))
        safe = []
        for v in versions:
            plan_kind = str((v.plan or {}).get("kind", ""))
            if plan_kind not in KINDS:  # made by a plugin or a newer tether: not run here
                if (v.name, v.version) not in self.withheld:
                    self.withheld[(v.name, v.version)] = []
                    self.log(f"tether: not serving {v.name} {v.version}: its kind "
                             f"{plan_kind!r} is not one this server knows (a plugin not "
                             "loaded, or a newer tether)")
                continue
            found = exposing.exposure(v.definition, v.plan or {}, restricted)
            if not found:
                safe.append(v)
            elif (v.name, v.version) not in self.withheld:
                self.withheld[(v.name, v.version)] = found
                self.log(f"tether: not serving {v.name} {v.version}: it would expose the "
                         f"restricted {', '.join(found)}")
        return safe

    async def watch(self, calls: CallLog, clients: Telling, interval: float = 0.5) -> None:
        """Hear of publications and tell every connected client. On a PostgreSQL registry a
        publication is announced (registry/announce.py) and heard within ``interval``; the
        registry is read again every CATCH_UP seconds anyway, and on each tick otherwise. A
        registry that cannot be reached is logged and retried; the server keeps serving what it
        last read."""
        ear = self.registry.listener()
        self.ear = ear
        looked = time.monotonic()
        while True:
            if ear is None:
                await anyio.sleep(interval)
                look = True
            else:
                look = await anyio.to_thread.run_sync(ear.wait, interval, self.publication,
                                                      abandon_on_cancel=True)
            look = look or time.monotonic() - looked >= CATCH_UP
            if calls.pending:
                await anyio.to_thread.run_sync(calls.flush)
            if not look:
                continue
            looked = time.monotonic()
            try:
                moved = await anyio.to_thread.run_sync(self.reload)
            except sa.exc.SQLAlchemyError as e:
                calls.down(e)
                continue
            except TetherError as e:  # the registry emptied, a policy that no longer loads
                self.log(f"tether: the registry could not be read again ({e.paragraph()}); "
                         "serving what was last read")
                continue
            if not calls.pending:
                calls.up()
            moved = (await anyio.to_thread.run_sync(self.policy.sweep) or moved
                     or self.policy.told)
            if moved:
                self.policy.told = False
                await clients.tell()

    def close(self) -> None:
        if self.ear is not None:
            self.ear.close()
