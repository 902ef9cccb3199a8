"""`tether eval label`: score recorded traces against their cases' gold.

One rule per module, registered with the keys it reads and writes and run as a checked pipeline
(``SCORERS``) over a shared :class:`LabelContext`: cost, correctness, support (an answer no
result holds), grounding (fields), definition, freshness, policy, the entity / structural /
temporal symptoms, and the verdict (grounded, primary failure class). What a call ran is read
from evidence only (calls.py); the SQL machinery is in ``sql/``. The rules are written out in
docs/eval-label.md.
"""

from tether.eval.label.context import LabelContext
from tether.eval.label.pipeline import LABELS_FILE, SCORERS, label_run, label_trace, write_labels
from tether.eval.label.verdict import PRECEDENCE
from tether.eval.label.work import RULES, Finding, Rule, Scorer, Work, rule

__all__ = ["LABELS_FILE", "PRECEDENCE", "RULES", "SCORERS", "Finding", "LabelContext", "Rule",
           "Scorer", "Work", "label_run", "label_trace", "rule", "write_labels"]
