"""An HTTP API is untrusted: the corpus of tests/attacks/api.py against a real hostile API
(tests/hostileapi.py) and the help desk (tests/apiserver.py), through `tether serve` over stdio
with the real MCP client, and through the CLI.

A credential the API echoes (as sent, in upper or lower case, base64, URL-encoded; in an error,
a row or a next-page link) reaches no error, result, cursor, evidence, call log or tool; one
call of an API that pages out gigabytes holds at most ``serve.max_api_call_bytes`` (the server
process's memory is measured); one user's sampled rows are told to no other user; a spec nested
100,000 deep is a clear error.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from apiserver import running, spec, tickets, write_project
from attacks.api import DEEP, ECHO_FORMS, SECRETS, ApiAttack, of_kind
from conftest import free_port, run_cli
from hostileapi import BOMB_PAGES, BOMB_ROW_BYTES, Hostile, encoded, hostile_spec
from tether.config import load_project
from tether.registry import open_registry

TETHER = str(Path(sys.executable).parent / "tether")
MiB = 1 << 20


def params(root: Path, user: str) -> StdioServerParameters:
    return StdioServerParameters(command=TETHER, args=["serve", "--project", str(root),
                                                       "--as-user", user],
                                 env={k: v for k, v in os.environ.items()
                                      if k in ("PATH", "PYTHONPATH")})


def spellings(secret: str) -> set[str]:
    """Every spelling of the secret that must not come back (the attack's and a few more)."""
    forms = {encoded(secret, f) for f in ("sent", "upper", "lower", "base64", "url", "plus",
                                          "password")}
    return forms | {base64.urlsafe_b64encode(secret.encode()).decode()}


def leaked(text: str, secret: str) -> list[str]:
    """The spellings of ``secret`` whose first 10 characters appear in ``text`` (any case)."""
    low = text.lower()
    return sorted(f for f in spellings(secret) if f[:10].lower() in low)


def cursor_text(cursor: str | None) -> str:
    """What a cursor carries (its signed body is readable base64)."""
    if not cursor:
        return ""
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))[16:].decode(
        "utf-8", "replace")


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[Hostile, int]]:
    from apiserver import serving

    port = free_port()
    api = Hostile()
    with serving(api.app(), port):
        yield api, port


def hostile_project(root: Path, port: int, scheme: str) -> Path:
    """A project over the hostile API: amy's own credential in the token store, no samples."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "hostile.json").write_text(json.dumps(hostile_spec(scheme)))
    (root / "tether.yaml").write_text(f"""\
sources:
  h:
    kind: openapi
    spec: hostile.json
    base_url: http://127.0.0.1:{port}
    auth: {{scheme: auth, credential: token_store, sample_as: amy}}
    sample_calls: 0
products:
  echo_error: {{table: echoError, tool: {{name: echo_error}}}}
  echo_rows: {{table: echoRows, tool: {{name: echo_rows}}}}
  bomb: {{table: bombRows, tool: {{name: bomb_rows}}}}
policies:
  roles: {{all: {{tools: ["*"]}}}}
  users: {{amy: {{role: all}}}}
