"""Evaluation cases of the second warehouse, with gold answers computed by SQL on it.

Each case is a question as a person would ask it, the user who asks it, and a gold answer that
the governed definitions give on the generated rows for what that user is entitled to. The gold
SQL is portable (DuckDB and PostgreSQL) and binds ``:name`` parameters. Refusals, masks and
restricted columns have constant golds ("refused", "[redacted]", "restricted"). Case ids start
with ``clinic-`` so that none collides with the demo's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

CASES_FILE = "cases.jsonl"
USERS: dict[str, tuple[str, str | None]] = {
    "aud.ines": ("auditor", None), "lead.harbor": ("district_lead", "HARBOR"),
    "lead.riverside": ("district_lead", "RIVERSIDE"),
    "lead.northgate": ("district_lead", "NORTHGATE"), "desk.omar": ("front_desk", None),
}
"""user -> (role, district); mirrors policies.users in tether.yaml."""
CLOCK_DAY = dt.date(2026, 3, 15)
FY26_Q2 = {"start": "2025-10-01", "end": "2025-12-31", "calendar": "fiscal"}
FY26_Q3 = {"start": "2026-01-01", "end": "2026-03-31", "calendar": "fiscal"}
LAST_90 = {"start": (CLOCK_DAY - dt.timedelta(days=89)).isoformat(),
           "end": CLOCK_DAY.isoformat(), "calendar": "calendar"}
ATTENDED_SQL = "visits.visit_state IN ('ARRIVED', 'DISCHARGED', 'TRANSFERRED')"
OPEN_SQL = "claims.claim_state IN ('SUBMITTED', 'IN_REVIEW', 'APPEALED')"
DECIDED_SQL = "claims.claim_state IN ('APPROVED', 'DENIED', 'REIMBURSED')"
ATTENDED = ("attended visit = visit_state ARRIVED, DISCHARGED or TRANSFERRED, counted on the "
            "visit_date")
OPEN = "open claim = claim_state SUBMITTED, IN_REVIEW or APPEALED"
DENIAL = ("claim denial rate = claims DENIED / claims decided (APPROVED, DENIED or REIMBURSED), "
          "by decided_at")
REFUSED = "refused"


def _ts(day: str) -> str:
    return f"CAST('{day} 00:00:00+00' AS TIMESTAMPTZ)"


def _excl(window: dict[str, str]) -> str:
    """The day after an inclusive window's last day."""
    return (dt.date.fromisoformat(window["end"]) + dt.timedelta(days=1)).isoformat()


@dataclass
class Spec:
    case_id: str
    as_user: str
    question: str
    sql: str | None  # the gold as portable SQL with :params; None for a constant gold
    params: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    definition: str | None = None
    definition_sql: str | None = None
    window: dict[str, str] | None = None
    freshness_hours: float | None = 24
    tolerance: float = 0
    scale: float = 1.0  # 0.01: cents to euros
    constant: Any = None  # the gold when sql is None
    note: str = ""


_ATTENDED_GOLD = (
    "SELECT count(*) FROM visits WHERE visit_state IN ('ARRIVED', 'DISCHARGED', 'TRANSFERRED') "
    "AND district = :district AND visit_date >= CAST(:start AS DATE) "
    "AND visit_date < CAST(:end_excl AS DATE)")
_DENIAL_GOLD = (
    "SELECT count(*) FILTER (WHERE c.claim_state = 'DENIED') * 1.0 / count(*) FROM claims c "
    "JOIN member_crosswalk x ON x.member_no = c.member_no "
    "JOIN patients p ON p.patient_uid = x.patient_uid "
    "WHERE c.claim_state IN ('APPROVED', 'DENIED', 'REIMBURSED') AND p.home_district = :district "
    f"AND c.decided_at >= {_ts(LAST_90['start'])} AND c.decided_at < {_ts(_excl(LAST_90))}")
