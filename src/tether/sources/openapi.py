"""OpenAPI descriptions as sources: the spec read once, its read operations as tables.

An HTTP API is read through its safe operations only (GET, and QUERY where a spec has it): every
operation that changes state is left out, so a read-only server cannot reach it. Each read
operation is one table of the source, named after its operation id; its columns are the fields
of one item of its response (the response itself, the items of a top-level array, or the one
array of objects the response holds). How the API pages (a Link header, a next URL, a cursor,
a page number, an offset) is read from the shape of the operation: which parameters it takes and
what its response holds beside the items.

The spec is resolved once ($ref within the document, cycles cut), and every problem names the
spec, the place in it and what to do: an unknown version, a broken $ref, an operation without a
response schema, nesting (or a $ref chain) deeper than MAX_DEPTH, which would otherwise end in
a RecursionError.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from tether.context.config_model import SourceConfig
from tether.context.schema import Column, TypeKind
from tether.errors import ConfigError

MAX_DEPTH = 256
"""Levels of nesting tether follows in a spec, each $ref hop counted as one: deeper is refused
with a clear error (Python's own parsers and recursion give out near 1,000)."""
DEEP_HINT = "Flatten its deepest nesting and $ref chains, then run the command again."
READ_METHODS = ("get", "query")
"""HTTP methods that are safe by definition: the only operations a read-only source serves."""
ALL_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace", "query")

# A paging parameter's name is made of paging words only (a filter such as max_price,
# start_year or updated_after has a word of its own), and holds one of the words that say
# which kind it is.
SIZE_WORDS = frozenset({"limit", "size", "per", "page", "max", "results", "result", "take",
                        "top", "items", "num", "count"})
SIZE_MARKS = frozenset({"limit", "size", "per", "take", "top", "results"})
"""A page size: limit, per_page, page_size, pageSize, maxResults, top."""
CURSOR_WORDS = frozenset({"cursor", "after", "token", "continuation", "marker", "next",
                          "starting", "page", "start", "from"})
CURSOR_MARKS = frozenset({"cursor", "after", "token", "continuation", "marker", "starting"})
"""An opaque continuation: cursor, after, page_token, starting_after, continuation."""
PAGE_WORDS = frozenset({"page", "number", "num", "no", "index"})
OFFSET_WORDS = frozenset({"offset", "skip", "start", "index"})
OFFSET_MARKS = frozenset({"offset", "skip"})
LINK_WORDS = frozenset({"url", "uri", "href", "link", "links"})


def _named(name: str, allowed: frozenset[str], marks: frozenset[str]) -> bool:
    """A name of ``allowed`` words only, holding one of ``marks``."""
    w = set(words(name))
    return bool(w) and w <= allowed and bool(w & marks)


class SpecError(ConfigError):
    """A spec tether cannot read: it names the spec and the place in it."""


def words(name: str) -> list[str]:
    """The lower-case words of a name in any spelling: page_size, pageSize, page-size, PAGE."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def table_name(op_id: str) -> str:
    """The table an operation is read as: its id with anything but letters, digits and _ as _."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", op_id).strip("_") or "operation"
    return name if not name[0].isdigit() else f"op_{name}"


@dataclass(frozen=True)
class ApiParam:
    name: str
    where: str  # query | path
    required: bool
    schema: dict[str, Any]
    description: str | None = None


@dataclass(frozen=True)
class Paging:
    """How an operation pages: ``kind`` none, link (the Link header's rel=next), next_url (a
    URL the response holds at ``field``), cursor (the response's ``field`` goes back as
    ``param``), page (``param`` counts pages from ``first``) or offset (``param`` counts items);
    ``size`` is the page-size parameter, at most ``size_max``."""

    kind: str = "none"
    param: str | None = None
    field: tuple[str, ...] = ()
    size: str | None = None
    size_max: int | None = None
    first: int = 1

    def server_params(self) -> set[str]:
        """The parameters the server sets itself while it follows the pages."""
        return {p for p in (self.param, self.size) if p}

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "param": self.param, "field": list(self.field),
                "size": self.size, "size_max": self.size_max, "first": self.first}