""")
    res = run_cli("token", "credential", "amy", "--source", "h", "--project", str(root),
                  input=SECRETS[scheme] + "\n")
    assert res.returncode == 0, res.stderr
    res = run_cli("build", "--project", str(root))
    assert res.returncode == 0, res.stdout + res.stderr
    return root


def echo_session(root: Path, scheme: str) -> dict[tuple[str, str], dict[str, str]]:
    """Every echo attack of ``scheme`` in one stdio session; per (tool, form) what came back,
    by channel (error, result, cursor, evidence), and the call log after the server stopped."""
    calls = [(a.tool or "", a.form or "") for a in of_kind("echo") if a.scheme == scheme]

    async def go() -> list[Any]:
        async with Client(params(root, "amy")) as c:
            return [await c.call_tool(tool, {"form": form}) for tool, form in calls]

    out: dict[tuple[str, str], dict[str, str]] = {}
    for key, r in zip(calls, anyio.run(go), strict=True):
        result = r.structured_content or {}
        out[key] = {"error": r.content[0].text if r.is_error else "",
                    "is_error": str(r.is_error),
                    "result": json.dumps(result) + json.dumps([c.model_dump() for c in
                                                               r.content]),
                    "cursor": cursor_text(result.get("next_cursor")),
                    "evidence": json.dumps((r.meta or {}).get("tether/evidence"))}
    registry = open_registry(load_project(root))
    try:
        log = json.dumps(registry.calls(None), default=str)
    finally:
        registry.close()
    tools = "".join(p.read_text() for p in (root / "tools").glob("*.json"))
    for got in out.values():
        got["call log"] = log
        got["tools"] = tools
    return out


@pytest.fixture(scope="module")
def echoes(hostile: tuple[Hostile, int], tmp_path_factory: pytest.TempPathFactory
           ) -> dict[str, dict[tuple[str, str], dict[str, str]]]:
    return {scheme: echo_session(hostile_project(tmp_path_factory.mktemp(scheme),
                                                 hostile[1], scheme), scheme)
            for scheme in ECHO_FORMS}


@pytest.mark.parametrize("attack", of_kind("echo"), ids=lambda a: a.id)
def test_an_echoed_credential_never_leaves(
        attack: ApiAttack, echoes: dict[str, dict[tuple[str, str], dict[str, str]]]) -> None:
    got = echoes[attack.scheme][(attack.tool or "", attack.form or "")]
    secret = SECRETS[attack.scheme]
    for channel, text in got.items():
        assert not leaked(text, secret), (attack.id, channel, leaked(text, secret), text[:600])
    if attack.tool == "echo_error":
        assert got["is_error"] == "True" and "answered 400" in got["error"]
        assert "x" * 150 in got["error"]  # the API's message is still said, less the secret
    else:
        assert got["is_error"] == "False", got["result"][:400]
        assert "you sent <credential>" in got["result"]
        evidence = json.loads(got["evidence"])
        assert len(evidence["requests"]) == 2  # the next-page link was followed


# --- a page bomb -------------------------------------------------------------------------------


def server_pid(root: Path) -> int:
    """The `tether serve` process this test's MCP client started for ``root``."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            status = (d / "status").read_text()
        except OSError:
            continue
        ppid = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("PPid:"))
        if ppid == os.getpid() and b"serve" in argv and str(root).encode() in argv:
            return int(d.name)
    raise AssertionError("the server process was not found")


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of ``pid``, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


def test_a_page_bomb_is_bounded_by_the_call_byte_cap(
        hostile: tuple[Hostile, int], tmp_path: Path) -> None:
    """50 pages of one 8 MiB row each, asked for 50 rows: the call reads at most
    serve.max_api_call_bytes (32 MiB: three rows, the fourth page cut off), returns what it read
    with a cursor, and the server's peak memory grows by no more than 4 times the cap and
    150 MiB (278 MiB). The old server read all 400 MiB and grew by 2.1 GB.

    What the 24 MiB of rows cost, measured step by step in one process: reading (each page's
    chunks and their join, json.loads's text, the rows kept, the cut fourth page) about 2.5
    times the rows; DuckDB's table of them (a text table and its typed copy, memory its
    allocator keeps) about 5 times; the rows read back about 1.5 times: some 9 times the rows,
    200-215 MiB, leaving some 60 MiB to the allocator's moods."""
    api, port = hostile
    root = hostile_project(tmp_path / "bomb", port, "bearer")
    cap = 32 * MiB  # serve.max_api_call_bytes by default

    async def go() -> tuple[Any, dict[str, int], dict[str, int]]:
        async with Client(params(root, "amy")) as c:
            await c.list_tools()
            pid = server_pid(root)
            with contextlib.suppress(OSError), open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")  # VmHWM starts again from VmRSS (else it holds the start's peak)
            before = memory(pid)
            r = await c.call_tool("bomb_rows", {"limit": 50})
            return r, before, memory(pid)

    api.bomb_pages = 0
    r, before, after = anyio.run(go)
    growth = after["VmHWM"] - before["VmRSS"]
    print(f"page bomb: VmRSS before {before['VmRSS'] / MiB:.0f} MiB, VmHWM after "
          f"{after['VmHWM'] / MiB:.0f} MiB, growth {growth / MiB:.0f} MiB, "
          f"pages read {api.bomb_pages}")
    assert api.bomb_pages <= cap // BOMB_ROW_BYTES + 1 < BOMB_PAGES
    assert growth <= 4 * cap + 150 * MiB, growth / MiB
    assert not r.is_error, r.content
    assert r.structured_content["truncated"] is True and r.structured_content["next_cursor"]
    assert load_project(root).config.serve.max_api_call_bytes == cap