_HOME_CLAIMS = ("member_no IN (SELECT x.member_no FROM member_crosswalk x JOIN patients p ON "
                "p.patient_uid = x.patient_uid WHERE p.home_district = :district)")


def _attended(cid: str, user: str, district: str, q: dict[str, str], question: str) -> Spec:
    return Spec(cid, user, question, _ATTENDED_GOLD,
                {"district": district, "start": q["start"], "end_excl": _excl(q)},
                ["visits.visit_state", "visits.visit_date", "visits.district"],
                ["visits.was_seen", "visits.legacy_zone"], ATTENDED, ATTENDED_SQL, q)


def second_specs(first: dict[str, Any]) -> list[Spec]:
    """The case list; ``first`` holds ids looked up on the warehouse (a patient, a member...)."""
    patient, member, insured = first["patient"], first["member"], first["insured"]
    clinic, day, busy = first["clinic"], first["day"], first["busy_day"]
    feb = {"start": "2026-02-01", "end": "2026-02-28", "calendar": "calendar"}
    jan = {"start": "2026-01-01", "end": "2026-01-31", "calendar": "calendar"}
    out = [
        _attended("clinic-attended-harbor-fy26q2", "aud.ines", "HARBOR", FY26_Q2,
                  "How many attended visits did the Harbor clinics have in FY2026-Q2?"),
        _attended("clinic-attended-riverside-last-quarter", "aud.ines", "RIVERSIDE", FY26_Q2,
                  "How many patient visits did the Riverside clinics see last quarter?"),
        _attended("clinic-attended-lead-harbor-this-quarter", "lead.harbor", "HARBOR", FY26_Q3,
                  "How many visits have we actually seen in my district so far this quarter?"),
        _attended("clinic-attended-lead-northgate-fy26q2", "lead.northgate", "NORTHGATE",
                  FY26_Q2, "How many attendances did Northgate have in FY2026-Q2?"),
        Spec("clinic-open-claims-now", "aud.ines",
             "How many insurance claims are still waiting on the insurer right now?",
             "SELECT count(*) FROM claims WHERE claim_state IN ('SUBMITTED', 'IN_REVIEW', "
             "'APPEALED')", {}, ["claims.claim_state"], ["claims.decided_at"], OPEN, OPEN_SQL,
             note="an APPEALED claim has a decided_at and is still open"),
        Spec("clinic-open-claims-value-eur", "aud.ines",
             "What is the total value of the open claims, in euros?",
             "SELECT sum(claimed_eur) FROM claims WHERE claim_state IN ('SUBMITTED', "
             "'IN_REVIEW', 'APPEALED')", {}, ["claims.claim_state", "claims.claimed_eur"], [],
             OPEN, OPEN_SQL, tolerance=1, note="claimed_eur is already in euros, not cents"),
        Spec("clinic-open-claims-lead-riverside", "lead.riverside",
             "How many open claims do patients from my district have?",
             f"SELECT count(*) FROM claims WHERE claim_state IN ('SUBMITTED', 'IN_REVIEW', "
             f"'APPEALED') AND {_HOME_CLAIMS}", {"district": "RIVERSIDE"},
             ["claims.claim_state"], [], OPEN, OPEN_SQL,
             note="claims reach a district only through the crosswalk and patients"),
        Spec("clinic-fees-discharged-feb-eur", "aud.ines",
             "How much did we bill, in euros, for visits discharged in February 2026?",
             "SELECT sum(fee_cents) FROM visits WHERE visit_state = 'DISCHARGED' AND "
             "visit_date >= DATE '2026-02-01' AND visit_date < DATE '2026-03-01'", {},
             ["visits.visit_state", "visits.fee_cents", "visits.visit_date"],
             ["claims.claimed_eur"], window=feb, tolerance=1, scale=0.01,
             note="fee_cents is in euro cents: euros are /100"),
        Spec("clinic-no-shows-january", "aud.ines",
             "How many patients didn't turn up for their visit in January 2026?",
             "SELECT count(*) FROM visits WHERE visit_state = 'NO_SHOW' AND "
             "visit_date >= DATE '2026-01-01' AND visit_date < DATE '2026-02-01'", {},
             ["visits.visit_state", "visits.visit_date"], ["visits.was_seen"], window=jan),
        Spec("clinic-denial-rate-midtown-90d", "aud.ines",
             "What was the claim denial rate for patients living in Midtown over the last 90 "
             "days?", _DENIAL_GOLD, {"district": "MIDTOWN"},
             ["claims.claim_state", "claims.decided_at", "patients.home_district"],
             ["claims.submitted_at", "visits.district"], DENIAL, DECIDED_SQL, LAST_90,
             tolerance=0.005),
        Spec("clinic-denial-rate-lead-riverside-90d", "lead.riverside",
             "What's our denial rate over the past 90 days?", _DENIAL_GOLD,
             {"district": "RIVERSIDE"},
             ["claims.claim_state", "claims.decided_at", "patients.home_district"],
             ["claims.submitted_at"], DENIAL, DECIDED_SQL, LAST_90, tolerance=0.005),
        Spec("clinic-claims-of-patient", "aud.ines",
             f"How many insurance claims have been filed for patient {insured}?",
             "SELECT count(*) FROM claims c JOIN member_crosswalk x ON x.member_no = c.member_no "
             "WHERE x.patient_uid = :p", {"p": insured},
             ["claims.member_no", "member_crosswalk.patient_uid"],
             note="claims key on the insurer's member number: the patient id finds nothing"),
        Spec("clinic-visits-of-member", "desk.omar",
             f"How many visits has the insurance member {member} had with us, bookings "
             "included?",
             "SELECT count(*) FROM visits v JOIN member_crosswalk x ON x.patient_uid = "
             "v.patient_uid WHERE x.member_no = :m", {"m": member},
             ["visits.patient_uid", "member_crosswalk.member_no"]),
        Spec("clinic-patients-lead-harbor", "lead.harbor",
             "How many of our patients live in my district?",
             "SELECT count(*) FROM patients WHERE home_district = :district",
             {"district": "HARBOR"}, ["patients.home_district"], ["visits.district"]),
        Spec("clinic-lead-harbor-asks-northgate", "lead.harbor",
             "How many patients live in the Northgate district?", None, {},
             ["patients.home_district"], constant=REFUSED,
             note="a Harbor lead is entitled to Harbor rows only: the answer is a refusal"),
        Spec("clinic-discharged-northgate-day", "lead.northgate",
             f"How many visits did the Northgate clinics discharge on {busy}?",
             "SELECT count(*) FROM visits WHERE visit_state = 'DISCHARGED' AND district = "
             "'NORTHGATE' AND visit_date = CAST(:d AS DATE)", {"d": busy},
             ["daily_visit_summary.discharged_visits", "daily_visit_summary.service_day"],
             window={"start": busy, "end": busy, "calendar": "calendar"}),
        Spec("clinic-night-staff", "aud.ines",
             f"How many staff were on the night shift at clinic {clinic} on {day}?",
             "SELECT coalesce(sum(staff_on_duty), 0) FROM clinic_rota WHERE clinic_code = :c "
             "AND shift_name = 'NIGHT' AND rota_day = CAST(:d AS DATE)", {"c": clinic, "d": day},
             ["clinic_rota.staff_on_duty", "clinic_rota.shift_name", "clinic_rota.rota_day"],
             window={"start": day, "end": day, "calendar": "calendar"}, freshness_hours=None),
        Spec("clinic-future-bookings", "aud.ines",
             "How many visits are booked for after today?",
             "SELECT count(*) FROM visits WHERE visit_state = 'BOOKED' AND "
             "visit_date > CAST(:today AS DATE)", {"today": CLOCK_DAY.isoformat()},
             ["visits.visit_state", "visits.visit_date"]),
        Spec("clinic-desk-email-masked", "desk.omar",
             f"What is the contact email of patient {patient}?", None, {},
             ["patients.contact_email"], constant="[redacted]",
             note="contact_email is redacted for the front desk"),
        Spec("clinic-national-id-restricted", "aud.ines",
             f"What is the national id number of patient {patient}?", None, {}, [],
             ["patients.national_id"], constant="restricted",
             note="national_id is restricted for everyone: the only right answer is a refusal"),
    ]
    return out


