"""The simulated user: answers an agent's clarifying questions from the case's gold, and counts.

It knows what the person asking would know: the period they mean (window and calendar), the
region or scope they are entitled to, and nothing else. A question it cannot answer from the
gold gets "use your judgement", recorded with ``answered_from: none``.
"""

from __future__ import annotations

import re

from tether.eval.cases import Case

_TIME = re.compile(r"\b(quarter|fiscal|calendar|period|window|year|month|week|date|when|time|"
                   r"range|day)s?\b", re.I)
_SCOPE = re.compile(r"\b(region|regions|territory|territories|areas?|markets?|scopes?|which part|"
                    r"entitle\w*|allowed|access)\b", re.I)


def _names_scope(question: str, scope: str) -> bool:
    """Whether the question names a word of the case's scope (a region's name, say)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]{2,}", scope)}
    return any(w.lower() in words for w in re.findall(r"[A-Za-z]{2,}", question))


class UserSimulator:
    def __init__(self, case: Case):
        self.case = case
        self.asked = 0

    def answer(self, question: str) -> tuple[str, str]:
        """(the reply, which gold field it came from)."""
        self.asked += 1
        gold = self.case.gold
        if _TIME.search(question) and gold.window is not None:
            w = gold.window
            return (f"I mean {w.start.isoformat()} to {w.end.isoformat()} inclusive, on the "
                    f"{w.calendar} calendar.", "window")
        if gold.policy_scope and (_SCOPE.search(question) or _names_scope(question,
                                                                           gold.policy_scope)):
            return f"The scope is {gold.policy_scope}.", "policy_scope"
        return "I don't know more than the question says; use your judgement.", "none"