@dataclass(frozen=True)
class Operation:
    op_id: str
    table: str
    method: str
    path: str
    summary: str | None
    description: str | None
    params: tuple[ApiParam, ...]
    items: tuple[str, ...] | None
    """Where the rows are: () the response is a list of them, a path to the list the response
    holds, None the response is one row."""
    item: dict[str, Any]
    """The schema of one row (an object)."""
    paging: Paging
    retry_statuses: tuple[int, ...]
    """Statuses the spec declares that invite a retry (429, 503)."""
    security: tuple[str, ...]
    """Scheme names that authenticate the operation (empty: none needed)."""
    digest: str = ""

    def plan(self) -> dict[str, Any]:
        """What a published tool keeps of the operation (the request it makes), so a changed
        spec reaches callers only through the gate."""
        return {"operation": self.op_id, "method": self.method.upper(), "path": self.path,
                "params": [{"name": p.name, "in": p.where, "required": p.required}
                           for p in self.params],
                "items": None if self.items is None else list(self.items),
                "paging": self.paging.as_dict(), "retry": list(self.retry_statuses),
                "security": list(self.security)}


@dataclass
class Spec:
    where: str
    title: str
    version: str
    servers: list[str]
    schemes: dict[str, dict[str, Any]]
    operations: dict[str, Operation] = field(default_factory=dict)
    """Read operations, by table name."""
    left_out: list[str] = field(default_factory=list)
    """Operations that change state (method and path), never served."""


def read_spec_text(ref: str, root: Path, timeout: float = 30.0) -> tuple[str, str]:
    """(the spec's text, how to name it in messages) from a file or an http(s) URL."""
    if ref.startswith(("http://", "https://")):
        import httpx2 as httpx

        try:
            r = httpx.get(ref, timeout=timeout, follow_redirects=True)
            r.raise_for_status()
        except httpx.HTTPError as e:
            raise SpecError(f"the OpenAPI spec {ref} could not be fetched ({e}).",
                            hint="Check the URL, or save the spec beside tether.yaml and name "
                            "the file.") from None
        return r.text, ref
    path = Path(ref).expanduser()
    path = path if path.is_absolute() else root / path
    try:
        return path.read_text(encoding="utf-8"), str(ref)
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"the OpenAPI spec {ref} cannot be read ({e.__class__.__name__}: "
                        f"{getattr(e, 'strerror', None) or e}).",
                        hint="Give `spec:` as a file relative to tether.yaml, or an http(s) "
                        "URL.") from None