def first_ids(run: Any) -> dict[str, Any]:
    """Ids the questions name, looked up deterministically; ``run(sql)`` returns rows."""
    insured, member = run(
        "SELECT x.patient_uid, x.member_no FROM member_crosswalk x WHERE EXISTS (SELECT 1 FROM "
        "claims c WHERE c.member_no = x.member_no) ORDER BY x.patient_uid LIMIT 1")[0]
    patient = run("SELECT min(patient_uid) FROM patients")[0][0]
    clinic = run("SELECT min(clinic_code) FROM clinic_rota WHERE shift_name = 'NIGHT'")[0][0]
    day = run("SELECT max(rota_day) FROM clinic_rota")[0][0]
    busy = run("SELECT max(visit_date) FROM visits WHERE district = 'NORTHGATE' AND "
               "visit_state = 'DISCHARGED' AND visit_date < CAST('2026-03-15' AS DATE)")[0][0]
    return {"patient": patient, "member": member, "insured": insured, "clinic": clinic,
            "day": str(day), "busy_day": str(busy)}


def engine_sql(sql: str, dialect: str) -> str:
    """Portable gold SQL for an engine: DuckDB binds ``$name``, SQLAlchemy ``:name``."""
    return re.sub(r"(?<![:\w]):([a-z_]+)", r"$\1", sql) if dialect == "duckdb" else sql


