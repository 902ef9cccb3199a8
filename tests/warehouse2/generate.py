"""The rows of the second warehouse, drawn from ``random.Random(seed)`` and bulk-loaded into DuckDB.

Rows are generated in Python (a few hundred milliseconds at scale 1), written to CSV files in a
temporary folder and loaded with COPY into tables whose types, NOT NULL columns and primary keys
are declared up front. The same seed and scale give the same rows on every machine.
"""

from __future__ import annotations

import csv
import datetime as dt
import random
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import duckdb

CLOCK = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
"""The warehouse's fixed 'now' (also ``clock:`` in tether.yaml)."""
TODAY = CLOCK.date()
HISTORY_START = dt.date(2024, 7, 1)  # first day of fiscal year 2025 (years start in July)
LEGACY_CUTOVER = dt.date(2025, 9, 30)
"""The old scheduler's last day: ``visits.was_seen`` is not maintained after it."""
MERGER_DAY = dt.date(2024, 1, 1)
"""Riverside clinics opened before it kept the MID zone code of the old Midtown trust."""

DISTRICTS = ("HARBOR", "MIDTOWN", "NORTHGATE", "RIVERSIDE")
DISTRICT_WEIGHTS = (32, 27, 18, 23)
ZONES = {"HARBOR": "HBR", "MIDTOWN": "MID", "NORTHGATE": "NGT", "RIVERSIDE": "RVS"}
CLINIC_PREFIX = {"HARBOR": "HB", "MIDTOWN": "MT", "NORTHGATE": "NG", "RIVERSIDE": "RS"}
CLINICS_PER_DISTRICT = 6

VISIT_KINDS = ("CONSULT", "FOLLOW_UP", "VACCINATION", "IMAGING", "LAB_DRAW", "TELEHEALTH")
VISIT_KIND_WEIGHTS = (34, 22, 10, 8, 16, 10)
VISIT_FEE_CENTS = {"CONSULT": 6500, "FOLLOW_UP": 4000, "VACCINATION": 2500, "IMAGING": 18000,
                   "LAB_DRAW": 3500, "TELEHEALTH": 3000}
NO_SHOW_FEE_CENTS = 1500
VISIT_STATES = ("BOOKED", "ARRIVED", "DISCHARGED", "TRANSFERRED", "NO_SHOW", "RESCINDED")
ATTENDED_STATES = ("ARRIVED", "DISCHARGED", "TRANSFERRED")
CLAIM_STATES = ("SUBMITTED", "IN_REVIEW", "APPEALED", "APPROVED", "DENIED", "REIMBURSED")
OPEN_CLAIM_STATES = ("SUBMITTED", "IN_REVIEW", "APPEALED")
DECIDED_CLAIM_STATES = ("APPROVED", "DENIED", "REIMBURSED")
INSURERS = ("Mutua Atlantica", "Vida Segura", "Caixa Norte")
SHIFTS = ("EARLY", "LATE", "NIGHT")

TABLES = ("clinics", "patients", "member_crosswalk", "visits", "claims", "clinic_rota")

_FIRST = ("Ana", "Bruno", "Carla", "Duarte", "Elena", "Filipe", "Gloria", "Hugo", "Ines", "Joao",
          "Karim", "Leonor", "Marta", "Nuno", "Olga", "Pedro", "Quirina", "Rui", "Sofia", "Tiago",
          "Ursula", "Vasco", "Wen", "Xavier", "Yara", "Zeca")
_LAST = ("Almeida", "Barros", "Costa", "Dias", "Esteves", "Ferreira", "Gomes", "Henriques",
         "Igreja", "Jesus", "Lopes", "Moreira", "Nunes", "Oliveira", "Pires", "Queiroz", "Ramos",
         "Silva", "Teixeira", "Vieira")
_STREETS = ("Quayside", "Lighthouse", "Old Mill", "Cathedral", "Market", "Station", "Orchard",
            "Bridge", "Ferry", "Hilltop", "Canal", "Granary")
_KINDS = ("Family Clinic", "Health Centre", "Medical Practice", "Polyclinic")

