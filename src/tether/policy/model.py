"""Policy questions answered from tether.yaml alone."""

from __future__ import annotations

from fnmatch import fnmatchcase

from tether.config import RoleConfig, TetherConfig
from tether.context.schema import Column
from tether.errors import ConfigError, NotPermittedError


def user_names(config: TetherConfig) -> list[str]:
    return sorted(config.policies.users)


def role_of(config: TetherConfig, user: str) -> tuple[str, RoleConfig]:
    """(role name, role) of a declared user; an unknown user is an error naming the known ones."""
    u = config.policies.users.get(user)
    if u is None:
        raise ConfigError(
            f"there is no user named {user!r} in policies.users.",
            hint="Users: " + (", ".join(user_names(config)) or "(none declared)") + ".",
        )
    return u.role, config.policies.roles[u.role]


def reviewers(config: TetherConfig) -> list[str]:
    """Users whose role has ``reviewer: true``: who may decide a review."""
    return sorted(u for u, cfg in config.policies.users.items()
                  if (role := config.policies.roles.get(cfg.role)) is not None and role.reviewer)


def require_reviewer(config: TetherConfig, user: str) -> str:
    """``user``'s role name when it has ``reviewer: true``; else an error naming who may decide.

    Every way of deciding a review (the CLI, the console) asks this same question."""
    allowed = ", ".join(reviewers(config)) or "none yet"
    if user not in config.policies.users:
        raise NotPermittedError(
            f"{user!r} is not a user in policies.users, so cannot decide a review.",
            hint=f"Reviewers: {allowed}. Give a role `reviewer: true` in tether.yaml.")
    role_name, role = role_of(config, user)
    if not role.reviewer:
        raise NotPermittedError(
            f"{user} (role {role_name}) is not a reviewer.",
            hint=f"Reviewers: {allowed}. Give a role `reviewer: true` in tether.yaml.")
    return role_name


def tool_visible(config: TetherConfig, user: str | None, tool: str,
                 roles: list[str] | None = None) -> bool:
    """Whether ``user`` sees ``tool`` (no user: every tool, for the project owner): the role's
    tool globs, and for a write tool the roles its action names (``roles``)."""
    if user is None:
        return True
    name, role = role_of(config, user)
    if roles is not None and name not in roles:
        return False
    return any(fnmatchcase(tool, pattern) for pattern in role.tools)


def values_scoped(config: TetherConfig, product: str, column: str | None) -> bool:
    """Whether some role sees only part of ``product``'s rows or a mask of ``column``: then a
    value observed over every row is not one every caller may see (in a description, which is
    the same for all of them)."""
    facts = config.products[product].columns.get(column or "")
    for role in config.policies.roles.values():
        if product in role.row_filters or f"{product}.{column}" in role.masks:
            return True
        if "pii" in role.masks and facts is not None and facts.classification == "pii":
            return True
    return False


def restricted_columns(config: TetherConfig, product: str, columns: list[str]) -> set[str]:
    """Columns of a product that no tool may expose: policy globs and `restricted` classification."""
    facts = config.products[product].columns if product in config.products else {}
    classified = {c for c, f in facts.items() if f.classification == "restricted"}
    return {
        c for c in columns
        if c in classified or c.split(".")[0] in classified
        or any(fnmatchcase(f"{product}.{c}", g) for g in config.policies.restricted)
    }


def exposable(config: TetherConfig, product: str, columns: list[Column]) -> list[str]:
    """Top-level columns a tool may select: neither the column nor any nested field of it is
    restricted (a STRUCT holding a restricted field is withheld whole)."""
    out = []
    for c in columns:
        names = [c.name] + [leaf.name for leaf in c.leaves()]
        if not restricted_columns(config, product, names):
            out.append(c.name)
    return out
