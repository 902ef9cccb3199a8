"""The labeller's SQL machinery: statements analysed by shape (shape.py, shaper.py), predicates
in normal form and their equivalence (predicates.py), statements re-run on the source as written
and over a user's entitlement (rerun.py), and evidence statements run to check a result's
claims (sourcerun.py)."""