# Declared schema: (column, DuckDB type, nullable). Column order is the table's.
SCHEMA: dict[str, list[tuple[str, str, bool]]] = {
    "clinics": [
        ("clinic_code", "VARCHAR", False), ("clinic_name", "VARCHAR", False),
        ("district", "VARCHAR", False), ("legacy_zone", "VARCHAR", False),
        ("opened_on", "DATE", False), ("bed_count", "INTEGER", False),
        ("ingested_at", "TIMESTAMPTZ", False),
    ],
    "patients": [
        ("patient_uid", "VARCHAR", False), ("full_name", "VARCHAR", False),
        ("home_district", "VARCHAR", False), ("contact_email", "VARCHAR", False),
        ("contact_phone", "VARCHAR", False), ("national_id", "VARCHAR", False),
        ("passport_no", "VARCHAR", True), ("birth_year", "INTEGER", False),
        ("enrolled_at", "TIMESTAMPTZ", False), ("ingested_at", "TIMESTAMPTZ", False),
    ],
    "member_crosswalk": [
        ("patient_uid", "VARCHAR", False), ("member_no", "VARCHAR", False),
        ("insurer_name", "VARCHAR", False), ("covered_since", "DATE", False),
    ],
    "visits": [
        ("visit_no", "BIGINT", False), ("patient_uid", "VARCHAR", False),
        ("clinic_code", "VARCHAR", False), ("district", "VARCHAR", False),
        ("legacy_zone", "VARCHAR", False), ("visit_date", "DATE", False),
        ("visit_kind", "VARCHAR", False), ("visit_state", "VARCHAR", False),
        ("was_seen", "BOOLEAN", False), ("checked_in_at", "TIMESTAMPTZ", True),
        ("fee_cents", "BIGINT", False), ("ingested_at", "TIMESTAMPTZ", False),
    ],
    "claims": [
        ("claim_ref", "VARCHAR", False), ("member_no", "VARCHAR", False),
        ("visit_no", "BIGINT", False), ("submitted_at", "TIMESTAMPTZ", False),
        ("decided_at", "TIMESTAMPTZ", True), ("claim_state", "VARCHAR", False),
        ("claimed_eur", "DECIMAL(10, 2)", False), ("ingested_at", "TIMESTAMPTZ", False),
    ],
    "clinic_rota": [  # no primary key, on purpose
        ("rota_day", "DATE", False), ("clinic_code", "VARCHAR", False),
        ("shift_name", "VARCHAR", False), ("staff_on_duty", "INTEGER", False),
    ],
}
PRIMARY_KEYS: dict[str, list[str]] = {
    "clinics": ["clinic_code"], "patients": ["patient_uid"], "member_crosswalk": ["patient_uid"],
    "visits": ["visit_no"], "claims": ["claim_ref"],
}


@dataclass(frozen=True)
class Sizes:
    patients: int
    visits: int
    rota_days: int

    @classmethod
    def for_scale(cls, scale: float) -> Sizes:
        return cls(max(80, round(4000 * scale)), max(400, round(24000 * scale)),
                   max(14, min(90, round(90 * scale))))


def _ts(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S+00")


def _day(rng: random.Random, lo: dt.date, hi: dt.date) -> dt.date:
    """A day in [lo, hi], uniformly."""
    return lo + dt.timedelta(days=rng.randrange((hi - lo).days + 1))


def _at(day: dt.date, seconds: int) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)


def _weighted(rng: random.Random, values: Sequence[str], weights: Sequence[int]) -> str:
    """``rng.choices`` with integer weights, spelled out so the draw never depends on floats."""
    r = rng.randrange(sum(weights))
    for v, w in zip(values, weights, strict=True):
        if r < w:
            return v
        r -= w
    raise AssertionError("unreachable")


