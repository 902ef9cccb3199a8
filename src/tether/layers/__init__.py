"""Import layers, read where the configuration loads (layer 0, beside ``tether.config``): the
layer model and its files (model.py), finding a project's layers and naming where a merged value
came from (loading.py), and the glossary documents read at load time (glossary_docs.py). The
importers that write layers (``tether.imports``: dbt, OpenLineage) sit above the configuration
and use these; the configuration never imports them."""
