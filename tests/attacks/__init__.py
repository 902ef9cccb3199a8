"""The attack corpus against tether's policy boundary (corpus.py), an oracle that judges results
without tether's policy code (oracle.py), and the harness that runs one against the other
(harness.py). Used by tests/test_attacks.py and tests/test_policy_property.py."""
