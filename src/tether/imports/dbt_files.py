"""Reading a dbt project's files: ``target/manifest.json`` (and ``target/catalog.json`` when
``dbt docs generate`` wrote one), else the ``schema.yml`` files beside the models.

Every failure is one paragraph naming the file and the place (a JSON line and column, a node
and key, a YAML line) and saying what to do; the caller leaves the previous layer as it was.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tether.errors import ConfigError
from tether.imports.dbt_model import (
    Catalog,
    Checksum,
    DbtColumn,
    DbtNode,
    DbtProject,
    DbtSource,
    Metric,
    SemanticModel,
)
from tether.layers.model import MAX_IMPORT_BYTES
from tether.textfiles import decode_text, load_json, load_yaml, read_bytes

MANIFEST_VERSIONS = (10, 11, 12)
"""Manifest schema versions read (dbt 1.6 to 1.11 write v10 to v12)."""
_VERSION = re.compile(r"/manifest/v(\d+)\.json$")
_REBUILD = ("Rebuild it (`dbt parse`, or `dbt build` then `dbt docs generate`) and import "
            "again; the previous import layer was left as it was.")


def find_inputs(path: Path) -> tuple[Path | None, Path]:
    """(manifest or None, the dbt project directory) for PATH: a project directory, its
    target/ directory or a manifest.json file."""
    path = path.resolve()
    if path.is_file():
        return path, (path.parent.parent if path.parent.name == "target" else path.parent)
    if not path.is_dir():
        raise ConfigError("there is no dbt project or manifest here.", where=str(path),
                          hint="Give the dbt project directory (holding dbt_project.yml) or "
                          "its target/manifest.json.")
    for candidate in (path / "target" / "manifest.json", path / "manifest.json"):
        if candidate.is_file():
            return candidate, path.parent if path.name == "target" else path
    if not (path / "dbt_project.yml").is_file():
        raise ConfigError("this folder holds neither target/manifest.json nor dbt_project.yml.",
                          where=str(path), hint="Give the dbt project directory, or run "
                          "`dbt parse` there to write target/manifest.json.")
    return None, path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_json(path: Path, what: str) -> tuple[Any, bytes]:
    """The file's JSON and its bytes; over :data:`MAX_IMPORT_BYTES`, not UTF-8, not JSON or
    nested deeper than tether reads is one paragraph naming the file (and line)."""
    data = read_bytes(path, what, name=str(path), max_bytes=MAX_IMPORT_BYTES,
                      hint="Large real dbt manifests are 50 to 100 MB.")
    text = decode_text(data, path, what, name=str(path))
    return load_json(text, str(path), what, hint=_REBUILD), data


def read_manifest(path: Path) -> tuple[DbtProject, bytes]:
    """The project a manifest describes, and the manifest's bytes (for its hash)."""
    raw, data = read_json(path, "the dbt manifest")
    if not isinstance(raw, dict) or not isinstance(raw.get("metadata"), dict):
        raise ConfigError("this is not a dbt manifest (no metadata object at the top).",
                          where=str(path), hint=_REBUILD)
    version = str(raw["metadata"].get("dbt_schema_version", ""))
    m = _VERSION.search(version)
    if not m or int(m.group(1)) not in MANIFEST_VERSIONS:
        raise ConfigError(
            f"manifest schema version {version or '(none)'!r} is not one tether reads "
            f"(v{', v'.join(map(str, MANIFEST_VERSIONS))}: dbt 1.6 to 1.11).",
            where=f"{path} (metadata.dbt_schema_version)",
            hint="Build the project with a dbt version that writes one of those, or import "
            "its schema.yml files by moving target/manifest.json away.")
    adapter = raw["metadata"].get("adapter_type")
    project = DbtProject(package=raw["metadata"].get("project_name"),
                         adapter_type=str(adapter) if adapter else None)
    project.nodes = _section(raw, "nodes", DbtNode, path)
    project.sources = _section(raw, "sources", DbtSource, path)
    project.semantic_models = _section(raw, "semantic_models", SemanticModel, path)
    project.metrics = _section(raw, "metrics", Metric, path)
    return project, data