def test_past_the_call_byte_cap_the_rows_read_come_back_and_a_larger_first_page_is_refused(
        hostile: tuple[Hostile, int]) -> None:
    """With 20 MiB a call: two 8 MiB pages whole, the third cut off where the call's bytes
    run out (not at 32 MiB a page); the next call starts at that third page. With 4 MiB, the
    first page alone is too large: a clear refusal naming the setting."""
    from tether.sources.apiclient import ApiClient, ApiError, Credential
    from tether.sources.openapi import parse_spec

    api, port = hostile
    s = parse_spec(json.dumps(hostile_spec()), "hostile.json")
    plan = s.operations["bombRows"].plan()
    cred = Credential(SECRETS["bearer"], s.schemes["auth"])
    client = ApiClient(f"http://127.0.0.1:{port}", 30.0, max_bytes=20 * MiB)
    try:
        api.bomb_pages = 0
        first = client.rows(plan, {}, cred, 50)
        assert [r["id"] for r in first.rows] == [0, 1] and api.bomb_pages == 3
        assert first.next_state is not None
        again = client.rows(plan, {}, cred, 1, first.next_state)
        assert [r["id"] for r in again.rows] == [2]
        small = ApiClient(f"http://127.0.0.1:{port}", 30.0, max_bytes=4 * MiB)
        with pytest.raises(ApiError) as e:
            small.rows(plan, {}, cred, 50)
        small.close()
    finally:
        client.close()
    assert "serve.max_api_call_bytes" in e.value.paragraph()


# --- one user's samples ------------------------------------------------------------------------


@pytest.mark.parametrize("attack", of_kind("sample_leak"), ids=lambda a: a.id)
def test_one_users_samples_are_told_to_no_one_else(attack: ApiAttack, tmp_path: Path) -> None:
    """Each caller's own credential, samples read as ann: ben's tools/list holds nothing only
    ann's responses held, and no sentence a sample wrote (the documented status no sampled
    response held)."""
    port = free_port()
    root = tmp_path / "p"
    with running(port):
        write_project(root, port)
        for user, token in (("ann", "tok-ann"), ("ben", "tok-ben")):
            res = run_cli("token", "credential", user, "--source", "desk", "--project",
                          str(root), input=token + "\n")
            assert res.returncode == 0, res.stderr
        res = run_cli("build", "--project", str(root))
        assert res.returncode == 0, res.stdout + res.stderr

        async def go() -> list[Any]:
            async with Client(params(root, "ben")) as c:
                return [t.model_dump(by_alias=True) for t in (await c.list_tools()).tools]

        listed = anyio.run(go)
    text = json.dumps(listed)
    assert attack.tool in text
    assert "no sampled response held" not in text
    for t in listed:
        context = (t.get("_meta") or {}).get("tether/context") or {}
        assert "samples" not in (context.get("sources") or {}).values(), (t["name"], context)
        if t["name"] == attack.tool:
            assert "samples" not in context["generated_from"], context
    bens = {str(v) for t in tickets() if t["owner"] == "ben" for v in t.values()}
    public = json.dumps(spec())
    anns = {str(v) for t in tickets() if t["owner"] == "ann" for v in t.values()
            if str(v) not in bens and str(v) not in public and len(str(v)) > 3}
    assert anns and not [v for v in anns if v in text]


