"""`make proof`: a real local model answers the demo's questions against tether's generic, bare and
grounded tools and a third-party SQL server; the numbers land in docs/proof.md (docs/proof.md)."""
