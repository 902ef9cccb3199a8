"""Personal data, found by the column's name and, where the engine can say, its values: an
e-mail address, a phone number, a postal address, a person's name, a birth date, a national id
(``products.P.columns.C.personal``). `tether init` lists what it finds, each marked to confirm,
and suggests a mask for the roles not named to see it; a column marked personal is classified
``pii``, so a role's ``masks: {pii: redact}`` covers it.

Names are read word by word (context/names.py splits snake_case, camelCase and run-together
words it knows): a word alone is rarely enough. ``name`` alone is a product's label, not a
person's (a company, a part), and so is a full name (a school's); a person's name says which
(first, last, given, middle, family, sur-). An
``ip_address`` is no postal one; a birth *place* is no birth date (only a time column, or a
year, month or day of one, is). An e-mail address is also found by its values (every one fits),
whatever the column is called.
"""

from __future__ import annotations

from typing import Literal

from tether.context.names import name_words

Personal = Literal["email", "phone", "address", "name", "birth_date", "national_id"]
KINDS: tuple[Personal, ...] = ("email", "phone", "address", "name", "birth_date", "national_id")

_PHONE = frozenset({"phone", "telephone", "tel", "mobile", "cellphone", "fax", "phonenumber"})
_ADDRESS = frozenset({"address", "addr", "street", "postcode", "zip", "zipcode", "postal",
                      "postalcode"})
_NOT_POSTAL = frozenset({"ip", "mac", "email", "mail", "web", "url", "host", "wallet", "memory",
                         "remote", "local", "server"})
# "full" is no such word: a school, a park or a company has a full name too
_NAME_PARTS = frozenset({"first", "last", "given", "middle", "family", "maiden"})
_NAMES = frozenset({"firstname", "lastname", "surname", "forename", "givenname",
                    "middlename", "familyname", "maidenname"})
BIRTH_WORDS = frozenset({"birth", "born", "dob", "birthday", "birthdate"})
"""A column named with one of these words is about a birth: a time column so named is a birth
date (personal data, and never a table's event time or as_of: profiling/starter.py)."""
_TIME_PARTS = frozenset({"date", "day", "month", "year", "time", "at", "on"})
_NATIONAL = frozenset({"ssn", "passport", "nino", "nin", "taxid", "tin", "national",
                       "nationalid", "sin", "idcard"})
_TIME_KINDS = ("date", "timestamp", "timestamptz")


def personal_by_name(column: str, kind: str) -> Personal | None:
    """What personal data a column's name says it holds (``kind``: the engine's type kind,
    for a birth date, which must be time), or None."""
    words = name_words(column.rsplit(".", 1)[-1])
    w = set(words)
    joined = "".join(words)
    if "email" in w or joined in ("email", "emailaddress") or ("e" in w and "mail" in w):
        return "email"
    if w & _PHONE or joined in _PHONE:
        return "phone"
    if (w & _ADDRESS or joined in _ADDRESS) and not w & _NOT_POSTAL:
        return "address"
    if (joined in _NAMES or w & _NAMES or ("name" in w and w & _NAME_PARTS)
            or ("surname" in joined)):
        return "name"
    if (w & BIRTH_WORDS or joined in BIRTH_WORDS) and (kind in _TIME_KINDS or w & _TIME_PARTS):
        return "birth_date"
    if w & _NATIONAL and ("national" not in w or w & {"id", "number", "no", "code"}):
        return "national_id"
    if {"social", "security"} <= w or ("tax" in w and w & {"id", "number", "no"}):
        return "national_id"
    return None
