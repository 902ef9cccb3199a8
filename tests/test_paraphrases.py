"""Search finds the data a question means when the question shares no word with its product's
name: for each test warehouse a paraphrase set (tests/paraphrases/*.yaml, at least 15 questions,
written after the ranking and not tuned to it), asked through find_data_for_question by a user
who reaches every product, ranks the answering product in the first three for at least 80% of
them. The measured share is printed (and stated in docs/serve.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import call_tools
from tether.config import Project
from tether.serve.discovery import words
from tether.toolgen.discovery import SEARCH

HERE = Path(__file__).parent / "paraphrases"
USERS = {"demo": "fin.ana", "second": "aud.ines"}


@pytest.mark.parametrize("which", ["demo", "second"])
def test_paraphrases_find_their_product(which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    asked: list[dict[str, Any]] = yaml.safe_load((HERE / f"{which}.yaml").read_text())
    assert len(asked) >= 15
    for q in asked:
        assert q["product"] in project.config.products, q
        shared = words(q["question"]) & words(q["product"].replace("_", " "))
        assert not shared, (q, shared)  # no word of the product's name
    results = call_tools(project, USERS[which], [(SEARCH, {"question": q["question"], "limit": 3})
                                                 for q in asked], dedicated_tools="none")
    missed = []
    for q, r in zip(asked, results, strict=True):
        assert not r.is_error, r.content
        names = [m["name"] for m in r.structured_content["matches"]]
        if q["product"] not in names:
            missed.append((q["question"], q["product"], names))
    first = sum(q["product"] == ([m["name"] for m in r.structured_content["matches"]] or [None])[0]
                for q, r in zip(asked, results, strict=True))
    print(f"\n{which}: first match {first} of {len(asked)}")
    share = 1 - len(missed) / len(asked)
    print(f"\n{which}: {len(asked) - len(missed)} of {len(asked)} in the first three "
          f"({share:.0%}); missed: {missed}")
    assert share >= 0.8, missed