def parse_spec(text: str, where: str) -> Spec:
    """A spec from its text (JSON or YAML), resolved and checked."""
    try:
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.load(
            text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except RecursionError:
        raise _too_deep(where) from None
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        if "maximum nesting depth" in str(e):  # libyaml's own limit (1,000 levels)
            raise _too_deep(where) from None
        raise SpecError(f"{where} is neither JSON nor YAML ({str(e).splitlines()[0]}).",
                        hint="Fix the file; `python -m json.tool` or a YAML linter shows "
                        "where.") from None
    if not isinstance(doc, dict):
        raise SpecError(f"{where} does not hold an OpenAPI document (an object with "
                        "`openapi:` and `paths:`).")
    version = str(doc.get("openapi") or "")
    if not re.fullmatch(r"3\.[012](\.\d+)?(-.*)?", version):
        said = (f"Swagger {doc['swagger']}" if "swagger" in doc else
                f"openapi: {version!r}" if version else "no `openapi:` version")
        raise SpecError(f"{where}: {said} is not a version tether reads (OpenAPI 3.0, 3.1 or "
                        "3.2).", hint="Convert a Swagger 2.0 description to OpenAPI 3 (for "
                        "example with swagger2openapi) and name the converted file.")
    try:
        return _Reader(doc, where).spec()
    except RecursionError:  # a guard behind the depth count: never a traceback
        raise _too_deep(where) from None


def _too_deep(where: str, at: str | None = None) -> SpecError:
    """A spec nested deeper than :data:`MAX_DEPTH` (a JSON or YAML file, or a $ref chain)."""
    place = f"; at {at}" if at else ""
    return SpecError(f"{where} nests its schemas deeper than tether follows (more than "
                     f"{MAX_DEPTH} levels{place}).", hint=DEEP_HINT)


def load_spec(ref: str, root: Path) -> Spec:
    """The spec ``ref`` names (relative to ``root``). A file is read once per version of it in
    a process (profiling and generation read the same spec: a large one takes a while); a URL
    is fetched on every call, so a spec that moved there is seen."""
    if ref.startswith(("http://", "https://")):
        return parse_spec(*read_spec_text(ref, root))
    path = Path(ref).expanduser()
    path = path if path.is_absolute() else root / path
    try:
        st = path.stat()
    except OSError:
        return parse_spec(*read_spec_text(ref, root))  # says what is wrong with the file
    return _file_spec(ref, str(root), (st.st_mtime_ns, st.st_size, st.st_ino))


@functools.lru_cache(maxsize=16)
def _file_spec(ref: str, root: str, stamp: tuple[int, int, int]) -> Spec:
    return parse_spec(*read_spec_text(ref, Path(root)))


class _Reader:
    def __init__(self, doc: dict[str, Any], where: str):
        self.doc = doc
        self.where = where
        self.resolved: dict[str, Any] = {}  # a $ref's whole resolution, once (no cycle in it)
        self.cut = False

    # --- $ref ---

    def deref(self, node: Any, at: str, seen: tuple[str, ...] = (), depth: int = 0) -> Any:
        """``node`` with every local $ref replaced by what it points at; a $ref met again
        inside itself (a recursive schema) becomes an open object. Nesting (a $ref hop counts
        as a level) deeper than MAX_DEPTH is a SpecError naming the place."""
        if depth > MAX_DEPTH:
            raise _too_deep(self.where, at)
        depth += 1
        if isinstance(node, list):
            return [self.deref(x, f"{at}/{i}", seen, depth) for i, x in enumerate(node)]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                self.cut = True
                return {"type": "object", "description": node.get("description")}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if ref in self.resolved:
                out = self.resolved[ref]
            else:
                target = self.pointer(ref, at)
                outer, self.cut = self.cut, False
                out = self.deref(target, ref, (*seen, ref), depth)
                if not self.cut:  # a resolution that met no cycle is the same everywhere
                    self.resolved[ref] = out
                self.cut = self.cut or outer
            if rest and isinstance(out, dict):
                return {**out, **self.deref(rest, at, seen, depth)}
            return out
        return {k: self.deref(v, f"{at}/{_escaped(str(k))}", seen, depth)
                for k, v in node.items()}

    def pointer(self, ref: str, at: str) -> Any:
        if not ref.startswith("#"):
            raise SpecError(f"{self.where}: $ref {ref!r} at {at} points into another "
                            "document.", hint="Bundle the description into one file (for "
                            "example with `redocly bundle`) and name that file.")
        node: Any = self.doc
        for raw in ref[1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SpecError(f"{self.where}: $ref {ref!r} at {at} points at nothing.",
                                hint="Fix the reference or add what it names.")
        return node

    # --- the spec ---

    def spec(self) -> Spec:
        info = _dict(self.doc.get("info"))
        servers = [str(s.get("url")) for s in _list(self.doc.get("servers"))
                   if isinstance(s, dict) and s.get("url")]
        comps = _dict(self.doc.get("components"))
        schemes = {str(k): v for k, v in (
            (k, self.deref(v, f"#/components/securitySchemes/{k}"))
            for k, v in _dict(comps.get("securitySchemes")).items()) if isinstance(v, dict)}
        out = Spec(self.where, str(info.get("title") or "API"), str(info.get("version") or ""),
                   servers, schemes)
        paths = self.doc.get("paths")
        if not isinstance(paths, dict):
            raise SpecError(f"{self.where} has no `paths:`; there is nothing to read.")
        default_security = self.doc.get("security")
        taken: dict[str, str] = {}
        for path, raw_item in paths.items():
            if not isinstance(raw_item, dict):
                continue
            item = self.deref(raw_item, f"#/paths/{_escaped(str(path))}")
            shared = _list(item.get("parameters"))
            for method in ALL_METHODS:
                op = item.get(method)
                if not isinstance(op, dict):
                    continue
                if method not in READ_METHODS:
                    out.left_out.append(f"{method.upper()} {path}")
                    continue
                o = self.operation(path, method, op, shared, default_security)
                if o is None:
                    continue
                # what the operation is, as written: itself, its path's parameters and every
                # definition it reaches, each once (a resolved schema may be far larger)
                o = replace(o, digest=self.digest(o, [raw_item.get("parameters"),
                                                      raw_item.get(method)]))
                if o.table in taken:  # ids alike but for punctuation: numbered, in order
                    n = 2
                    while f"{o.table}_{n}" in taken:
                        n += 1
                    o = replace(o, table=f"{o.table}_{n}")
                taken[o.table] = o.op_id
                out.operations[o.table] = o
        return out

    def operation(self, path: str, method: str, op: dict[str, Any], shared: list[Any],
                  default_security: Any) -> Operation | None:
        at = f"{method.upper()} {path}"
        op_id = str(op.get("operationId") or "_".join([method, *words(path)]))
        params: dict[tuple[str, str], ApiParam] = {}
        for raw in [*shared, *_list(op.get("parameters"))]:
            if not isinstance(raw, dict) or raw.get("in") not in ("query", "path"):
                continue  # headers and cookies: the server sets what it must (the credential)
            schema = raw.get("schema") or {}
            params[(raw["in"], str(raw.get("name")))] = ApiParam(
                str(raw.get("name")), str(raw["in"]), bool(raw.get("required")) or
                raw["in"] == "path", schema if isinstance(schema, dict) else {},
                raw.get("description"))
        responses = _dict(op.get("responses"))
        ok = next((responses[c] for c in sorted(responses, key=str)
                   if str(c).startswith("2") and isinstance(responses[c], dict)), None)
        body = _json_schema(ok)
        if body is None:
            return None  # nothing to read as rows (a 204, a file download)
        items, item = _rows_of(body)
        security = op.get("security", default_security) or []
        names = tuple(sorted({str(k) for req in security if isinstance(req, dict) for k in req}))
        retry = tuple(sorted(int(c) for c in responses if str(c) in ("429", "503")))
        plist = tuple(params.values())
        del at
        return Operation(op_id, table_name(op_id), method, path, op.get("summary"),
                         op.get("description"), plist, items, item,
                         _paging(plist, body, items, ok or {}), retry, names)

    def digest(self, o: Operation, raw: list[Any]) -> str:
        reached: dict[str, Any] = {}
        todo = list(raw)
        while todo:
            node = todo.pop()
            if isinstance(node, list):
                todo += node
            elif isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith("#") and ref not in reached:
                    try:
                        reached[ref] = self.pointer(ref, ref)
                    except SpecError:
                        reached[ref] = None
                    todo.append(reached[ref])
                todo += [v for k, v in node.items() if k != "$ref"]
        blob = json.dumps([o.plan(), raw, reached], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def scheme_of(name: str, cfg: SourceConfig, spec_schemes: dict[str, Any]) -> dict[str, Any] | None:
    """The security scheme ``auth.scheme`` names in the spec (None without `auth:`)."""
    if cfg.auth is None:
        return None
    scheme = spec_schemes.get(cfg.auth.scheme)
    if not isinstance(scheme, dict):
        raise ConfigError(f"source {name!r}: auth.scheme {cfg.auth.scheme!r} is not a security "
                          "scheme of the spec.", hint="Schemes there: "
                          + (", ".join(sorted(spec_schemes)) or "(none)") + ".")
    return scheme


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _escaped(key: str) -> str:
    """A key as a JSON pointer writes it (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _json_schema(response: dict[str, Any] | None) -> dict[str, Any] | None:
    if not response:
        return None
    for ctype, media in (response.get("content") or {}).items():
        if ("json" in ctype or ctype == "*/*") and isinstance(media, dict):
            schema = media.get("schema")
            if isinstance(schema, dict):
                return schema
    return None


def _merged(schema: dict[str, Any]) -> dict[str, Any]:
    """An object schema with its allOf parts folded in."""
    if "allOf" not in schema:
        return schema
    props: dict[str, Any] = dict(schema.get("properties") or {})
    required = list(schema.get("required") or [])
    for part in schema["allOf"]:
        if isinstance(part, dict):
            part = _merged(part)
            props.update(part.get("properties") or {})
            required += part.get("required") or []
    return {**{k: v for k, v in schema.items() if k != "allOf"}, "type": "object",
            "properties": props, "required": required}


def types_of(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return {str(x) for x in t}
    if isinstance(t, str):
        return {t}
    if "properties" in schema or "allOf" in schema:
        return {"object"}
    return set()


def _rows_of(body: dict[str, Any]) -> tuple[tuple[str, ...] | None, dict[str, Any]]:
    body = _merged(body)
    if "array" in types_of(body):
        return (), _merged(body.get("items") or {})
    lists = [(k, _merged(v.get("items") or {})) for k, v in (body.get("properties") or {}).items()
             if isinstance(v, dict) and "array" in types_of(v)
             and "object" in types_of(_merged(v.get("items") or {}))]
    if len(lists) == 1:
        return (lists[0][0],), lists[0][1]
    return None, body


def envelope_fields(body: dict[str, Any], items: tuple[str, ...] | None
                    ) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The response's fields beside its rows (two levels deep), with their schemas."""
    body = _merged(body)
    if items is None or items == ():
        return []
    out: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    for k, v in (body.get("properties") or {}).items():
        if not isinstance(v, dict) or (k,) == items:
            continue
        v = _merged(v)
        if "object" in types_of(v):
            out += [((k, k2), _merged(v2)) for k2, v2 in (v.get("properties") or {}).items()
                    if isinstance(v2, dict)]
        else:
            out.append(((k,), v))
    return out


def _paging(params: tuple[ApiParam, ...], body: dict[str, Any], items: tuple[str, ...] | None,
            ok: dict[str, Any]) -> Paging:
    """How the operation pages, from its shape: the parameters it takes and what its response
    holds beside the rows. A single-row response never pages."""
    if items is None:
        return Paging()
    query = [p for p in params if p.where == "query"]
    ints = [p for p in query if types_of(p.schema) & {"integer", "number"}]
    # an opaque token: text with no enum, format or pattern of its own (a date is a filter)
    strings = [p for p in query if "string" in types_of(p.schema) and not (
        {"enum", "format", "pattern"} & set(p.schema))]
    size = next((p for p in ints if _named(p.name, SIZE_WORDS, SIZE_MARKS)), None)
    size_max = size.schema.get("maximum") if size else None
    base = Paging(size=size.name if size else None,
                  size_max=int(size_max) if isinstance(size_max, int | float) else None)
    # with Link headers or next URLs the API writes the page parameter into the URL itself:
    # it is the server's, not an argument
    mark = next((p.name for p in query if _named(p.name, CURSOR_WORDS, CURSOR_MARKS)
                 or _named(p.name, PAGE_WORDS, frozenset({"page"}))
                 or _named(p.name, OFFSET_WORDS, OFFSET_MARKS)), None)
    headers = {str(h).lower() for h in _dict(ok.get("headers"))}
    if "link" in headers:
        return replace(base, kind="link", param=mark)
    env = envelope_fields(body, items)
    text = [(path, s) for path, s in env if "string" in types_of(s)]
    pairs = []  # (overlap, -order, param, field path, field schema): the best-matched pair
    for i, p in enumerate(strings):
        pw = set(words(p.name))
        if not _named(p.name, CURSOR_WORDS, CURSOR_MARKS):
            continue
        for path, s in text:
            fw = set(words(path[-1]))
            if fw & (CURSOR_WORDS | {"next"}) and (fw & pw or "next" in fw):
                pairs.append((len(fw & pw), -i, p, path, s))
    if pairs:
        _n, _i, p, path, s = max(pairs, key=lambda x: (x[0], x[1]))
        if set(words(path[-1])) & LINK_WORDS or s.get("format") in ("uri", "url"):
            return replace(base, kind="next_url", field=path, param=mark)
        return replace(base, kind="cursor", param=p.name, field=path)
    for path, s in text:
        fw = set(words(path[-1])) | (set(words(path[0])) if len(path) > 1 else set())
        if "next" in fw and (fw & LINK_WORDS or s.get("format") in ("uri", "url")):
            return replace(base, kind="next_url", field=path, param=mark)
    page = next((p for p in ints if p is not size
                 and _named(p.name, PAGE_WORDS, frozenset({"page"}))), None)
    if page is not None:
        low = page.schema.get("minimum", page.schema.get("default", 1))
        return replace(base, kind="page", param=page.name,
                       first=int(low) if isinstance(low, int) else 1)
    offset = next((p for p in ints if _named(p.name, OFFSET_WORDS, OFFSET_MARKS)), None)
    if offset is not None:
        return replace(base, kind="offset", param=offset.name, first=0)
    return base


# --- columns --------------------------------------------------------------------------------------


def column_type(schema: dict[str, Any]) -> tuple[str, TypeKind]:
    """The engine type (DuckDB's) and kind a field's values are read as."""
    schema = _merged(schema)
    t = types_of(schema) - {"null"}
    fmt = schema.get("format")
    if t == {"string"}:
        if fmt == "date":
            return "DATE", "date"
        if fmt == "date-time":
            return "TIMESTAMP WITH TIME ZONE", "timestamptz"
        return "VARCHAR", "string"
    if t == {"integer"}:
        return "BIGINT", "integer"
    if t == {"number"}:
        return "DOUBLE", "float"
    if t == {"boolean"}:
        return "BOOLEAN", "boolean"
    return "JSON", "json"


def item_columns(op: Operation) -> list[Column]:
    """One column per field of an item, in the spec's order; nested objects and lists are JSON."""
    required = set(_list(op.item.get("required")))
    out = []
    seen: set[str] = set()
    for name, schema in _dict(op.item.get("properties")).items():
        if not isinstance(schema, dict) or str(name).lower() in seen:
            continue  # id and ID: one column (an engine reads names without case)
        seen.add(str(name).lower())
        type_, kind = column_type(schema)
        nullable = (name not in required or bool(schema.get("nullable"))
                    or "null" in types_of(schema))
        out.append(Column(name=str(name), type=type_, kind=kind, nullable=nullable))
    return out


def field_schema(op: Operation, name: str) -> dict[str, Any]:
    raw = (op.item.get("properties") or {}).get(name)
    return _merged(raw) if isinstance(raw, dict) else {}
