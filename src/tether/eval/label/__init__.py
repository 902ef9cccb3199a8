"""`tether eval label`: score recorded traces against their cases' gold.

One scorer per module, run as a pipeline (``SCORERS``) over a shared :class:`LabelContext`:
cost, correctness, grounding (fields), definition, freshness, policy, the entity / structural /
temporal symptoms, and the verdict (grounded, primary failure class). The rules are written out
in docs/eval-label.md.
"""

from tether.eval.label.context import LabelContext
from tether.eval.label.pipeline import LABELS_FILE, SCORERS, label_run, label_trace, write_labels
from tether.eval.label.verdict import PRECEDENCE
from tether.eval.label.work import Finding, Scorer, Work

__all__ = ["LABELS_FILE", "PRECEDENCE", "SCORERS", "Finding", "LabelContext", "Scorer", "Work",
           "label_run", "label_trace", "write_labels"]