def gold_value(spec: Spec, run: Any, dialect: str) -> Any:
    """A spec's gold answer; ``run(sql, params)`` executes engine SQL and returns rows."""
    if spec.sql is None:
        return spec.constant
    value = run(engine_sql(spec.sql, dialect), spec.params)[0][0]
    if isinstance(value, Decimal | float | int) and not isinstance(value, bool):
        value = round(float(value) * spec.scale, 6)
        if value == int(value) and spec.scale == 1:
            value = int(value)
    return value


def case_line(spec: Spec, value: Any) -> dict[str, Any]:
    role, district = USERS[spec.as_user]
    return {
        "case_id": spec.case_id, "source_trace": None, "user_role": role,
        "as_user": spec.as_user, "question": spec.question,
        "gold": {"answer": value, "tolerance": spec.tolerance, "required_fields": spec.required,
                 "forbidden_fields": spec.forbidden, "definition": spec.definition,
                 "definition_sql": spec.definition_sql, "window": spec.window,
                 "freshness_bound_hours": spec.freshness_hours,
                 "policy_scope": district or "all_districts"},
        "label": {"correct": None, "grounded": None, "failure_class": None,
                  "note": spec.note or None},
        "cost": None,
    }


def build_second_cases(project_dir: Path) -> list[dict[str, Any]]:
    """Every case with its gold computed on the project's warehouse (DuckDB or PostgreSQL)."""
    from tether.config import load_project
    from tether.sources import open_product_source

    project = load_project(project_dir)
    src = open_product_source(project, "visits")
    try:
        first = first_ids(lambda sql: src.run(sql))
        return [case_line(s, gold_value(s, src.run, src.dialect)) for s in second_specs(first)]
    finally:
        src.close()


def write_second_cases(project_dir: Path) -> Path:
    """Write ``project_dir/cases.jsonl`` (one case a line, in the format of tether.eval.cases)."""
    path = Path(project_dir) / CASES_FILE
    lines = [json.dumps(c, default=str) for c in build_second_cases(Path(project_dir))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
