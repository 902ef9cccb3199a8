"""`make demo`, stage 10: the demo company's dbt project, imported under its tether.yaml.

The support team documents its tickets in dbt: column descriptions, an ``accepted_values`` test
on priority (it declares CRITICAL, which no ticket has, and omits URGENT, which many have) and a
semantic model with the metric ``open_urgent_tickets``. dbt (dbt-core 1.11 with dbt-duckdb, in
its own cached venv: tether.demo.dbtenv) builds the project into its own DuckDB file,
``DEMO/dbt/dbt.duckdb``, reading the demo warehouse attached read-only, so the warehouse stays
as the rest of the demo left it; its ``support_tickets`` model has the relation of the demo's
product of that name, so the import merges into that product. Then ``tether import dbt``,
``tether check`` (the new metric tool and the imported wording publish at once) and one sentence
whose source is dbt.

    python -m tether.demo.dbt_tour DEMO_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tether.context.meta import context_of
from tether.demo.dbtenv import run_dbt

PROJECT_YML = """name: helpdesk
version: "1.0.0"
profile: helpdesk
model-paths: ["models"]
"""

PROFILES_YML = """helpdesk:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: {dbt_db}
      threads: 1
      attach:
        - path: {warehouse}
          alias: demo
          read_only: true
"""

TICKETS_SQL = "select * from {{ source('demo', 'support_tickets') }}\n"

TIME_SPINE_SQL = ("select cast(range as date) as date_day from "
                  "range(date '2023-01-01', date '2028-01-01', interval 1 day)\n")

SCHEMA_YML = """version: 2
sources:
  - name: demo
    database: demo
    schema: main
    tables:
      - name: support_tickets
models:
  - name: metricflow_time_spine
    time_spine:
      standard_granularity_column: date_day
    columns:
      - name: date_day
        granularity: day
  - name: support_tickets
    description: "Helpdesk tickets as the support team models them."
    config:
      meta: {owner: support-ops@example.com}
    columns:
      - name: ticket_id
        description: The helpdesk's ticket number.
        data_tests: [unique, not_null]
      - name: priority
        description: How urgent the customer said the ticket is when they opened it.
        data_tests:
          - accepted_values:
              arguments:
                values: ['LOW', 'MEDIUM', 'HIGH', 'CRITICAL']
              config: {severity: warn}
      - name: status
        description: Where the ticket stands in the support queue.
semantic_models:
  - name: support_tickets
    model: ref('support_tickets')
    defaults:
      agg_time_dimension: opened_at
    entities:
      - name: ticket
        type: primary
        expr: ticket_id
    dimensions:
      - name: priority
        type: categorical
      - name: status
        type: categorical
      - name: sales_region
        type: categorical
      - name: opened_at
        type: time
        type_params:
          time_granularity: day
    measures:
      - name: tickets
        agg: count
        expr: ticket_id
metrics:
  - name: open_urgent_tickets
    label: open urgent tickets
    description: Tickets marked URGENT that support has not solved yet.
    type: simple
    type_params:
      measure: tickets
    filter: "{{ Dimension('ticket__priority') }} = 'URGENT' and {{ Dimension('ticket__status') }} <> 'SOLVED'"
"""


def write_project(demo: Path) -> Path:
    d = demo / "dbt"
    (d / "models").mkdir(parents=True, exist_ok=True)
    (d / "dbt_project.yml").write_text(PROJECT_YML)
    (d / "profiles.yml").write_text(PROFILES_YML.format(dbt_db=d / "dbt.duckdb",
                                                        warehouse=demo / "warehouse.duckdb"))
    (d / "models" / "support_tickets.sql").write_text(TICKETS_SQL)
    (d / "models" / "metricflow_time_spine.sql").write_text(TIME_SPINE_SQL)
    (d / "models" / "schema.yml").write_text(SCHEMA_YML)
    return d


def tether(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "tether"
    print(f"$ tether {' '.join(args)}", flush=True)
    res = subprocess.run([str(exe), *args], capture_output=True, text=True)
    print(res.stdout, end="", flush=True)
    if res.stderr.strip():
        print(res.stderr, end="", file=sys.stderr, flush=True)
    return res


def main(demo: Path) -> int:
    d = write_project(demo)
    print("$ dbt build && dbt docs generate   (dbt-core 1.11 + dbt-duckdb, cached venv)",
          flush=True)
    for args in (("build",), ("docs", "generate")):
        res = run_dbt(d, *args)
        if res.returncode != 0:
            print(res.stdout[-3000:], res.stderr[-2000:], file=sys.stderr)
            return 2
    if tether("import", "dbt", str(d), "--project", str(demo)).returncode != 0:
        return 2
    if tether("check", "--project", str(demo)).returncode not in (0, 10):
        return 2
    if tether("explain", "products.support_tickets.columns.priority", "--project",
              str(demo)).returncode != 0:
        return 2
    tool = json.loads((demo / "tools" / "open_urgent_tickets.json").read_text())
    ctx = context_of(tool)
    sentence = next(s for s, src in ctx["sources"].items() if src == "dbt")
    print(f"one sentence of open_urgent_tickets whose source is dbt:\n  {sentence!r}\n"
          f"  read from {ctx['origins'][sentence]}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tether.demo.dbt_tour DEMO_DIR")
    raise SystemExit(main(Path(sys.argv[1]).resolve()))
