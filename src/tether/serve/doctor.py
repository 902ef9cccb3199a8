"""`tether doctor`: what in a project's connections and files would weaken the policy boundary.

tether enforces each caller's entitlements in the SQL it runs, and the connection's own rights
are the second lock: a serving role that may write, own tables, bypass row-level security or read
server files turns any hole in the first lock into a leak. The same goes for the files that hold
the secrets (bearer token hashes, the cursor and mask keys, the registry with its call log) and
for tether.yaml, which holds the policy itself.

Each check is a small function ``Check(project) -> list[Finding]`` in the tuple :data:`CHECKS`,
which a caller may replace or extend. Doctor only reads: it creates no file and sends only
catalog queries in read-only transactions. It never prints a secret: no key material, token,
token hash or password (source URLs are shown redacted, if at all).

Severities: ``warning`` weakens the boundary (``tether doctor`` exits 1); ``info`` is worth
knowing and needs no action (exit 0 when only info lines remain). A key file that does not exist
yet is not a finding: `tether serve` creates it, mode 600, and nothing signed or hashed with an
earlier key can be lost.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from tether.config import PROJECT_FILE, Project
from tether.errors import ConfigError, TetherError
from tether.serve.identity import TokenStore
from tether.sources import dialect_of, open_source, resolve_duckdb_path
from tether.sources.base import table_ref

Severity = Literal["warning", "info"]


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    subject: str
    message: str
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for a log: severity, subject, what is wrong, what to do."""
        return f"{self.severity}: {self.subject}: {self.message} Fix: {self.fix}"


Check = Callable[[Project], list[Finding]]

_POSIX = os.name == "posix"


# --- PostgreSQL ------------------------------------------------------------------------------------

_ATTRIBUTES: tuple[tuple[str, str, str], ...] = (
    # (pg_roles column, what it allows, ALTER ROLE keyword that takes it away)
    ("rolcreaterole", "may create and alter roles (and grant itself more)", "NOCREATEROLE"),
    ("rolcreatedb", "may create databases", "NOCREATEDB"),
    ("rolbypassrls", "bypasses row-level security", "NOBYPASSRLS"),
    ("rolreplication", "may stream replication, which reads every row past any policy",
     "NOREPLICATION"),
)

_PREDEFINED: dict[str, str] = {
    "pg_read_server_files": "may read any file the server can (COPY FROM, pg_read_file)",
    "pg_write_server_files": "may write any file the server can (COPY TO)",
    "pg_execute_server_program": "may run programs on the server (COPY ... PROGRAM)",
    "pg_signal_backend": "may cancel or terminate other sessions",
    "pg_read_all_data": "may read every table, beyond the products",
    "pg_write_all_data": "may write every table",
}

_EXTRA_PRIVILEGES = ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_COLUMN_PRIVILEGES = {"INSERT", "UPDATE", "REFERENCES"}  # may be granted per column too

_ROLE_SQL = ("SELECT current_user, current_database(), r.rolsuper, r.rolcreaterole, "
             "r.rolcreatedb, r.rolbypassrls, r.rolreplication, "
             "has_database_privilege(current_database(), 'CREATE') "
             "FROM pg_roles r WHERE r.rolname = current_user")
_MEMBER_SQL = ("SELECT rolname FROM pg_roles WHERE rolname = ANY(:names) "
               "AND pg_has_role(current_user, oid, 'MEMBER') ORDER BY rolname")