def _section(raw: dict[str, Any], key: str, model: type[BaseModel], path: Path) -> Any:
    items = raw.get(key) or {}
    if not isinstance(items, dict):
        raise ConfigError(f"{key} must be an object of nodes by id.", where=f"{path} ({key})",
                          hint=_REBUILD)
    out = {}
    for uid, item in items.items():
        try:
            out[uid] = model.model_validate(item)
        except ValidationError as e:
            first = e.errors()[0]
            place = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"{key}[{uid!r}].{place}: {first['msg']}.",
                              where=f"{path} ({key}.{uid})", hint=_REBUILD) from None
    return out


def read_catalog(path: Path) -> tuple[Catalog, bytes]:
    raw, data = read_json(path, "the dbt catalog")
    try:
        return Catalog.model_validate(raw), data
    except ValidationError as e:
        first = e.errors()[0]
        raise ConfigError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}.", where=str(path),
                          hint="Run `dbt docs generate` again, or delete catalog.json.") from None


# --- without a manifest: schema.yml files ---------------------------------------------------------

_REF = re.compile(r"\{\{\s*ref\(\s*['\"]([^'\"]+)['\"](?:\s*,\s*['\"]([^'\"]+)['\"])?\s*\)")
_SOURCE = re.compile(r"\{\{\s*source\(\s*['\"]([^'\"]+)['\"]\s*,\s*['\"]([^'\"]+)['\"]\s*\)")
_SKIP_DIRS = {"target", "dbt_packages", "dbt_modules", "logs", ".venv"}


def model_paths(root: Path) -> list[Path]:
    """The folders dbt_project.yml's ``model-paths`` name, each inside the project: an entry that
    resolves outside it (``../elsewhere``, a symlink out) is an error naming it, so an import
    never reads, hashes or reports files the dbt project does not hold."""
    settings = _yaml_file(root / "dbt_project.yml") or {}
    paths = settings.get("model-paths") or settings.get("source-paths") or ["models"]
    if not isinstance(paths, list):
        raise ConfigError("model-paths must be a list of folders.",
                          where=str(root / "dbt_project.yml"), hint="Fix dbt_project.yml.")
    base = root.resolve()
    out = []
    for folder in paths:
        resolved = (root / str(folder)).resolve()
        if not resolved.is_relative_to(base):
            raise ConfigError(f"model-paths entry {str(folder)!r} is outside the dbt project "
                              f"({resolved}).", where=str(root / "dbt_project.yml"),
                              hint="Name folders inside the project; tether reads nothing "
                              "outside the dbt project it is given.")
        out.append(root / str(folder))
    return out


def model_files(root: Path) -> list[Path]:
    """Every file under the model paths, sorted, skipping dbt's own output folders and any file
    that resolves outside the project (a symlink out of it)."""
    base = root.resolve()
    out = []
    for folder in model_paths(root):
        for f in sorted(folder.rglob("*")):
            if (_SKIP_DIRS & set(f.relative_to(root).parts) or not f.is_file()
                    or not f.resolve().is_relative_to(base)):
                continue
            out.append(f)
    return out


def listing_digest(root: Path) -> str:
    """sha256 of the model paths' listing (each file's path and size): a file added or removed
    under them changes it, which the hashes of the files read cannot show."""
    lines = [f"{f.relative_to(root)}\t{f.stat().st_size}\n" for f in model_files(root)]
    return sha256("".join(sorted(lines)).encode())


