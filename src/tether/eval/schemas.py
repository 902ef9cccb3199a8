"""Write the committed JSON Schemas of the evaluation files to ``schemas/``.

    python -m tether.eval.schemas --write     # after changing cases.py or trace.py
A test fails when the committed files and the models disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tether.eval.trace import schemas

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "schemas"


def rendered() -> dict[str, str]:
    return {name: json.dumps(s, indent=2, sort_keys=True) + "\n" for name, s in schemas().items()}


def main(argv: list[str]) -> int:
    if "--write" not in argv:
        print(__doc__)
        return 2
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, text in rendered().items():
        (SCHEMA_DIR / name).write_text(text, encoding="utf-8")
        print(f"wrote schemas/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