def _table_sql() -> str:
    privileges = ", ".join(
        f"has_table_privilege(c.oid, '{p}')"
        + (f" OR has_any_column_privilege(c.oid, '{p}')" if p in _COLUMN_PRIVILEGES else "")
        for p in _EXTRA_PRIVILEGES)
    # an unqualified name resolves through the session's search_path, as tether's queries do
    return ("SELECT p.product, n.nspname, c.relname, pg_has_role(current_user, c.relowner, "
            "'MEMBER'), has_schema_privilege(current_user, n.oid, 'CREATE'), " + privileges + " "
            "FROM unnest(CAST(:products AS text[]), CAST(:schemas AS text[]), "
            "CAST(:tables AS text[])) AS p(product, s, t) "
            "JOIN pg_class c ON c.oid = to_regclass(CASE WHEN p.s IS NULL THEN quote_ident(p.t) "
            "ELSE quote_ident(p.s) || '.' || quote_ident(p.t) END) "
            "JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY 2, 3, 1")


def _ident(name: str) -> str:
    """A PostgreSQL identifier as a person would type it in a fix."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) else '"' + name.replace('"', '""') + '"'


def _product_tables(project: Project, source: str) -> list[tuple[str, str | None, str]]:
    """(product, schema or None, table) for the table products served from ``source``."""
    cfg = project.config.sources[source]
    out = []
    for name, p in sorted(project.config.products.items()):
        if p.table is None or project.source_name(name) != source:
            continue
        t = table_ref(p.table, "postgres")
        out.append((name, t.db or cfg.schema_ or None, t.name))
    return out


def _reader_fix(role: str, tables: list[str], schemas: list[str]) -> str:
    grants = "; ".join(f"GRANT USAGE ON SCHEMA {s} TO tether_reader" for s in schemas)
    return ("serve as a role with SELECT on the products only: CREATE ROLE tether_reader LOGIN "
            "NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS; "
            + (grants + "; " if grants else "")
            + (f"GRANT SELECT ON {', '.join(tables)} TO tether_reader; " if tables else "")
            + f"then put tether_reader in place of {role} in the source URL.")


def _pg_source(project: Project, name: str) -> list[Finding]:
    cfg = project.config.sources[name]
    wanted = _product_tables(project, name)
    src = open_source(name, cfg, project.root)
    try:
        role, db, superuser, *attrs, db_create = src.run(_ROLE_SQL)[0]
        members = [r[0] for r in src.run(_MEMBER_SQL, {"names": list(_PREDEFINED)})]
        tables = src.run(_table_sql(), {"products": [w[0] for w in wanted],
                                        "schemas": [w[1] for w in wanted],
                                        "tables": [w[2] for w in wanted]}) if wanted else []
    finally:
        src.close()
    qualified = [f"{_ident(s)}.{_ident(t)}" for _, s, t, *_ in tables]
    schemas = sorted({_ident(s) for _, s, *_ in tables})
    reader = _reader_fix(_ident(role), qualified, schemas)
    subject = f"role {role} (source {name})"

    def finding(subj: str, message: str, fix: str) -> Finding:
        return Finding("postgres", "warning", subj, message, fix)

    if superuser:  # every privilege check below passes for a superuser: one line says it all
        return [finding(subject, f"the source connects as {role}, a superuser: it bypasses every "
                        "privilege check and row-level security, and can read and write files "
                        "and run programs on the server.", reader)]
    found = [finding(subject, f"{role} {what}.", f"ALTER ROLE {_ident(role)} {keyword}; or "
                     + reader) for (_, what, keyword), on in zip(_ATTRIBUTES, attrs, strict=True)
             if on]
    found += [finding(subject, f"{role} is a member of {m}: it {_PREDEFINED[m]}.",
                      f"REVOKE {m} FROM {_ident(role)}; or " + reader) for m in members]
    if db_create:
        found.append(finding(f"database {db} (source {name})", f"{role} may create schemas in "
                             f"database {db}.", f"REVOKE CREATE ON DATABASE {_ident(db)} FROM "
                             f"{_ident(role)} (and from PUBLIC); or " + reader))
    seen_schemas: set[str] = set()
    for product, schema, table, owns, schema_create, *privs in tables:
        where = f"{_ident(schema)}.{_ident(table)}"
        if owns:
            found.append(finding(f"table {where} (source {name})", f"{role} owns (or may act as "
                                 f"the owner of) {where}, product {product}: an owner may change "
                                 "and drop it and grant itself anything.",
                                 f"ALTER TABLE {where} OWNER TO another role; or " + reader))
        held = [p for p, on in zip(_EXTRA_PRIVILEGES, privs, strict=True) if on]
        if held and not owns:
            found.append(finding(f"table {where} (source {name})", f"{role} holds "
                                 f"{', '.join(held)} on {where} (product {product}), directly or "
                                 "through a role it belongs to; serving needs SELECT only.",
                                 f"REVOKE {', '.join(held)} ON {where} FROM {_ident(role)} (or "
                                 "from the role that grants it); or " + reader))
        if schema_create and schema not in seen_schemas:
            seen_schemas.add(schema)
            found.append(finding(f"schema {_ident(schema)} (source {name})", f"{role} may create "
                                 f"objects in schema {schema}, where the products live (a table "
                                 "or function there can shadow what a query reads).",
                                 f"REVOKE CREATE ON SCHEMA {_ident(schema)} FROM {_ident(role)} "
                                 "(and from PUBLIC); or " + reader))
    return found


def check_postgres(project: Project) -> list[Finding]:
    """Every PostgreSQL source: the connecting role's attributes, predefined roles, and its
    privileges on the product tables, their schemas and the database."""
    out: list[Finding] = []
    for name, cfg in sorted(project.config.sources.items()):
        if cfg.url is None:  # an API: read with each caller's own credential
            continue
        if dialect_of(cfg.url) == "postgres":
            out += _pg_source(project, name)
        elif resolve_duckdb_path(cfg.url, project.root) is None:
            out.append(Finding("postgres", "info", f"source {name}",
                               f"doctor checks the roles of PostgreSQL sources only, not "
                               f"{dialect_of(cfg.url)}.", "Check by hand that the source's "
                               "user may only read the product tables."))
    return out


# --- DuckDB ----------------------------------------------------------------------------------------


def check_duckdb(project: Project) -> list[Finding]:
    """Every DuckDB source file: a regular file that no group or other user may write.

    Nothing else needs checking: tether opens a DuckDB file read-only, with external access
    (files, network, extensions) off and the configuration locked so no statement can turn it
    back on (tether.sources.duckdb.READ_ONLY_CONFIG). What remains is who else may change the
    data under the tools."""
    out: list[Finding] = []
    for name, cfg in sorted(project.config.sources.items()):
        path = resolve_duckdb_path(cfg.url, project.root) if cfg.url else None
        if path is None:
            continue
        subject = f"source {name} ({_shown(project, path)})"
        if not path.exists():
            out.append(Finding("duckdb", "warning", subject, "the DuckDB file does not exist: "
                               "tether serve cannot read it.", "Fix the path in tether.yaml "
                               "(relative to the project directory) or build the warehouse."))
            continue
        if not path.is_file():
            out.append(Finding("duckdb", "warning", subject, "the DuckDB path is not a regular "
                               "file.", "Point the source at the database file itself."))
            continue
        for f in (path, path.with_name(path.name + ".wal")):
            if _POSIX and f.is_file() and f.stat().st_mode & 0o022:
                out.append(Finding("duckdb", "warning", f"source {name} ({_shown(project, f)})",
                                   f"{_mode(f)}: group or other users may change the data the "
                                   "tools serve.", f"chmod go-w {_arg(f)}"))
    return out


# --- files -----------------------------------------------------------------------------------------


def _registry_file(project: Project) -> Path | None:
    url = project.config.registry.url
    if not url.startswith("sqlite:///"):
        return None  # a server database: its own access control applies
    raw = url[len("sqlite:///"):]
    return Path(raw) if url.startswith("sqlite:////") else project.root / raw


def _shown(project: Project, path: Path) -> str:
    try:
        return str(path.relative_to(project.root))
    except ValueError:
        return str(path)


def _arg(path: Path) -> str:
    """``path`` as a command argument: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def _mode(path: Path) -> str:
    return f"mode {stat.S_IMODE(path.stat().st_mode):o}"


