"""Importers: where meaning already lives (dbt projects, OpenLineage events, Markdown glossary
documents), each read into one layer that tether.yaml overrides key by key (imports/layer.py)."""
