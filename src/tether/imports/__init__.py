"""Importers: where meaning already lives (dbt projects, OpenLineage events; the Markdown glossary
documents read at load time live in tether.layers), each read into one layer that tether.yaml
overrides key by key (layers/model.py)."""