def check_files(project: Project) -> list[Finding]:
    """The secret files (tokens, cursor and mask keys, the SQLite registry and its journal) are
    mode 600 when they exist, and their directories and tether.yaml are not writable by group or
    others (who could then replace a key or token store, or rewrite the policy)."""
    if not _POSIX:
        return []
    serve = project.config.serve
    secrets = [("token store", project.root / serve.tokens_file),
               ("cursor signing key", project.root / serve.cursor_key_file),
               ("mask key", project.root / serve.mask_key_file)]
    registry = _registry_file(project)
    if registry is not None:
        secrets += [("registry", registry)] + [
            ("registry journal", registry.with_name(registry.name + s))
            for s in ("-wal", "-shm", "-journal")]
    out: list[Finding] = []
    dirs = {project.root, project.root / ".tether"}
    for what, path in secrets:
        dirs.add(path.parent)
        if not path.exists() and not path.is_symlink():
            continue  # created mode 600 when first needed
        shown = _shown(project, path)
        if not path.is_file():
            out.append(Finding("files", "warning", shown, f"the {what} is not a regular file.",
                               f"Remove it; tether creates the {what} when it needs it."))
        elif path.stat().st_mode & 0o077:
            out.append(Finding("files", "warning", shown, f"the {what} is {_mode(path)}: group "
                               "or other users may read or change it.", f"chmod 600 {_arg(path)}"))
    for d in sorted(dirs):
        if d.is_dir() and d.stat().st_mode & 0o022:
            shown = "." if d == project.root else _shown(project, d)
            out.append(Finding("files", "warning", shown + "/", f"the directory is {_mode(d)}: "
                               "group or other users may replace the files in it (keys, "
                               "tokens, the policy).", f"chmod go-w {_arg(d)}"))
    yaml_file = project.root / PROJECT_FILE
    if yaml_file.is_file() and yaml_file.stat().st_mode & 0o022:
        out.append(Finding("files", "warning", PROJECT_FILE, f"{PROJECT_FILE} is "
                           f"{_mode(yaml_file)}: group or other users may rewrite the policy.",
                           f"chmod go-w {_arg(yaml_file)}"))
    return out