# --- a spec nested deeper than anyone writes ---------------------------------------------------


def deep_text(kind: str) -> tuple[str, str]:
    """(file name, text) of a spec nested DEEP levels (``ref``: a chain of DEEP $refs)."""
    if kind == "json":
        return "deep.json", ('{"openapi": "3.1.0", "paths": {"/x": {"get": {"responses": '
                             '{"200": {"content": {"application/json": {"schema": '
                             + '{"items": ' * DEEP + "{}" + "}" * DEEP + "}}}}}}}}")
    if kind == "yaml":
        return "deep.yaml", ("openapi: 3.1.0\npaths:\n  /x:\n    get:\n      responses:\n"
                             "        '200':\n          content:\n            application/json:"
                             "\n              schema: " + "[" * DEEP + "]" * DEEP + "\n")
    schemas = {f"S{i}": {"$ref": f"#/components/schemas/S{i + 1}"} for i in range(DEEP)}
    schemas[f"S{DEEP}"] = {"type": "object"}
    return "deep.json", json.dumps({
        "openapi": "3.1.0", "components": {"schemas": schemas},
        "paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/S0"}}}}}}}}})


@pytest.mark.parametrize("attack", of_kind("deep_spec"), ids=lambda a: a.id)
def test_a_deep_spec_is_a_clear_error_in_init(attack: ApiAttack, tmp_path: Path) -> None:
    name, text = deep_text(attack.spec or "")
    (tmp_path / name).write_text(text)
    res = run_cli("init", str(tmp_path / "proj"), "--openapi", name, "--base-url",
                  "http://127.0.0.1:9/api", cwd=tmp_path)
    said = res.stdout + res.stderr
    assert res.returncode == 2, said[-2000:]
    assert "Traceback" not in said and "RecursionError" not in said
    assert name in said and "deeper than" in said, said[-2000:]
    assert not (tmp_path / "proj").exists()


def test_a_deep_spec_stops_build_and_check_with_a_clear_error(tmp_path: Path) -> None:
    port = free_port()
    root = tmp_path / "p"
    with running(port):
        write_project(root, port)
        res = run_cli("token", "credential", "ann", "--source", "desk", "--project", str(root),
                      input="tok-ann\n")
        assert res.returncode == 0, res.stderr
        res = run_cli("build", "--project", str(root))
        assert res.returncode == 0, res.stdout + res.stderr
        before = {p.name: p.read_text() for p in (root / "tools").glob("*.json")}
        _, text = deep_text("json")
        (root / "helpdesk.yaml").write_text(text)  # JSON is YAML: the same file name
        for command in ("check", "build"):
            res = run_cli(command, "--project", str(root))
            said = res.stdout + res.stderr
            assert res.returncode == 2, (command, said[-2000:])
            assert "Traceback" not in said and "RecursionError" not in said, command
            assert "helpdesk.yaml" in said and "deeper than" in said, (command, said[-2000:])
    assert {p.name: p.read_text() for p in (root / "tools").glob("*.json")} == before


def test_the_corpus_names_each_attack_once() -> None:
    from attacks.api import API_ATTACKS

    ids = [a.id for a in API_ATTACKS]
    assert len(ids) == len(set(ids))
    assert {a.kind for a in API_ATTACKS} == {"echo", "page_bomb", "sample_leak", "deep_spec"}
    assert yaml.safe_dump([a.__dict__ for a in API_ATTACKS])  # data only
