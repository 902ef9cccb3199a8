"""What tether reads of a dbt project, in one shape whether it came from ``target/manifest.json``
or, without a manifest, from the project's ``schema.yml`` files (imports/dbt_files.py).

The models ignore the many keys of a manifest tether does not read (``extra="ignore"``): a
manifest is dbt's format, not ours, and grows a key with most releases. What is read is typed,
so a damaged manifest is one error naming the node and the key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Dbt(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Deps(_Dbt):
    nodes: list[str] = Field(default_factory=list)


class Checksum(_Dbt):
    name: str = "sha256"
    checksum: str = ""


class NodeConfig(_Dbt):
    meta: dict[str, Any] = Field(default_factory=dict)
    materialized: str | None = None
    contract: dict[str, Any] = Field(default_factory=dict)


class DbtColumn(_Dbt):
    name: str
    description: str | None = ""
    meta: dict[str, Any] = Field(default_factory=dict)
    config: NodeConfig = Field(default_factory=NodeConfig)
    data_type: str | None = None

    def all_meta(self) -> dict[str, Any]:
        """meta as dbt 1.10+ writes it (under config) and as older projects do (beside it)."""
        return {**self.meta, **self.config.meta}


class TestMetadata(_Dbt):
    name: str
    args: dict[str, Any] = Field(default_factory=dict, alias="kwargs")
    namespace: str | None = None


class DbtNode(_Dbt):
    """A model, seed, snapshot or data test node."""

    unique_id: str
    resource_type: str
    name: str
    alias: str | None = None
    schema_: str | None = Field(default=None, alias="schema")
    database: str | None = None
    description: str | None = ""
    columns: dict[str, DbtColumn] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    config: NodeConfig = Field(default_factory=NodeConfig)
    depends_on: Deps = Field(default_factory=Deps)
    checksum: Checksum | None = None
    version: str | None = None
    latest_version: str | None = None
    deprecation_date: str | None = None
    primary_key: list[str] = Field(default_factory=list)
    contract: dict[str, Any] = Field(default_factory=dict)
    constraints: list[dict[str, Any]] = Field(default_factory=list)
    test_metadata: TestMetadata | None = None
    attached_node: str | None = None
    column_name: str | None = None
    original_file_path: str = ""
    time_spine: dict[str, Any] | None = None

    @field_validator("version", "latest_version", "deprecation_date", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return None if v is None else str(v)

    def all_meta(self) -> dict[str, Any]:
        return {**self.meta, **self.config.meta}

    @property
    def relation(self) -> str:
        return self.alias or self.name


class DbtSource(_Dbt):
    unique_id: str
    source_name: str
    name: str
    identifier: str | None = None
    schema_: str | None = Field(default=None, alias="schema")
    description: str | None = ""

    @property
    def relation(self) -> str:
        return self.identifier or self.name


class NodeRelation(_Dbt):
    alias: str
    schema_name: str | None = None


class Entity(_Dbt):
    name: str
    type: str
    expr: str | None = None


class Dimension(_Dbt):
    name: str
    type: str
    expr: str | None = None
    description: str | None = None


class Measure(_Dbt):
    name: str
    agg: str
    expr: str | None = None
    agg_time_dimension: str | None = None
    description: str | None = None
    config: NodeConfig = Field(default_factory=NodeConfig)
    meta: dict[str, Any] = Field(default_factory=dict)


class Defaults(_Dbt):
    agg_time_dimension: str | None = None


class SemanticModel(_Dbt):
    unique_id: str
    name: str
    model: str = ""
    node_relation: NodeRelation | None = None
    description: str | None = None
    defaults: Defaults | None = None
    entities: list[Entity] = Field(default_factory=list)
    dimensions: list[Dimension] = Field(default_factory=list)
    measures: list[Measure] = Field(default_factory=list)
    depends_on: Deps = Field(default_factory=Deps)


class WhereFilter(_Dbt):
    where_sql_template: str


class Filter(_Dbt):
    where_filters: list[WhereFilter] = Field(default_factory=list)


class MeasureRef(_Dbt):
    name: str
    filter: Filter | None = None


class TypeParams(_Dbt):
    measure: MeasureRef | None = None
    numerator: dict[str, Any] | None = None
    denominator: dict[str, Any] | None = None
    expr: str | None = None


class Metric(_Dbt):
    unique_id: str
    name: str
    label: str | None = None
    description: str | None = None
    type: str
    type_params: TypeParams = Field(default_factory=TypeParams)
    filter: Filter | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    config: NodeConfig = Field(default_factory=NodeConfig)

    def all_meta(self) -> dict[str, Any]:
        return {**self.meta, **self.config.meta}


class Catalog(_Dbt):
    """catalog.json: the columns each relation really has (``dbt docs generate``)."""

    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def columns(self, unique_id: str) -> dict[str, str] | None:
        node = self.nodes.get(unique_id)
        if node is None:
            return None
        cols = node.get("columns") or {}
        return {str(c.get("name", k)): str(c.get("type") or "") for k, c in cols.items()
                if isinstance(c, dict)}


class DbtProject(_Dbt):
    """Everything read, from either input."""

    package: str | None = None
    adapter_type: str | None = None
    """The warehouse dbt builds into (the manifest's ``metadata.adapter_type``; unknown without
    one): the SQL dialect imported expressions are checked in."""
    nodes: dict[str, DbtNode] = Field(default_factory=dict)
    sources: dict[str, DbtSource] = Field(default_factory=dict)
    semantic_models: dict[str, SemanticModel] = Field(default_factory=dict)
    metrics: dict[str, Metric] = Field(default_factory=dict)
    catalog: Catalog | None = None

    def models(self) -> list[DbtNode]:
        """The model nodes by id (listed once: callers ask for them per model)."""
        found = self.__dict__.get("_models")
        if found is None or found[0] != len(self.nodes):
            found = (len(self.nodes), [n for _, n in sorted(self.nodes.items())
                                       if n.resource_type == "model"])
            object.__setattr__(self, "_models", found)
        models: list[DbtNode] = found[1]
        return models

    def tests(self) -> list[DbtNode]:
        return [n for _, n in sorted(self.nodes.items())
                if n.resource_type == "test" and n.test_metadata is not None]

    def tests_of(self, unique_id: str) -> list[DbtNode]:
        """The data tests attached to one node (indexed once: a manifest has thousands)."""
        index = self.__dict__.get("_tests_by_node")
        if index is None:
            index = {}
            for t in self.tests():
                index.setdefault(t.attached_node or "", []).append(t)
            object.__setattr__(self, "_tests_by_node", index)
        found: list[DbtNode] = index.get(unique_id, [])
        return found