# --- tokens ----------------------------------------------------------------------------------------


def check_tokens(project: Project) -> list[Finding]:
    """Runner tokens (which may act as any declared user) are worth knowing about."""
    store = TokenStore(project.root / project.config.serve.tokens_file)
    return [Finding("tokens", "info", f"token of {r['user']}", "a runner token: it may act as any "
                    "declared user (X-Tether-As-User).", f"tether token revoke {r['user']} when "
                    "the evaluation is done.") for r in store.list() if r["runner"]]


CHECKS: tuple[Check, ...] = (check_postgres, check_duckdb, check_files, check_tokens)
"""The checks, in order. Callers may pass their own tuple."""


def diagnose(project: Project, checks: tuple[Check, ...] = CHECKS) -> list[Finding]:
    """Every finding of every check, in check order (warnings before info lines within each)."""
    found: list[Finding] = []
    for check in checks:
        try:
            found += sorted(check(project), key=lambda f: f.severity != "warning")
        except OSError as e:
            raise ConfigError(f"tether doctor cannot read {e.filename}: {e.strerror}.",
                              hint="Run it as the user that runs tether serve.") from None
    return found


def startup_warnings(project: Project) -> list[str]:
    """The findings as log lines for `tether serve` (which still starts); a check that cannot
    run is one line too, never a reason not to serve."""
    try:
        found = diagnose(project)
    except TetherError as e:
        return [f"tether doctor could not finish: {e.paragraph()}"]
    return [f"tether doctor: {f.line()}" for f in found]
