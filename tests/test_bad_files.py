"""Bad files end in one paragraph, never a traceback: YAML alias bombs and recursive aliases,
non-UTF-8 and binary files, directories where a file belongs, bad lines in cases.jsonl and bad
traces in a run folder. Each test runs the real `tether` CLI on the bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from tether.config import load_project
from tether.errors import ConfigError
from tether.eval.cases import load_cases

SOURCE = 'sources: {main: {url: "duckdb:///w.duckdb"}}\n'
LAUGHS = "".join(
    [SOURCE, 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
       for i in range(8)])
BINARY = bytes(range(256)) * 4
GOOD_CASES = [
    {"case_id": "c1", "user_role": "analyst", "as_user": "ana",
     "question": "How many customers are there?", "gold": {"answer": 42}},
    {"case_id": "c2", "user_role": "analyst", "as_user": "bob",
     "question": "How many customers do we have?", "gold": {"answer": 42}},
]
TINY_SERVER = '''from mcp.server.mcpserver import MCPServer

app = MCPServer("tiny")


@app.tool()
def count_customers() -> int:
    """How many customers there are."""
    return 42


app.run()
'''


def one_paragraph(res: subprocess.CompletedProcess[str], code: int, *says: str) -> str:
    """The command exited ``code`` with one paragraph saying each of ``says``; no traceback."""
    out = res.stdout + res.stderr
    assert res.returncode == code, out
    assert "Traceback" not in out, out
    text = res.stderr.strip()
    assert text.startswith("error:") and "\n" not in text, out
    for s in says:
        assert s in text, out
    return text


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def project(tmp_path: Path, content: bytes | str) -> Path:
    d = tmp_path / "proj"
    d.mkdir()
    data = content.encode() if isinstance(content, str) else content
    (d / "tether.yaml").write_bytes(data)
    return d


# --- tether.yaml ---------------------------------------------------------------------------------


def test_an_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    d = project(tmp_path, LAUGHS)
    started = time.perf_counter()
    res = run_cli("profile", "--project", str(d))
    assert time.perf_counter() - started < 5
    one_paragraph(res, 2, "tether.yaml:7", "alias bomb", "100,000")


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    d = project(tmp_path, SOURCE + "products:\n  p: &p\n    table: t\n    tool: {name: *p}\n")
    one_paragraph(run_cli("profile", "--project", str(d)), 2, "tether.yaml:5",
                  "recursive alias", "*p")


def test_plain_anchors_and_aliases_still_load(tmp_path: Path) -> None:
    d = project(tmp_path, SOURCE + "products:\n"
                "  a: &base {table: a, owner: ops, primary_key: [id]}\n"
                "  b:\n    <<: *base\n    table: b\n")
    p = load_project(d)
    assert p.config.products["b"].owner == "ops" and p.config.products["b"].table == "b"


@pytest.mark.parametrize(("content", "says"), [
    (SOURCE.encode() + b"products:\n  t: {table: t, owner: Jos\xe9}\n",
     ["tether.yaml:3", "not UTF-8 text", "is 0xe9", "iconv"]),
    (b"\x89PNG\r\n\x1a\n\x00\x00" + BINARY, ["tether.yaml:3", "not text", "byte 8 is a NUL"]),
    (b"\xff\xfe" + SOURCE.encode("utf-16-le"), ["tether.yaml:1", "not text", "UTF-16"]),
])
def test_a_project_file_that_is_not_utf8_text(tmp_path: Path, content: bytes,
                                              says: list[str]) -> None:
    d = project(tmp_path, content)
    one_paragraph(run_cli("profile", "--project", str(d)), 2, *says)


def test_a_directory_in_place_of_tether_yaml(tmp_path: Path) -> None:
    (tmp_path / "proj" / "tether.yaml").mkdir(parents=True)
    one_paragraph(run_cli("profile", "--project", str(tmp_path / "proj")), 2,
                  "tether.yaml", "is a directory")


# --- eval run: cases.jsonl -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> str:
    script = tmp_path_factory.mktemp("tiny") / "tiny.py"
    script.write_text(TINY_SERVER)
    return f"stdio:{sys.executable} {script}"


def eval_run(server: str, cases: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("eval", "run", "--server", server, "--cases", str(cases), "--agent",
                   "baseline", "--out", str(out), "--as-user-via", "none")


@pytest.fixture(scope="module")
def good_run(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("good")
    (d / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOOD_CASES))
    res = eval_run(server, d / "cases.jsonl", d / "run")
    assert res.returncode == 0, res.stdout + res.stderr
    return d / "run"


@pytest.mark.parametrize(("content", "says"), [
    (BINARY, ["cases.jsonl:1", "not text", "byte 0 is a NUL byte"]),
    (b"\x1f\x8b\x08" + bytes(range(128, 256)) * 3, ["cases.jsonl:1", "byte 1 is 0x8b"]),
    ("".join(json.dumps(c) + "\n" for c in GOOD_CASES).encode("utf-16"),
     ["cases.jsonl:1", "not text", "UTF-16"]),
])
def test_a_cases_file_that_is_not_text_writes_nothing(server: str, good_run: Path,
                                                      tmp_path: Path, content: bytes,
                                                      says: list[str]) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_bytes(content)
    one_paragraph(eval_run(server, cases, tmp_path / "new"), 2, *says)
    assert not (tmp_path / "new").exists()
    out = tmp_path / "existing"
    shutil.copytree(good_run, out)
    before = snapshot(out)
    one_paragraph(eval_run(server, cases, out), 2, *says)
    assert snapshot(out) == before


def test_a_directory_as_cases_file(server: str, tmp_path: Path) -> None:
    res = eval_run(server, tmp_path, tmp_path / "out")  # the CLI framework's usage error
    assert res.returncode == 2 and "Traceback" not in res.stdout + res.stderr
    assert "directory" in res.stderr and not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="is a directory"):
        load_cases(tmp_path)


def test_bad_lines_are_skipped_and_named_and_the_good_cases_run(server: str,
                                                                tmp_path: Path) -> None:
    good = [json.dumps(c).encode() for c in GOOD_CASES]
    bad_case = json.dumps({"case_id": "c3", "question": "?"}).encode()
    cases = tmp_path / "cases.jsonl"
    cases.write_bytes(b"\n".join([good[0], b"\x00\x01\xfe\xff binary junk", b"{not json",
                                  bad_case, b'{"case_id": "Jos\xe9"}', good[1]]) + b"\n")
    res = eval_run(server, cases, tmp_path / "out")
    out = " ".join((res.stdout + res.stderr).split())  # the skipped lines wrap at 80 columns
    assert res.returncode == 1 and "Traceback" not in out, out
    for line, what in ((2, "not UTF-8 text: byte 0 of the line is a NUL byte"),
                       (3, "not JSON"), (4, "user_role: Field required (case 'c3')"),
                       (5, "not UTF-8 text: byte 16 of the line is 0xe9")):
        assert f"cases.jsonl:{line}: {what}" in out, out
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert {(e["case_id"], e["status"]) for e in index["entries"]} == {("c1", "done"),
                                                                       ("c2", "done")}
    assert "(0 errors, 6 invalid lines)" in out


# --- eval label and report: bad traces -----------------------------------------------------------


BAD_TRACES: dict[str, tuple[bytes | None, str]] = {
    "binary": (BINARY, "is not text: byte 0 is a NUL byte"),
    "latin": (b'{"case_id": "caf\xe9"}', "is not UTF-8 text: byte 16 is 0xe9"),
    "notjson": (b'{"case_id": ', "is not JSON"),
    "nottrace": (b'{"case_id": "nottrace"}', "is not a valid trace: server: Field required"),
    "folder": (None, "is a directory, not a file"),
}


def test_bad_traces_get_null_labels_for_review_and_the_good_ones_are_labelled(
        good_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    index = json.loads((run / "index.json").read_text())
    for cid, (content, _) in BAD_TRACES.items():
        f = run / "traces" / f"{cid}.json"
        if content is None:
            f.mkdir()
        else:
            f.write_bytes(content)
        index["entries"].append({"case_id": cid, "file": f"traces/{cid}.json", "status": "done"})
    (run / "index.json").write_text(json.dumps(index))
    res = run_cli("eval", "label", str(run), "--project", str(tmp_path), "--json")
    assert res.returncode == 0 and "Traceback" not in res.stdout + res.stderr, res.stderr
    lines = {x["case_id"]: x for x in map(json.loads,
                                          (run / "labels.jsonl").read_text().splitlines())}
    assert set(lines) == {"c1", "c2", *BAD_TRACES}
    assert lines["c1"]["correct"] is True and lines["c2"]["correct"] is True
    for cid, (_, says) in BAD_TRACES.items():
        x = lines[cid]
        assert x["needs_human_review"] is True
        assert f"trace file traces/{cid}.json {says}" in x["review_reason"], x
        assert all(x[k] is None for k in ("correct", "grounded", "grounding_precision",
                                          "grounding_recall", "definition_match",
                                          "freshness_pass", "failure_class"))
    res = run_cli("eval", "report", str(run), "--out", str(tmp_path / "report"), "--json")
    assert res.returncode == 0 and "Traceback" not in res.stdout + res.stderr, res.stderr
    (row,) = json.loads(res.stdout)
    assert row["cases"] == 7 and row["correct"] == 2 and row["needs_human_review"] >= 5


@pytest.mark.parametrize("bad", ["index", "prices", "bomb"])
def test_an_unreadable_index_or_price_table_keeps_the_labels(good_run: Path, tmp_path: Path,
                                                             bad: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    assert run_cli("eval", "label", str(run), "--project", str(tmp_path)).returncode == 0
    before = snapshot(run)
    args = ["eval", "label", str(run), "--project", str(tmp_path)]
    if bad == "index":
        (run / "index.json").write_bytes(BINARY)
        before = snapshot(run)
        one_paragraph(run_cli(*args), 2, "index.json:1", "not text")
    else:
        prices = tmp_path / "prices.yaml"
        prices.write_bytes(BINARY if bad == "prices" else LAUGHS.encode())
        says = ["prices.yaml:1", "not text"] if bad == "prices" else ["prices.yaml:7", "alias bomb"]
        one_paragraph(run_cli(*args, "--prices", str(prices)), 2, *says)
    assert snapshot(run) == before
