"""The demo's drift story, one step at a time (`tether demo drift [STEP]`).

Each step changes the demo warehouse or its tether.yaml the way production data and people do;
`tether check` then has something to find. Steps: on-hold (a new order status,
additive), rename (a renamed column, breaking), redefine-active (an edited governed definition,
semantic), unmask-tax-id (a policy edit that would expose the restricted column: blocked),
new-restricted-column (a new column matching a restricted glob: excluded).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from tether.config import PROJECT_FILE, load_project
from tether.demo import WAREHOUSE_FILE
from tether.demo.warehouse import CLOCK
from tether.errors import ConfigError


def _sql(project_dir: Path, sql: str) -> None:
    """Run a change on the demo's warehouse: the DuckDB file, or the PostgreSQL schema the demo
    was loaded into (the SQL is written to run on both)."""
    project = load_project(project_dir)
    source = next(iter(project.config.sources.values()))
    if source.url is not None and source.url.startswith("postgres"):
        import psycopg

        from tether.sources.sqlalchemy import libpq_url

        with psycopg.connect(libpq_url(source.url), autocommit=True) as con:
            if source.schema_:
                con.execute(psycopg.sql.SQL("SET search_path TO {}").format(
                    psycopg.sql.Identifier(source.schema_)))
            con.execute(sql)
        return
    db = project_dir / WAREHOUSE_FILE
    if not db.exists():
        raise ConfigError(f"{db} does not exist: drift steps change the demo warehouse.",
                          hint="Run `tether demo init` first.")
    with duckdb.connect(str(db)) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(sql)


def _yaml(project_dir: Path, old: str, new: str) -> None:
    path = project_dir / PROJECT_FILE
    text = path.read_text(encoding="utf-8")
    if old not in text:
        raise ConfigError(f"{path} does not contain the text this step edits (already applied, "
                          "or edited by hand).", hint="Rebuild the demo with --force.")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    load_project(project_dir)  # the edited file must still load


def on_hold(d: Path) -> None:
    """Twelve orders enter a new status, ON_HOLD, this morning (a compliance check)."""
    clock = CLOCK.strftime("%Y-%m-%d %H:%M:%S+00")
    _sql(d, f"""
        UPDATE orders SET status = 'ON_HOLD',
          loaded_at = TIMESTAMP WITH TIME ZONE '{clock}' - INTERVAL '2 minutes'
        WHERE order_id IN (SELECT order_id FROM orders WHERE status IN ('NEW', 'PAID')
                           ORDER BY placed_at DESC LIMIT 12)""")


def rename(d: Path) -> None:
    """orders.currency is renamed currency_code upstream."""
    _sql(d, "ALTER TABLE orders RENAME COLUMN currency TO currency_code")


def redefine_active(d: Path) -> None:
    """Finance decides a paused subscription no longer makes a customer active."""
    _yaml(d, 'definition: "A customer with a subscription whose status is ACTIVE or '
             'PAUSED_BILLING at any point in the fiscal quarter."',
          'definition: "A customer with a subscription whose status is ACTIVE at any point in '
          'the fiscal quarter (paused subscriptions no longer count)."')
    _yaml(d, 'predicate: "subscriptions.status IN (\'ACTIVE\', \'PAUSED_BILLING\')"\n'
             '    time: subscriptions.period_start',
          'predicate: "subscriptions.status IN (\'ACTIVE\')"\n    time: subscriptions.period_start')


def unmask_tax_id(d: Path) -> None:
    """Someone lifts the restriction on customers.tax_id in tether.yaml."""
    _yaml(d, "      tax_id: {classification: restricted}\n", "")
    _yaml(d, 'restricted: [customers.tax_id, "*.ssn*"]', 'restricted: ["*.ssn*"]')


def new_restricted_column(d: Path) -> None:
    """A column matching the restricted glob *.ssn* lands in customers."""
    _sql(d, "ALTER TABLE customers ADD COLUMN ssn_last4 VARCHAR DEFAULT '0000'")


STEPS: dict[str, Callable[[Path], None]] = {
    "on-hold": on_hold, "rename": rename, "redefine-active": redefine_active,
    "unmask-tax-id": unmask_tax_id, "new-restricted-column": new_restricted_column,
}


def apply(project_dir: Path, step: str) -> str:
    """Apply one step; returns its one-line description."""
    fn = STEPS.get(step)
    if fn is None:
        raise ConfigError(f"unknown drift step {step!r}.", hint="Steps: " + ", ".join(STEPS))
    fn(project_dir)
    return (fn.__doc__ or step).strip()
