"""A small real dbt project, written by the tests and built with dbt-duckdb (dbt-core 1.11) in its
own cached venv (tether.demo.dbtenv): bicycle rentals from two docks, a domain neither the demo
nor the second warehouse uses.

Traps it carries: ``rentals.state`` declares LOST, which no row holds, and the data holds
DISPUTED, which no test declares; ``rider_email`` is pii and ``card_token`` restricted by meta;
``fare_cents`` is in EUR cents by meta only; the semantic layer's ``completed_fares`` counts
COMPLETED rentals only.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from tether.demo.dbtenv import run_dbt

PACKAGE = "cycling"
STATES = ["COMPLETED"] * 6 + ["CANCELLED"] * 3 + ["DISPUTED"]

PROJECT_YML = """name: cycling
version: "1.0.0"
profile: cycling
model-paths: ["models"]
seed-paths: ["seeds"]
"""

PROFILES_YML = """cycling:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: {db}
      threads: 1
"""

RENTALS_SQL = """select rental_no, dock_code, state, fare_cents, rider_email, card_token,
       cast(started_at as timestamp) as started_at
from {{ ref('raw_rentals') }}
"""

DOCKS_SQL = "select dock_code, dock_name from {{ ref('raw_docks') }}\n"

SCHEMA_YML = """version: 2
models:
  - name: docks
    description: "Bicycle docks of the city network."
    columns:
      - name: dock_code
        description: Code painted on the dock.
        data_tests: [unique, not_null]
      - name: dock_name
        description: Street name of the dock.
  - name: rentals
    description: "One row per bicycle rental, from unlock to return."
    deprecation_date: 2031-01-01
    config:
      meta: {owner: mobility-data@example.org}
    columns:
      - name: rental_no
        description: Rental number printed on the receipt.
        data_tests: [unique, not_null]
      - name: dock_code
        description: Dock the bicycle was unlocked at.
        data_tests:
          - relationships:
              arguments: {to: "ref('docks')", field: dock_code}
      - name: state
        description: Where the rental ended up.
        data_tests:
          - accepted_values:
              arguments:
                values: ['COMPLETED', 'CANCELLED', 'LOST']
              config: {severity: warn}
      - name: fare_cents
        description: Fare charged for the rental.
        config:
          meta: {unit: EUR_cents}
      - name: rider_email
        description: Rider's e-mail address.
        config:
          meta: {pii: true}
      - name: card_token
        description: Payment card token.
        config:
          meta: {classification: restricted}
      - name: started_at
        description: When the bicycle was unlocked.
semantic_models:
  - name: rentals
    model: ref('rentals')
    defaults:
      agg_time_dimension: started_at
    entities:
      - name: rental
        type: primary
        expr: rental_no
    dimensions:
      - name: state
        type: categorical
      - name: started_at
        type: time
        type_params:
          time_granularity: day
    measures:
      - name: fares
        agg: sum
        expr: fare_cents
metrics:
  - name: completed_fares
    label: completed fares
    description: Fares of rentals that were completed.
    type: simple
    type_params:
      measure: fares
    filter: "{{ Dimension('rental__state') }} = 'COMPLETED'"
"""

TIME_SPINE_SQL = ("select cast(range as date) as date_day from "
                  "range(date '2025-01-01', date '2027-01-01', interval 1 day)\n")
TIME_SPINE_YML = """version: 2
models:
  - name: metricflow_time_spine
    time_spine:
      standard_granularity_column: date_day
    columns:
      - name: date_day
        granularity: day
"""


def write_project(root: Path, rows: int = 60, seed: int = 3) -> Path:
    """The dbt project in ``root / 'dbt'``, its warehouse at ``root / 'warehouse.duckdb'``."""
    d = root / "dbt"
    (d / "models").mkdir(parents=True, exist_ok=True)
    (d / "seeds").mkdir(exist_ok=True)
    (d / "dbt_project.yml").write_text(PROJECT_YML)
    (d / "profiles.yml").write_text(PROFILES_YML.format(db=root / "warehouse.duckdb"))
    (d / "models" / "rentals.sql").write_text(RENTALS_SQL)
    (d / "models" / "docks.sql").write_text(DOCKS_SQL)
    (d / "models" / "schema.yml").write_text(SCHEMA_YML)
    (d / "models" / "metricflow_time_spine.sql").write_text(TIME_SPINE_SQL)
    (d / "models" / "time_spine.yml").write_text(TIME_SPINE_YML)
    rnd = random.Random(seed)
    lines = ["rental_no,dock_code,state,fare_cents,rider_email,card_token,started_at"]
    for i in range(rows):
        lines.append(f"{1000 + i},D{i % 2 + 1},{STATES[i % len(STATES)]},{rnd.randint(100, 900)},"
                     f"rider{i}@example.org,tok_{i:04d},2026-05-{1 + i % 28:02d} 08:00:00")
    (d / "seeds" / "raw_rentals.csv").write_text("\n".join(lines) + "\n")
    (d / "seeds" / "raw_docks.csv").write_text("dock_code,dock_name\nD1,Harbour Gate\nD2,"
                                               "Mill Lane\n")
    return d


def build(d: Path) -> None:
    """dbt build (seeds, models, tests; the accepted_values test only warns), then dbt docs
    generate (manifest.json and catalog.json)."""
    for args in (("build",), ("docs", "generate")):
        res = run_dbt(d, *args)
        if res.returncode != 0:
            raise subprocess.CalledProcessError(res.returncode, args, res.stdout, res.stderr)


TETHER_YML = """clock: 2026-05-30T12:00:00Z
sources:
  bikes: {{url: "duckdb:///{db}"}}
policies:
  roles:
    analyst: {{tools: ["*"]}}
    support: {{tools: ["*"], masks: {{pii: redact}}}}
  users:
    ana: {{role: analyst}}
    sam: {{role: support}}
"""


def tether_project(root: Path) -> Path:
    p = root / "tether"
    p.mkdir(exist_ok=True)
    (p / "tether.yaml").write_text(TETHER_YML.format(db=root / "warehouse.duckdb"))
    return p