def read_schema_files(root: Path) -> tuple[DbtProject, dict[str, bytes]]:
    """The project as its dbt_project.yml, model SQL and schema YAML files declare it; the
    files read (dbt_project.yml among them), by path relative to ``root``."""
    settings = _yaml_file(root / "dbt_project.yml") or {}
    package = str(settings.get("name") or root.name)
    files: dict[str, bytes] = {}
    if (root / "dbt_project.yml").is_file():  # its model-paths say which files are read
        files["dbt_project.yml"] = read_bytes(root / "dbt_project.yml", "dbt_project.yml")
    project = DbtProject(package=package)
    sql: dict[str, tuple[str, str]] = {}  # file stem -> (file, text)
    versions = _Versions()
    for f in model_files(root):
        rel = str(f.relative_to(root))
        if f.suffix == ".sql":
            data = read_bytes(f, "a dbt model", name=rel)
            files[rel] = data
            sql[f.stem] = (rel, decode_text(data, f, "a dbt model", name=rel))
        elif f.suffix in (".yml", ".yaml"):
            data = read_bytes(f, "a dbt schema file", name=rel)
            files[rel] = data
            _schema_file(project, package, rel, versions,
                         load_yaml(decode_text(data, f, "a dbt schema file", name=rel), rel,
                                   hint="Fix the YAML on that line; dbt would refuse it "
                                   "too.") or {})
    built = set()
    for stem, (rel, text) in sql.items():
        uid = versions.by_stem.get(stem, f"model.{package}.{stem}")
        built.add(uid)
        node = project.nodes.setdefault(uid, DbtNode(unique_id=uid, resource_type="model",
                                                     name=stem))
        node.original_file_path = rel
        node.checksum = node.checksum or _checksum(text)
        node.depends_on.nodes = sorted(
            {versions.latest.get(r[0], f"model.{package}.{r[0]}") for r in _REF.findall(text)}
            | {f"source.{package}.{s}.{t}" for s, t in _SOURCE.findall(text)})
    for uid in [u for u, n in project.nodes.items() if n.resource_type == "model"
                and u not in built]:
        del project.nodes[uid]  # documented in YAML, but no model file builds it
    return project, files


class _Versions:
    """Versioned models as schema YAML declares them: dbt builds version V of model M from
    ``M_vV.sql`` (or the version's ``defined_in``) into the relation ``M_vV``, as the node
    ``model.PKG.M.vV``; ``ref('M')`` is the latest version."""

    def __init__(self) -> None:
        self.by_stem: dict[str, str] = {}  # file stem -> node id
        self.latest: dict[str, str] = {}  # model name -> its latest version's node id


def _checksum(text: str) -> Any:

    return Checksum(checksum=sha256(text.encode()))


def _yaml_file(path: Path) -> Any:
    if not path.is_file():
        return None
    return load_yaml(decode_text(read_bytes(path, "dbt_project.yml"), path, "dbt_project.yml"),
                     str(path.name))


def _schema_file(project: DbtProject, package: str, rel: str, versions: _Versions,
                 doc: Any) -> None:
    if not isinstance(doc, dict):
        raise ConfigError("a dbt schema file must be a mapping (version:, models:, ...).",
                          where=f"{rel}:1", hint="Fix the file; dbt would refuse it too.")
    try:
        for m in doc.get("models") or []:
            _yaml_model(project, package, rel, m, versions)
        for s in doc.get("sources") or []:
            for t in s.get("tables") or []:
                uid = f"source.{package}.{s['name']}.{t['name']}"
                project.sources[uid] = DbtSource(
                    unique_id=uid, source_name=s["name"], name=t["name"],
                    identifier=t.get("identifier"), schema=s.get("schema") or s["name"],
                    description=t.get("description") or "")
        for sm in doc.get("semantic_models") or []:
            uid = f"semantic_model.{package}.{sm['name']}"
            ref = _REF.search("{{ " + str(sm.get("model", "")) + " }}")
            deps = [f"model.{package}.{ref.group(1)}"] if ref else []
            project.semantic_models[uid] = SemanticModel.model_validate(
                {**sm, "unique_id": uid, "depends_on": {"nodes": deps}})
        for mt in doc.get("metrics") or []:
            uid = f"metric.{package}.{mt['name']}"
            project.metrics[uid] = Metric.model_validate(_yaml_metric(mt, uid))
    except (ValidationError, KeyError, TypeError, AttributeError) as e:
        detail = (e.errors()[0]["msg"] if isinstance(e, ValidationError) else
                  f"missing key {e}" if isinstance(e, KeyError) else str(e))
        raise ConfigError(f"this schema file does not have dbt's shape: {detail}.",
                          where=rel, hint="Fix the file (`dbt parse` names the place too).") from None


