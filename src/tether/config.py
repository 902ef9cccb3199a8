"""Loading ``tether.yaml``: every error names the file, the line and the key.

The model itself is ``tether.context.config_model`` (re-exported here, so ``from tether.config
import ProductConfig`` keeps working); the references between sections are the rules of
``tether.context.references``; the checks against the source are ``tether.profiling.policycheck``.
``docs/config.md`` is the reference, and a test checks that every key appears there.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from tether.context.config_model import (
    PII_SELECTOR,
    Acceptance,
    ActionConfig,
    CalendarConfig,
    ColumnFacts,
    DriftConfig,
    EvalConfig,
    Freshness,
    GlossaryTerm,
    IdentifierScheme,
    LineageEdge,
    MetricConfig,
    MetricOutput,
    Model,
    PageConfig,
    PoliciesConfig,
    ProductConfig,
    ProfilingConfig,
    RegistryConfig,
    Relationship,
    RoleConfig,
    ServeConfig,
    SourceConfig,
    TableRule,
    TetherConfig,
    ToolSpec,
    UserConfig,
)
from tether.context.references import did_you_mean as _did_you_mean
from tether.context.references import problems as _reference_problems
from tether.context.via import compile_via
from tether.errors import ConfigError
from tether.layers.loading import Origin, layer_origin, precedence, project_layers
from tether.layers.model import (
    UNION_LISTS,
    ImportLayer,
    kept_products,
    merged,
    present,
    value_at,
)
from tether.textfiles import check_yaml_aliases, read_text

__all__ = [
    "PII_SELECTOR", "PROJECT_FILE", "Acceptance", "ActionConfig", "CalendarConfig",
    "ColumnFacts", "DriftConfig", "EvalConfig", "Freshness", "GlossaryTerm", "IdentifierScheme",
    "LineageEdge", "MetricConfig", "MetricOutput", "Model", "PageConfig", "PoliciesConfig",
    "ProductConfig", "ProfilingConfig", "Project", "RegistryConfig", "Relationship",
    "RoleConfig", "ServeConfig", "SourceConfig", "TableRule", "TetherConfig", "ToolSpec",
    "UserConfig", "load_project", "parse_project",
]

PROJECT_FILE = "tether.yaml"

Loc = tuple[str | int, ...]


# --- the loaded project --------------------------------------------------------------------------


class Project:
    """A loaded tether.yaml with its directory and the line of every key, for error messages;
    ``config`` is tether.yaml merged over the import layers (``layers``, highest first)."""

    def __init__(self, root: Path, config: TetherConfig, lines: dict[Loc, int], path: Path,
                 typed: dict[str, Any] | None = None, layers: list[ImportLayer] | None = None,
                 data: dict[str, Any] | None = None):
        self.root = root
        self.config = config
        self.path = path
        self._lines = lines
        self.typed: dict[str, Any] = typed if typed is not None else {}
        self.layers: list[ImportLayer] = layers or []
        self.data: dict[str, Any] = data if data is not None else self.typed

    def without(self, products: set[str]) -> Project:
        """This project with those products left out (a first build goes on without a product
        the engine cannot read)."""
        clone = copy.copy(self)
        clone.config = self.config.model_copy(update={"products": {
            n: p for n, p in self.config.products.items() if n not in products}})
        return clone

    def where(self, *loc: str | int) -> str:
        """``tether.yaml:LINE`` for the deepest known prefix of ``loc``; for a key an import
        layer supplied, that layer (and the node, or file and line, it was read from)."""
        origin = self.origin(*loc)
        if origin is not None and origin.kind is not None:
            return str(origin)
        return f"{self.path.name}:{_line_for(self._lines, loc)}"

    def origin(self, *path: str | int) -> Origin | None:
        """Which layer the value at ``path`` came from: tether.yaml (with its line), an import
        layer, or None when no layer holds it (a default)."""
        value = value_at(self.data, path)
        if not present(value):
            return None
        if path and path[0] in UNION_LISTS and len(path) >= 2:
            return self._item_origin(path, value)
        typed = value_at(self.typed, path)
        if present(typed) and (typed == value or isinstance(typed, dict)):
            return Origin(None, f"{self.path.name}:{_line_for(self._lines, path)}")
        for layer in self.layers:
            mine = value_at(layer.config, path)
            if present(mine) and (mine == value or isinstance(mine, dict)):
                return layer_origin(self.root, layer, path)
        return None

    def _item_origin(self, path: tuple[str | int, ...], value: Any) -> Origin | None:
        """A list item of lineage or relationships: the layer whose list holds the item."""
        item = value_at(self.data, path[:2])
        for typed_index, mine in enumerate(self.typed.get(str(path[0])) or []):
            if mine == item:
                return Origin(None, f"{self.path.name}:"
                              f"{_line_for(self._lines, (path[0], typed_index))}")
        for layer in self.layers:
            for i, mine in enumerate(layer.config.get(str(path[0])) or []):
                if mine == item:
                    return layer_origin(self.root, layer, (path[0], i, *path[2:]))
        return None

    def with_config(self, config: TetherConfig) -> Project:
        """The same project (file, lines, layers) with another configuration: the one a server
        enforces, tether.yaml with the last approved access policy."""
        other = copy.copy(self)
        other.config = config
        return other

    def now(self) -> datetime:
        """The clock if fixed in tether.yaml, else the wall clock (UTC)."""
        return self.config.clock or datetime.now(UTC)

    def product(self, name: str) -> ProductConfig:
        try:
            return self.config.products[name]
        except KeyError:
            raise ConfigError(
                f"there is no product named {name!r}.",
                where=self.path.name,
                hint=_did_you_mean(name, self.config.products) + " Products: "
                + (", ".join(sorted(self.config.products)) or "(none)") + ".",
            ) from None

    def source_name(self, product: str) -> str:
        p = self.product(product)
        return p.source or next(iter(self.config.sources))


def load_project(project_dir: str | Path = ".", with_layer: ImportLayer | None = None) -> Project:
    """Read and validate ``tether.yaml`` in ``project_dir``; every error names file and line.
    ``with_layer`` stands in for the written layer of its kind (an import tried before it is
    written, so a layer that would not load is never written)."""
    root = Path(project_dir).resolve()
    path = root / PROJECT_FILE
    if not path.exists() and not path.is_symlink():
        hint = (
            "Run `tether init --source URL` to write one from a live source, or "
            "`tether demo init` for the embedded demo; or pass --project DIR."
        )
        raise ConfigError(f"no {PROJECT_FILE} in {root}.", hint=hint)
    if path.is_dir():
        raise ConfigError(f"the project file {PROJECT_FILE} is a directory, not a file.",
                          where=str(path), hint="Move the directory away and write tether.yaml "
                          "there (`tether init --source URL`), or pass --project DIR.")
    # unreadable, binary or non-UTF-8: one paragraph naming the file (and the line, the byte)
    text = read_text(path, f"the project file {PROJECT_FILE}",
                     hint=f"{PROJECT_FILE} must be a UTF-8 YAML file (docs/config.md).")
    return parse_project(text, path, with_layer)


def parse_project(text: str, path: Path, with_layer: ImportLayer | None = None) -> Project:
    """Validate the text of a project file that lives at ``path``."""
    data, lines = _read_yaml(text, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            "the top level must be a mapping of sections (sources:, products:, ...).",
            where=f"{path.name}:1",
            hint="See docs/config.md for the skeleton.",
        )
    data = _interpolate(data, (), lines, path)
    layers = project_layers(path.parent, data.get("glossary_dir"),
                            lambda: f"{path.name}:{_line_for(lines, ('glossary_dir',))}")
    if with_layer is not None:
        layers = [la for la in layers if la.kind != with_layer.kind] + [with_layer]
        layers.sort(key=precedence)
    layers = kept_products(data, layers)
    full = merged(data, [(layer.kind, layer.config) for layer in layers])
    project = Project(path.parent, TetherConfig.model_construct(sources={}), lines, path, typed=data,
                      layers=layers, data=full)
    try:
        project.config = TetherConfig.model_validate(full)
    except ValidationError as e:
        raise _explain(e, lines, path, project) from None
    _cross_check(project)
    compile_via(project.config, project.where)  # row filters {via: P} into their SQL
    return project


# --- YAML with line numbers ----------------------------------------------------------------------


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys (a silent last-one-wins is a classic config bug).

    Aliases are checked before the document is built (:func:`tether.textfiles.check_yaml_aliases`):
    a recursive alias, or aliases adding more than ``ALIAS_BUDGET`` (100,000) nodes when expanded
    (an alias bomb), is a ConfigError naming the file and line."""

    file_name = PROJECT_FILE


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # `<<: *defaults`: merged keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:  # construct_mapping reports an unhashable key with its line
            continue
        if key in seen:
            raise ConfigError(
                f"key {key!r} appears twice in one mapping (first on line {seen[key]}).",
                where=f"{loader.file_name}:{key_node.start_mark.line + 1}",
                hint="Keep one of them; YAML would silently keep only the last.",
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_MERGE_TAG = "tag:yaml.org,2002:merge"
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(text: str, path: Path) -> tuple[Any, dict[Loc, int]]:
    try:
        check_yaml_aliases(text, path.name)  # before anything is built or walked
        loader = _Loader(text)  # one parse: the nodes give line numbers, then the values
        loader.file_name = path.name
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise ConfigError(
            f"this is not valid YAML: {e.problem or e}"
            + (f" ({e.context})" if e.context else "")
            + ".",
            where=f"{path.name}:{line}",
            hint="Check indentation and quoting on that line (a ':' inside a value needs quotes).",
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"this is not valid YAML: {e}.", where=path.name) from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _index(node, (), lines)
    return data, lines


def _index(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    """The line of every key and item, by location. Iterative (no recursion limit); an aliased
    node is walked at each place it is used, which the alias budget keeps bounded."""
    todo: list[tuple[yaml.Node, Loc]] = [(node, loc)]
    while todo:
        node, loc = todo.pop()
        out.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                out[(*loc, key)] = k.start_mark.line + 1
                todo.append((v, (*loc, key)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out[(*loc, i)] = item.start_mark.line + 1
                todo.append((item, (*loc, i)))


def _line_for(lines: dict[Loc, int], loc: Loc) -> int:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(value: Any, loc: Loc, lines: dict[Loc, int], path: Path) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string with the environment's value."""
    if isinstance(value, dict):
        return {k: _interpolate(v, (*loc, k), lines, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*loc, i), lines, path) for i, v in enumerate(value)]
    if isinstance(value, str) and "${" in value:

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{_dotted(loc)} uses ${{{name}}}, but the environment variable {name} is not set.",
                where=f"{path.name}:{_line_for(lines, loc)}",
                hint=f"Export {name} before running tether, or write ${{{name}:-default}}.",
            )

        return _ENV.sub(sub, value)
    return value


# --- turning pydantic errors into one paragraph --------------------------------------------------


def _dotted(loc: Loc) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class that owns the mapping at ``loc`` (for 'did you mean' hints)."""
    model: Any = TetherConfig
    for part in loc:
        if isinstance(model, _MapOf):  # a map key (a product name, a user name)
            model = _unwrap(model.value)
            continue
        if isinstance(part, int):  # a list index: _unwrap already stepped into the item
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = _field_by_key(model, str(part))
        if field is None:
            return None
        model = _unwrap(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _field_by_key(model: type[BaseModel], key: str) -> Any:
    for name, f in model.model_fields.items():
        if key in (name, f.alias):
            return f
    return None


def _unwrap(annotation: Any) -> Any:
    """dict[str, M] -> marker for map of M; M | None -> M; list[M] -> M."""
    args: tuple[Any, ...] = getattr(annotation, "__args__", ())
    origin = getattr(annotation, "__origin__", None)
    if origin is dict:
        return _MapOf(args[1])
    if origin is list:
        return _unwrap(args[0])
    if args:  # Optional / Union
        for a in args:
            if a is not type(None):
                return _unwrap(a)
    return annotation


class _MapOf:
    def __init__(self, value: Any):
        self.value = value


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]




def _explain(err: ValidationError, lines: dict[Loc, int], path: Path,
             project: Project | None = None) -> ConfigError:
    parts: list[str] = []
    first_line: int | None = None
    errors = list(_dedupe(err.errors()))[:5]
    imported = _imported_error(errors, project)
    if imported is not None:
        return imported
    for e in errors:
        loc = tuple(e["loc"])
        line = _line_for(lines, loc)
        first_line = first_line or line
        if e["type"] == "extra_forbidden":
            owner = _model_at(loc[:-1])
            allowed = _keys_of(owner) if owner else []
            hint = _did_you_mean(str(loc[-1]), allowed)
            msg = f"line {line}: unknown key {_dotted(loc)!r}."
            if hint:
                msg += f" {hint}"
            if allowed:
                msg += f" Allowed here: {', '.join(allowed)}."
            if " " in str(loc[-1]):
                msg += (" (A comma inside a {flow: mapping} value splits it into keys: quote the "
                        "value.)")
        elif e["type"] == "missing":
            msg = f"line {line}: {_dotted(loc)!r} is required but missing."
        else:
            msg = f"line {line}: {_dotted(loc)}: {e['msg']} (got {e.get('input')!r})."
        parts.append(msg)
    if len(parts) == 1:
        parts[0] = parts[0].split(": ", 1)[1]
    return ConfigError(
        " ".join(parts),
        where=f"{path.name}:{first_line or 1}",
        hint="Fix the key or value named; docs/config.md lists every key and its type.",
    )


def _imported_error(errors: list[Any], project: Project | None) -> ConfigError | None:
    """A value an import layer supplied that does not validate (merged with tether.yaml): the
    error names the layer and the key, and how to fix it."""
    if project is None or not errors:
        return None
    loc = tuple(errors[0]["loc"])
    origin = next((o for n in range(len(loc), 0, -1)
                   if (o := project.origin(*loc[:n])) is not None), None)
    if origin is None or origin.kind is None:
        return None
    e = errors[0]
    what = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
    return ConfigError(
        f"{_dotted(loc)}: {what} (a value from {origin}, merged under tether.yaml).",
        where=origin.where if origin.kind == "glossary_dir" else origin.file,
        hint="Fix it at its source and import again, or override the key in tether.yaml.")


def _dedupe(errors: list[Any]) -> Iterator[Any]:
    """Union members repeat one mistake several times; keep the first per location."""
    seen: set[Loc] = set()
    for e in errors:
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and "[" in p))
        if loc in seen:
            continue
        seen.add(loc)
        yield {**e, "loc": loc}


# --- references between sections ----------------------------------------------------------------


def _cross_check(project: Project) -> None:
    """The reference rules (tether.context.references.RULES) as one error naming the file and
    the line of the first problem, and of up to four more."""
    problems = _reference_problems(project.config)
    if problems:
        loc, first = problems[0]
        rest = [f"{_place(project, lo)}: {msg.strip()}." for lo, msg in problems[1:5]]
        raise ConfigError(
            " ".join([first.strip().rstrip(".") + ".", *rest]),
            where=project.where(*loc),
            hint="Fix the reference so it names something declared in tether.yaml.",
        )


def _place(project: Project, loc: Loc) -> str:
    where = project.where(*loc)
    return f"line {where.rsplit(':', 1)[1]}" if where.startswith(f"{project.path.name}:") else where