def generate(scale: float = 1.0, seed: int = 11) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, in table order."""
    rng = random.Random(seed)
    sizes = Sizes.for_scale(scale)
    clinics = _clinics(rng)
    patients = _patients(rng, sizes.patients)
    crosswalk = _crosswalk(rng, patients)
    visits = _visits(rng, sizes.visits, clinics, patients)
    claims = _claims(rng, visits, crosswalk)
    rota = _rota(rng, clinics, sizes.rota_days)
    return {"clinics": clinics, "patients": patients, "member_crosswalk": crosswalk,
            "visits": visits, "claims": claims, "clinic_rota": rota}


def _clinics(rng: random.Random) -> list[tuple[Any, ...]]:
    out = []
    ingested = _ts(CLOCK - dt.timedelta(hours=3))
    for district in DISTRICTS:
        for k in range(1, CLINICS_PER_DISTRICT + 1):
            code = f"CLN-{CLINIC_PREFIX[district]}{k:02d}"
            name = f"{rng.choice(_STREETS)} {rng.choice(_KINDS)} {CLINIC_PREFIX[district]}{k}"
            # two old clinics per district; Riverside clinics older than the merger keep MID
            opened = (_day(rng, dt.date(2008, 1, 1), dt.date(2019, 12, 31)) if k <= 2
                      else _day(rng, dt.date(2015, 1, 1), dt.date(2025, 6, 30)))
            zone = ("MID" if district == "RIVERSIDE" and opened < MERGER_DAY
                    else ZONES[district])
            out.append((code, name, district, zone, opened.isoformat(), rng.randrange(0, 41),
                        ingested))
    return out


def _patients(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    out = []
    first_day = dt.date(2019, 1, 1)
    ingested = _ts(CLOCK - dt.timedelta(minutes=30))
    for i in range(n):
        uid = f"PT-{(i * 7919) % 900000 + 100000:06d}"
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        district = _weighted(rng, DISTRICTS, DISTRICT_WEIGHTS)
        email = f"{first.lower()}.{last.lower()}{i + 1}@mail.example.org"
        phone = f"+351 9{rng.randrange(10**8):08d}"
        national = f"NIF{(i * 104729) % 900000000 + 100000000:09d}"
        passport = f"X{rng.randrange(10**7):07d}" if rng.random() < 0.15 else None
        birth = rng.randrange(1935, 2023)
        enrolled = _at(_day(rng, first_day, TODAY - dt.timedelta(days=2)), rng.randrange(86400))
        out.append((uid, f"{first} {last}", district, email, phone, national, passport, birth,
                    _ts(enrolled), ingested))
    return out


def _crosswalk(rng: random.Random, patients: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    out = []
    for i, p in enumerate(patients):
        if rng.random() >= 0.72:  # uninsured: no member number
            continue
        member = f"MBR{(i * 7727) % 900000000 + 100000000:09d}"
        enrolled = dt.date.fromisoformat(p[8][:10])
        covered = max(dt.date(2018, 1, 1), enrolled - dt.timedelta(days=rng.randrange(0, 900)))
        out.append((p[0], member, rng.choice(INSURERS), covered.isoformat()))
    return out


def _visit_state(rng: random.Random, day: dt.date) -> str:
    if day > TODAY:
        return "BOOKED"
    if day == TODAY:
        return _weighted(rng, ("BOOKED", "ARRIVED", "DISCHARGED"), (50, 20, 30))
    return _weighted(rng, ("DISCHARGED", "TRANSFERRED", "ARRIVED", "NO_SHOW", "RESCINDED"),
                     (74, 5, 2, 11, 8))


def _visits(rng: random.Random, n: int, clinics: list[tuple[Any, ...]],
            patients: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    by_district: dict[str, list[tuple[Any, ...]]] = {d: [] for d in DISTRICTS}
    for c in clinics:
        by_district[c[2]].append(c)
    out = []
    fresh = CLOCK - dt.timedelta(minutes=15)
    for j in range(n):
        p = patients[min(len(patients) - 1, int(rng.random() ** 1.5 * len(patients)))]
        home = p[2]
        district = home if rng.random() < 0.8 else rng.choice([d for d in DISTRICTS if d != home])
        clinic = rng.choice(by_district[district])
        if rng.random() < 0.04:  # a future booking
            day = TODAY + dt.timedelta(days=rng.randrange(1, 29))
        else:
            enrolled = dt.date.fromisoformat(p[8][:10])
            day = _day(rng, max(HISTORY_START, enrolled), TODAY)
        kind = _weighted(rng, VISIT_KINDS, VISIT_KIND_WEIGHTS)
        state = _visit_state(rng, day)
        checked_in = None
        if state in ATTENDED_STATES:
            checked_in = _at(day, 7 * 3600 + rng.randrange(11 * 3600))
            if checked_in > CLOCK - dt.timedelta(minutes=20):
                checked_in = CLOCK - dt.timedelta(minutes=20 + rng.randrange(180))
        if state in ATTENDED_STATES:
            base = VISIT_FEE_CENTS[kind]
            fee = int(base * (100 + rng.randrange(0, 21)) / 100) // 50 * 50
        elif state == "NO_SHOW":
            fee = NO_SHOW_FEE_CENTS
        else:
            fee = 0
        # the old scheduler counted ARRIVED and DISCHARGED (not TRANSFERRED); nothing after cutover
        was_seen = day <= LEGACY_CUTOVER and state in ("ARRIVED", "DISCHARGED")
        ingested = min(_at(day, 26 * 3600), fresh) if day <= TODAY else fresh
        out.append((100001 + j, p[0], clinic[0], district, clinic[3], day.isoformat(), kind,
                    state, was_seen, _ts(checked_in) if checked_in else None, fee,
                    _ts(ingested)))
    return out


def _claim_state(rng: random.Random, age_days: int) -> str:
    if age_days < 7:
        return _weighted(rng, ("SUBMITTED", "IN_REVIEW"), (60, 40))
    if age_days < 30:
        return _weighted(rng, ("IN_REVIEW", "APPROVED", "DENIED", "REIMBURSED", "APPEALED"),
                         (30, 30, 15, 20, 5))
    return _weighted(rng, ("REIMBURSED", "DENIED", "APPROVED", "APPEALED", "IN_REVIEW",
                           "SUBMITTED"), (65, 17, 6, 4, 3, 5))


def _claims(rng: random.Random, visits: list[tuple[Any, ...]],
            crosswalk: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    member_of = {x[0]: x[1] for x in crosswalk}
    out = []
    ingested = _ts(CLOCK - dt.timedelta(minutes=45))
    seq = 0
    for v in visits:
        member = member_of.get(v[1])
        if member is None or v[7] not in ("DISCHARGED", "TRANSFERRED") or rng.random() >= 0.6:
            continue
        day = dt.date.fromisoformat(v[5])
        submitted = _at(day, rng.randrange(1, 15) * 86400 + rng.randrange(86400))
        if submitted > CLOCK - dt.timedelta(hours=1):
            continue  # not submitted yet
        age = (CLOCK - submitted).days
        state = _claim_state(rng, age)
        decided = None
        if state in (*DECIDED_CLAIM_STATES, "APPEALED"):  # an appeal follows a first decision
            decided = submitted + dt.timedelta(seconds=rng.randrange(
                2 * 86400, max(2 * 86400 + 1, int((CLOCK - submitted).total_seconds()) - 3600)))
        coverage = Decimal(70 + rng.randrange(0, 31)) / 100
        value = (Decimal(v[10]) * coverage / 100).quantize(Decimal("0.01"), ROUND_HALF_UP)
        seq += 1
        out.append((f"CLM-{1000000 + seq:07d}", member, v[0], _ts(submitted),
                    _ts(decided) if decided else None, state, str(value), ingested))
    return out


def _rota(rng: random.Random, clinics: list[tuple[Any, ...]], days: int
          ) -> list[tuple[Any, ...]]:
    out = []
    for back in range(days, 0, -1):
        day = TODAY - dt.timedelta(days=back)
        for c in clinics:
            beds = c[5]
            for shift, base in zip(SHIFTS, (6, 5, 2), strict=True):
                if shift == "NIGHT" and beds == 0:
                    continue  # clinics without beds close at night
                staff = base + beds // 10 + rng.randrange(0, 3)
                out.append((day.isoformat(), c[0], shift, staff))
    return out


def write_duckdb(path: Path, rows: dict[str, list[tuple[Any, ...]]]) -> dict[str, int]:
    """Create every table in a new DuckDB file at ``path`` and load its rows; rows per table."""
    con = duckdb.connect(str(path))
    try:
        con.execute("SET TimeZone = 'UTC'")
        with tempfile.TemporaryDirectory(prefix="warehouse2-") as tmp:
            for table in TABLES:
                cols = SCHEMA[table]
                defs = [f'"{c}" {t}{"" if nullable else " NOT NULL"}' for c, t, nullable in cols]
                if table in PRIMARY_KEYS:
                    defs.append("PRIMARY KEY (" + ", ".join(PRIMARY_KEYS[table]) + ")")
                con.execute(f'CREATE TABLE "{table}" ({", ".join(defs)})')
                if rows[table]:
                    f = Path(tmp) / f"{table}.csv"
                    _write_csv(f, rows[table])
                    con.execute(f"COPY \"{table}\" FROM '{f}' "
                                "(FORMAT csv, HEADER false, NULLSTR '\\N', QUOTE '\"')")
        con.execute("CHECKPOINT")
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in TABLES}
    finally:
        con.close()


def _write_csv(path: Path, rows: Iterable[tuple[Any, ...]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        for r in rows:
            w.writerow(["\\N" if v is None else ("true" if v is True else "false" if v is False
                                                  else v) for v in r])