def _yaml_model(project: DbtProject, package: str, rel: str, m: dict[str, Any],
                versions: _Versions) -> None:
    name = m["name"]
    columns = {}
    tests: list[tuple[str, dict[str, Any]]] = []
    for c in m.get("columns") or []:
        columns[c["name"]] = DbtColumn.model_validate(
            {k: v for k, v in c.items() if k in ("name", "description", "meta", "config",
                                                  "data_type")})
        for t in [*(c.get("tests") or []), *(c.get("data_tests") or [])]:
            tests.append((c["name"], t if isinstance(t, dict) else {str(t): {}}))
    listed = [str(v["v"]) for v in m.get("versions") or []]
    latest = str(m["latest_version"]) if m.get("latest_version") is not None else (
        max(listed, key=_version_order) if listed else None)
    node = {"resource_type": "model", "name": name, "description": m.get("description") or "",
            "meta": m.get("meta") or {}, "config": m.get("config") or {}, "columns": columns,
            "latest_version": latest, "deprecation_date": m.get("deprecation_date"),
            "alias": (m.get("config") or {}).get("alias"), "time_spine": m.get("time_spine"),
            "original_file_path": rel}
    uids = []
    for v in m.get("versions") or [None]:
        uid = f"model.{package}.{name}" if v is None else f"model.{package}.{name}.v{v['v']}"
        this = dict(node)
        if v is not None:  # a version may say its own description, file and alias
            stem = str(v.get("defined_in") or f"{name}_v{v['v']}")
            this |= {"version": str(v["v"]), "alias": (v.get("config") or {}).get("alias")
                     or f"{name}_v{v['v']}", "description": v.get("description")
                     or node["description"]}
            versions.by_stem[stem] = uid
            if str(v["v"]) == latest:
                versions.latest[name] = uid
        project.nodes[uid] = DbtNode.model_validate({**this, "unique_id": uid})
        uids.append(uid)
    for uid in uids:
        _yaml_tests(project, package, uid, name, tests)


def _version_order(v: str) -> tuple[int, str]:
    return (int(v), v) if v.isdigit() else (0, v)


def _yaml_tests(project: DbtProject, package: str, uid: str, name: str,
                tests: list[tuple[str, dict[str, Any]]]) -> None:
    for n, (column, test) in enumerate(tests):
        kind, args = next(iter(test.items()))
        args = dict(args or {})
        args = {**args, **(args.pop("arguments", None) or {})}  # dbt 1.10+: under arguments:
        deps = [uid]
        to = _REF.search("{{ " + str(args.get("to", "")) + " }}")
        if to:
            deps.append(f"model.{package}.{to.group(1)}")
        tid = f"test.{package}.{kind}_{uid.split('.', 2)[2]}_{column}.{n}"
        project.nodes[tid] = DbtNode.model_validate({
            "unique_id": tid, "resource_type": "test", "name": kind, "attached_node": uid,
            "column_name": column, "depends_on": {"nodes": deps},
            "test_metadata": {"name": kind, "kwargs": {"column_name": column, **args}}})


def _yaml_metric(mt: dict[str, Any], uid: str) -> dict[str, Any]:
    """A metric as written in YAML, in the manifest's shape (filters as where_filters)."""
    def where(f: Any) -> Any:
        if f is None:
            return None
        items = f if isinstance(f, list) else [f]
        return {"where_filters": [{"where_sql_template": str(x)} for x in items]}

    params = dict(mt.get("type_params") or {})
    measure = params.get("measure")
    if isinstance(measure, str):
        params["measure"] = {"name": measure}
    elif isinstance(measure, dict):
        params["measure"] = {**measure, "filter": where(measure.get("filter"))}
    return {**mt, "unique_id": uid, "type_params": params, "filter": where(mt.get("filter"))}
