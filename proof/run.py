"""`make proof`: one command from nothing to docs/proof.md.

    python -m proof.run [--cases all|N|ID,ID...] [--out demo-out/proof] [--doc docs/proof.md]

Fetches and verifies the model, builds or reuses the llama-cpp-python wheel and its venv (all
cached under ``$TETHER_PROOF_CACHE``, default ``~/.cache/tether-proof``), starts the server on
loopback, builds the demo under ``OUT``, runs ``tether eval run --agent openai`` once per
configuration (tether generic, bare, grounded, and mcp-server-motherduck on a DuckDB 1.5 copy),
labels, reports, stops the server, checks that ``tether eval label`` + ``tether eval report``
reproduce the report from the kept traces alone, and renders the doc. Each run goes to a new
folder ``OUT/runs/<n>/`` and is kept; the previous complete run is the other side of the
agreement table.

Provenance: ``OUT/runs/<n>/proof.json`` records what the numbers were made from, at the top
level: ``commit`` (``git rev-parse HEAD`` of this checkout when the run started, null outside a
git checkout), ``dirty`` (whether ``git status --porcelain`` listed anything then: uncommitted or
untracked files, so the commit alone does not name the code), ``tether_version``
(``tether.__version__``), ``cases_sha256`` (the sha256 of the case file the agent was given: the
selection written to the run folder, or the demo's whole file), ``model_sha256`` (the verified
model file's) and ``agent_options`` (the ``--agent-option`` pairs of every ``tether eval run``,
``base_url`` that of the first server start; a configuration run after a server restart records
its own ``base_url``). docs/proof.md prints them at the top.

A run is identified by its number ``n`` together with its ``started_at`` stamp (UTC, seconds):
the number alone restarts at 1 in another ``OUT`` folder or checkout. The hand-written section of
the doc is stamped with that identity and the commit (proof/render.py, :data:`STAMP_FORMAT`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tether
from proof import distractors, llama, second_turn
from proof.model import MODEL_NAME, ProofError, ensure_model, sha256_file
from proof.render import PROOF_JSON, compare_reports, latest_runs, render_doc

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TETHER = str(BIN / "tether")
CACHE = Path(os.environ.get("TETHER_PROOF_CACHE", Path.home() / ".cache" / "tether-proof"))
SCALE = "0.2"
SECOND_SCALE = "0.25"  # the second warehouse's, as the tests build it (~12k rows)
MAX_TURNS = 6
CASE_TIMEOUT_S = 900  # one case, all its model requests (a loaded 2-core machine is slow)
REQUEST_TIMEOUT_S = 600
MAX_TOKENS = 512  # per model response: an answer is a sentence; stops a runaway generation
# A tool result the model reads is cut here (results are capped): a page of a listing is
# thousands of tokens of ids, which this CPU reads at 30-150 tokens a second.
MAX_RESULT_CHARS = 1200


@dataclass(frozen=True)
class Config:
    key: str  # folder name under runs/<n>/
    server: str  # the report's `server`
    kind: str  # "tether" or "thirdparty"
    serve: tuple[str, ...] = ()  # tether: how it is served (mode and list)
    agent: tuple[str, ...] = ()  # agent options beyond the shared ones (key=value)


CONFIGS: tuple[Config, ...] = (
    Config("generic", "tether-generic", "tether", ("--mode", "generic")),
    Config("bare", "tether-bare", "tether", ("--mode", "bare")),
    Config("grounded", "tether-grounded", "tether", ("--mode", "grounded")),
    # the same grounded tools reached through search, describe and one generic listing
    Config("discovery", "tether-discovery", "tether",
           ("--mode", "grounded", "--dedicated-tools", "none")),
    Config("motherduck", "mcp-server-motherduck", "thirdparty"),
    # a generic SQL server that allows writes (write_query), on its own SQLite copy: the write
    # proof's comparison
    Config("sqlite", "mcp-server-sqlite", "thirdparty"),
    # grounded, with the constrained loop's old second turn (an answer choice asked again in
    # plain text): labelled both ways by proof/second_turn.py; not in the default set
    Config("grounded-again", "tether-grounded-ask-again", "tether", ("--mode", "grounded"),
           ("ask_again=true",)),
)


@dataclass(frozen=True)
class Warehouse:
    """What a proof runs on: the demo, or the second warehouse of the tests (another domain,
    its own tether.yaml and cases with gold computed by SQL), built the same way each run."""

    key: str  # "demo" | "second" | "lahman"
    words: str  # how the doc names it
    out: str  # default OUT folder under demo-out/
    doc: str  # default doc under docs/
    # grounded with every product's own tool even where the list exceeds the token budget
    # (served discovery-only by default): the comparison the discovery configuration needs;
    # the model's context then has to hold the whole list
    dedicated_all: bool = False
    n_ctx: int = llama.N_CTX
    writes: bool = False  # the demo's write cases; each configuration writes to its own copy
    configs: str = "generic,bare,grounded,discovery,motherduck"  # the default --configs


WAREHOUSES: dict[str, Warehouse] = {
    "demo": Warehouse("demo", "the demo warehouse", "proof", "proof.md"),
    "second": Warehouse("second", "the second warehouse (walk-in clinics, tests/warehouse2)",
                        "proof-second", "proof-second.md"),
    "lahman": Warehouse("lahman", "the Lahman baseball database as `tether init` writes it "
                        "(tests/zoo; one line added: a tool-list budget that holds every "
                        "product's own tool)", "proof-zoo", "proof-zoo.md",
                        dedicated_all=True, n_ctx=32768),
    "writes": Warehouse("writes", "the demo warehouse (its write cases: `tether demo cases "
                        "--writes`)", "proof-writes", "proof-writes.md", writes=True,
                        configs="grounded,sqlite"),
}
ZOO_USER = "zoo.analyst"  # the starter's example user (its role sees everything)
ZOO_BUDGET = 24000  # tokens: Lahman's 27 products' own tools (about 18,500) fit


def agent_options(base_url: str, today: str | None = None) -> list[str]:
    """The openai agent's options: the constrained-JSON loop on a plain ChatML server.

    Why constrained rather than native tool calls: llama-cpp-python's ``chatml-function-calling``
    handler shows the model each tool's name and schema but not its description, and it renders
    the tool list only on requests that may call a tool, so the prompt's prefix changes between a
    case's requests and the whole tool list is read again for every case. The constrained loop
    lists every tool with its description in one system prompt that stays the same across a
    user's requests (the server reuses the evaluated prefix), and lets the model call tools for
    as many turns as it needs. ``today``: the demo's clock, as a deployed agent's prompt carries
    the date ("last quarter" means nothing without one)."""
    opts = {"model": MODEL_NAME, "base_url": base_url, "constrained": "true",
            "temperature": "0", "max_tokens": str(MAX_TOKENS), "today": today or demo_today(),
            "max_result_chars": str(MAX_RESULT_CHARS), "timeout": str(REQUEST_TIMEOUT_S)}
    return [a for k, v in opts.items() for a in ("--agent-option", f"{k}={v}")]


def options_dict(base_url: str, today: str | None = None) -> dict[str, str]:
    """:func:`agent_options` as the ``key: value`` pairs proof.json records."""
    pairs = agent_options(base_url, today)[1::2]
    return dict(o.split("=", 1) for o in pairs)


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout at ``root``: ``git rev-parse HEAD`` and whether
    ``git status --porcelain`` lists anything; (None, None) outside a git checkout. Read-only
    (``--no-optional-locks``: no index refresh written)."""
    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "--no-optional-locks", "-C", str(root), *args],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None

    head, status = git("rev-parse", "HEAD"), git("status", "--porcelain")
    if head is None or status is None or head.returncode or status.returncode:
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip())


def demo_today() -> str:
    from tether.demo.warehouse import CLOCK

    return CLOCK.date().isoformat()


def _second() -> Any:
    """tests/warehouse2, the second warehouse's generator and cases (not part of the package)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import warehouse2

    return warehouse2


def _zoo() -> Any:
    """tests/zoo.py, the public datasets of the tests (not part of the package)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import zoo

    return zoo


def zoo_cases(dataset: str) -> list[dict[str, Any]]:
    """The dataset's questions (tests/zoo/<dataset>/questions.yaml, gold computed by SQL and
    checked on both engines by the tests) as evaluation cases, asked as the starter's user."""
    import yaml

    out = []
    for q in yaml.safe_load(_zoo().questions_file(dataset).read_text()):
        answer = q["answer"]
        tolerance = round(abs(answer) * 0.005, 6) if isinstance(answer, float) else 0
        out.append({"case_id": q["id"], "source_trace": None, "user_role": "everything",
                    "as_user": ZOO_USER, "question": q["question"],
                    "gold": {"answer": answer, "tolerance": tolerance}})
    return out


def warehouse_today(key: str) -> str:
    """The warehouse's clock: the date a deployed agent's prompt would carry (a starter project
    has no clock: the wall clock's date, as its server resolves periods)."""
    if key == "lahman":
        return dt.datetime.now(dt.UTC).date().isoformat()
    return demo_today() if key in ("demo", "writes") else _second().CLOCK.date().isoformat()


def tether_target(project: Path, serve: tuple[str, ...]) -> str:
    return f"stdio:{shlex.join([TETHER, 'serve', '--project', str(project), *serve])}"


def eval_command(target: str, cases: Path, out: Path, base_url: str,
                 as_user_via: str | None = None, today: str | None = None,
                 extra: Sequence[str] = (), name: str | None = None) -> list[str]:
    """``tether eval run`` for one configuration: concurrency 1 keeps the server's prompt cache
    on one user's tool list for that user's cases."""
    cmd = [TETHER, "eval", "run", "--server", target, "--agent", "openai",
           *agent_options(base_url, today),
           *(a for o in extra for a in ("--agent-option", o)),
           "--max-turns", str(MAX_TURNS), "--concurrency", "1",
           "--timeout", str(CASE_TIMEOUT_S), "--cases", str(cases), "--out", str(out)]
    if as_user_via:
        cmd += ["--as-user-via", as_user_via]
    if name:  # a configuration the server's mode does not name (grounded, asked again)
        cmd += ["--name", name]
    return cmd


def server_flags(threads: int) -> list[str]:
    """Flags beyond the plain server command. ``--flash_attn``: about 9% faster prompt reading
    here. No ``--cache``: the server already reuses the longest prefix its context holds (the
    system prompt with the tool list) for every request of a user, and ``--cache true`` keeps
    older prompt states as well, which grew the server past 15 GB on a 24 GB machine."""
    del threads
    return ["--flash_attn", "true"]


# The default selection: one case per trap of the demo (docs/demo.md), 13 of the 35, so that a
# fresh 2-core machine finishes in under 20 minutes (all 35 take about 35). `--cases all` runs them all.
CORE_CASES = (
    "active-emea-fy27q1",  # the governed definition of "active" (the article's question)
    "active-emea-last-quarter",  # "last quarter" on a fiscal calendar
    "active-mgr-apac-own",  # "my region": the caller's identity decides the answer
    "backlog-now",  # a KPI whose definition spans three statuses
    "stuck-orders",  # a business word (stuck = ON_HOLD) that is no column name
    "paid-orders-count",  # counting a paged listing
    "orders-july",  # an explicit date window
    "win-rate-90d",  # a metric computed on close dates
    "open-pipeline-last-night",  # a nightly snapshot: freshness
    "tickets-by-crm-id",  # an id from another system (CRM id -> canonical id)
    "mgr-emea-asks-amer-customers",  # another region's rows: row policy
    "support-email-masked",  # a masked column
    "tax-id-restricted",  # a restricted column: the right answer declines
)


def select_cases(lines: Sequence[str], spec: str) -> list[str]:
    """The case lines to run: ``core`` (:data:`CORE_CASES`), ``all``, a count N (spread evenly
    over the file, in file order), or comma-separated case ids (in file order). A spec that
    selects nothing is an error."""
    spec = spec.strip()
    if spec in ("", "all"):
        return list(lines)
    if spec == "core":
        spec = ",".join(CORE_CASES)
    if spec.isdigit():
        n = int(spec)
        if n <= 0:
            raise ProofError("--cases N needs N >= 1.")
        if n >= len(lines):
            return list(lines)
        picks = sorted({(i * len(lines)) // n for i in range(n)})
        return [lines[i] for i in picks]
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    by_id = {json.loads(line)["case_id"]: line for line in lines}
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise ProofError(f"--cases names unknown case ids: {', '.join(missing)}.")
    return [line for line in lines if json.loads(line)["case_id"] in set(wanted)]


def next_run_dir(runs: Path) -> Path:
    numbers = [int(p.name) for p in runs.glob("*") if p.is_dir() and p.name.isdigit()]
    return runs / str(max(numbers, default=0) + 1)


def remember(fetched: bool, fetch_s: float, built: bool, build_s: float,
             args: str | None = None) -> dict[str, Any]:
    """Fetch and build times are measured only when they happen: keep them in the cache."""
    f = CACHE / "timings.json"
    known: dict[str, Any] = json.loads(f.read_text()) if f.is_file() else {}
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if fetched:
        known["model_fetch"] = {"seconds": round(fetch_s, 1), "at": now}
    if built:
        known["wheel_build"] = {"seconds": round(build_s, 1), "at": now,
                                "cmake_args": args or llama.cmake_args()}
    f.write_text(json.dumps(known, indent=2) + "\n")
    return known


class Pipeline:
    def __init__(self, out: Path, cases_spec: str, doc: Path, threads: int,
                 configs: Sequence[Config], make_started: float | None = None,
                 warehouse: str = "demo", distractors: int = 0):
        self.out, self.cases_spec, self.doc, self.threads = out.resolve(), cases_spec, doc, threads
        self.warehouse = WAREHOUSES[warehouse]
        self.today = warehouse_today(warehouse)
        self.make_started = make_started
        self.configs = list(configs)
        self.distractors = distractors
        self.run_dir = next_run_dir(self.out / "runs")
        self.started = time.perf_counter()
        commit, dirty = git_state(ROOT)
        self.record: dict[str, Any] = {
            "format": 1, "run": int(self.run_dir.name), "status": "running",
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            # provenance (module docstring); the rest is filled in as the run learns it
            "commit": commit, "dirty": dirty, "tether_version": tether.__version__,
            "warehouse": self.warehouse.key, "distractors": distractors,
            "cases_sha256": None, "model_sha256": None, "agent_options": None,
            "host": {"cpus": os.cpu_count(), "load_average_at_start": list(os.getloadavg())},
            "agent": {"name": "openai",
                      "options": options_dict("BASE_URL", self.today),
                      "max_turns": MAX_TURNS, "concurrency": 1, "case_timeout_s": CASE_TIMEOUT_S},
            "steps": {}, "configs": {}, "commands": []}

    # --- bookkeeping

    def say(self, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        print(f"[proof {elapsed:7.1f}s] {message}", flush=True)

    def save(self) -> None:
        self.record["total_s"] = round(time.perf_counter() - self.started, 1)
        if self.make_started is not None:  # `make proof`: its own venv step counts too
            self.record["make_s"] = round(time.time() - self.make_started, 1)
        (self.run_dir / PROOF_JSON).write_text(json.dumps(self.record, indent=2) + "\n")

    def step(self, name: str, seconds: float, **extra: Any) -> None:
        self.record["steps"][name] = {"seconds": round(seconds, 1), **extra}
        self.save()

    def command(self, cmd: Sequence[str], shown: str | None = None) -> None:
        self.record["commands"].append(shown or shlex.join(cmd))

    def run(self, cmd: Sequence[str], *, ok: Sequence[int] = (0,), quiet: bool = False,
            env: dict[str, str] | None = None, record: bool = True) -> subprocess.CompletedProcess[str]:
        if record:
            self.command(cmd)
        done = subprocess.run(list(cmd), env=env, text=True, cwd=ROOT,
                              stdout=subprocess.PIPE if quiet else None)
        if done.returncode not in ok:
            raise ProofError(f"`{shlex.join(cmd)}` exited {done.returncode}.")
        return done

    # --- the steps

    def prepare(self) -> tuple[Path, Path]:
        self.run_dir.mkdir(parents=True)
        logs = self.run_dir / "logs"
        logs.mkdir()
        self.save()
        self.say(f"run folder {self.run_dir}")
        self.say(f"model: fetch (cached under {CACHE}) and verify sha256")
        model = ensure_model(CACHE, logs / "model-fetch.log")
        self.record["model"] = {"file": model.path.name, "size": model.size, "sha256": model.sha256,
                                "fetched": model.fetched}
        self.record["model_sha256"] = model.sha256
        self.step("model", model.seconds, fetched=model.fetched)
        remember(model.fetched, model.seconds, False, 0.0)
        return model.path, self.server_venv(llama.cmake_args())

    def server_venv(self, args: str) -> Path:
        """The wheel for these CPU settings (cached, else built) and its venv."""
        logs = self.run_dir / "logs"
        self.say(f"llama-cpp-python {llama.LLAMA_VERSION}: wheel (cached, else built: minutes); "
                 f"CMAKE_ARGS={args}")
        wheel = llama.ensure_wheel(CACHE, logs / "wheel-build.log", args)
        self.step("wheel", wheel.seconds, built=wheel.built, file=wheel.path.name)
        venv = llama.ensure_server_venv(CACHE, wheel.path, logs / "server-venv.log")
        self.step("server_venv", venv.seconds, built=venv.built)
        self.record["llama"] = {"version": llama.LLAMA_VERSION, "cmake_args": args,
                                "wheel": wheel.path.name}
        self.record["cache_timings"] = remember(False, 0.0, wheel.built, wheel.seconds, args)
        return venv.path

    def demo(self) -> Path:
        t0 = time.perf_counter()
        if self.warehouse.key in ("demo", "writes"):
            self.say(f"demo: tether demo init {self.out} --scale {SCALE}; tether build")
            self.run([TETHER, "demo", "init", str(self.out), "--scale", SCALE, "--force"],
                     quiet=True)
            if self.distractors:
                self.say(f"distractors: {self.distractors} generated products added")
                distractors.add(self.out, self.distractors)
                self.command([str(BIN / "python"), "-c", "from pathlib import Path; from proof "
                              f"import distractors; distractors.add(Path('{self.out}'), "
                              f"{self.distractors})"])
        elif self.warehouse.key == "lahman":  # the starter, as a new user gets it
            self.say(f"lahman: tests/zoo load_duckdb; tether init {self.out}; tether build")
            self._fresh_out()
            db = self.out / "lahman.duckdb"
            _zoo().load_duckdb("lahman", db, self.out / "files")
            self.command([str(BIN / "python"), "-c", "import sys; sys.path.insert(0, 'tests'); "
                          f"import zoo; zoo.load_duckdb('lahman', '{db}', '{self.out}/files')"])
            self.run([TETHER, "init", str(self.out), "--source", f"duckdb:///{db}", "--user",
                      ZOO_USER, "--force"], quiet=True)
            # the one line added to the starter: a tool-list budget that holds every product's
            # own tool, for the grounded configuration (discovery serves none of them)
            with (self.out / "tether.yaml").open("a") as f:
                f.write(f"\nserve:\n  tool_list_token_budget: {ZOO_BUDGET}\n")
            self.command(["sh", "-c", f"printf '\\nserve:\\n  tool_list_token_budget: "
                          f"{ZOO_BUDGET}\\n' >> {self.out}/tether.yaml"])
            (self.out / "cases.jsonl").write_text("".join(
                json.dumps(c) + "\n" for c in zoo_cases("lahman")))
        else:  # generated in this process, as the tests build it; recorded as a command
            self.say(f"second warehouse: tests/warehouse2 build_second({self.out}); tether build")
            self._fresh_out()
            _second().build_second(self.out, scale=float(SECOND_SCALE))
            self.command([str(BIN / "python"), "-c", "import sys; sys.path.insert(0, 'tests'); "
                          f"import warehouse2; warehouse2.build_second('{self.out}', "
                          f"scale={SECOND_SCALE})"])
        self.run([TETHER, "build", "--project", str(self.out)], quiet=True)
        file = "cases.jsonl"
        if self.warehouse.writes:
            self.run([TETHER, "demo", "cases", "--writes", "--project", str(self.out)],
                     quiet=True)
            file = "write-cases.jsonl"
        lines = [ln for ln in (self.out / file).read_text().splitlines() if ln.strip()]
        spec = self.cases_spec  # core is the demo's selection; the second runs all of its own
        chosen = select_cases(lines, "all" if spec == "core" and self.warehouse.key != "demo"
                              else spec)
        cases = self.out / file
        if len(chosen) != len(lines):
            cases = self.run_dir / "cases.jsonl"
            cases.write_text("\n".join(chosen) + "\n")
        self.record["cases"] = {"selection": self.cases_spec or "core", "count": len(chosen),
                                "of": len(lines), "file": os.path.relpath(cases, ROOT),
                                "ids": [json.loads(c)["case_id"] for c in chosen]}
        self.record["cases_sha256"] = sha256_file(cases)
        self.step("demo", time.perf_counter() - t0)
        return cases

    def _fresh_out(self) -> None:
        """A fresh project each run; the runs are kept."""
        self.out.mkdir(parents=True, exist_ok=True)
        for stale in self.out.iterdir():
            if stale.name == "runs":
                continue
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()

    def start_server(self, model: Path, venv: Path) -> llama.Server:
        port = llama.free_port()
        cmd = llama.server_command(str(venv / "bin" / "python"), model, port, self.threads,
                                   n_ctx=self.warehouse.n_ctx,
                                   alias=MODEL_NAME) + server_flags(self.threads)
        server = llama.Server(cmd, port, self.run_dir / "logs" / "llama-server.log")
        self.record["llama"]["server_command"] = shlex.join(cmd)
        self.say(f"llama.cpp server on 127.0.0.1:{port} ({self.threads} threads, "
                 f"n_ctx {self.warehouse.n_ctx})")
        server.start()
        if self.record.get("agent_options") is None:  # what every eval run is given (see eval_command)
            self.record["agent_options"] = options_dict(server.base_url, self.today)
        self.step("server_start", server.ready_s)
        self.command(cmd, shlex.join(cmd) + " &")
        return server

    def start_server_or_portable(self, model: Path, venv: Path) -> tuple[llama.Server, Path]:
        """The server; a wheel that dies on this CPU is replaced once by the portable build."""
        try:
            return self.start_server(model, venv), venv
        except llama.FirstCompletionError as e:
            args = self.record["llama"]["cmake_args"]
            if "PROOF_CMAKE_ARGS" in os.environ or args == llama.PORTABLE:
                raise
            self.say(f"{e} Building the portable wheel instead.")
            venv = self.server_venv(llama.PORTABLE)  # rewrites record["llama"]
            self.record["llama"]["failed_cmake_args"] = args
            return self.start_server(model, venv), venv

    def served(self, cfg: Config) -> Path:
        """The project a configuration serves: the run's own, or for writes a copy of it (its
        warehouse, registry and keys), so every configuration starts from the same data and
        the labels read the original."""
        if not self.warehouse.writes:
            return self.out
        d = self.run_dir / "served" / cfg.key
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for name in ("tether.yaml", "warehouse.duckdb"):
            shutil.copy2(self.out / name, d / name)
        shutil.copytree(self.out / ".tether", d / ".tether")
        self.command(["sh", "-c", f"mkdir -p {d} && cp -r {self.out}/tether.yaml "
                      f"{self.out}/warehouse.duckdb {self.out}/.tether {d}/"])
        return d

    def target(self, cfg: Config) -> tuple[str, str | None]:
        if cfg.kind == "tether":
            serve = cfg.serve
            if self.warehouse.dedicated_all and cfg.key == "grounded":
                serve = (*serve, "--dedicated-tools", "all")
            return tether_target(self.served(cfg), serve), None
        cmd = [str(BIN / "python"), "-m", "tether.demo.thirdparty", cfg.key, str(self.out)]
        done = self.run(cmd, quiet=True)
        self.record["commands"][-1] = f"MD=$({shlex.join(cmd)})"
        return "stdio:" + done.stdout.strip(), "none"

    def run_config(self, cfg: Config, cases: Path, server: llama.Server, model: Path,
                   venv: Path) -> llama.Server:
        t0 = time.perf_counter()
        target, via = self.target(cfg)
        out = self.run_dir / cfg.key
        cmd = eval_command(target, cases, out, server.base_url, via, self.today, cfg.agent,
                           cfg.server if cfg.agent else None)
        self.say(f"{cfg.server}: tether eval run ({self.record['cases']['count']} cases)")
        shown = shlex.join(cmd)
        if cfg.kind == "thirdparty":
            shown = shown.replace(shlex.quote(target), '"stdio:$MD"')
        self.command(cmd, shown)
        restarts = 0
        done = self.run(cmd, ok=(0, 1), record=False)
        while not server.alive() and restarts < 1:  # a crashed server: restart, resume the run
            restarts += 1
            self.say(f"the llama.cpp server died during {cfg.server}: restarting, resuming")
            server = self.start_server(model, venv)
            cmd = eval_command(target, cases, out, server.base_url, via, self.today, cfg.agent,
                               cfg.server if cfg.agent else None)
            done = self.run(cmd, ok=(0, 1), record=False)
        run_s = time.perf_counter() - t0
        index = json.loads((out / "index.json").read_text())
        errors = [e["case_id"] for e in index["entries"] if e["status"] == "error"]
        t1 = time.perf_counter()
        self.run([TETHER, "eval", "label", str(out), "--project", str(self.out), "--json"],
                 quiet=True)
        self.record["configs"][cfg.key] = {
            "server": cfg.server, "run_s": round(run_s, 1),
            "label_s": round(time.perf_counter() - t1, 1), "exit": done.returncode,
            "errors": errors, "server_restarts": restarts}
        if cfg.agent:
            self.record["configs"][cfg.key]["agent_options"] = list(cfg.agent)
        if "ask_again=true" in cfg.agent:  # the same traces labelled with the first answer
            self.record["configs"][cfg.key]["second_turn"] = second_turn.measure(
                out, self.out, TETHER)
        if server.base_url != self.record["agent_options"].get("base_url"):  # after a restart
            self.record["configs"][cfg.key]["base_url"] = server.base_url
        self.save()
        return server

    def report(self) -> None:
        t0 = time.perf_counter()
        dirs = [str(self.run_dir / c.key) for c in self.configs]
        self.run([TETHER, "eval", "report", *dirs, "--out", str(self.run_dir)])
        self.step("report", time.perf_counter() - t0)

    def relabel_check(self) -> None:
        """Label and report again from copies of the traces alone; the numbers must match."""
        t0 = time.perf_counter()
        scratch = self.run_dir / ".relabel"
        shutil.rmtree(scratch, ignore_errors=True)
        dirs = []
        for c in self.configs:
            d = scratch / c.key
            shutil.copytree(self.run_dir / c.key / "traces", d / "traces")
            shutil.copy2(self.run_dir / c.key / "index.json", d / "index.json")
            self.run([TETHER, "eval", "label", str(d), "--project", str(self.out), "--json"],
                     quiet=True, record=False)
            dirs.append(str(d))
        self.run([TETHER, "eval", "report", *dirs, "--out", str(scratch), "--json"], quiet=True,
                 record=False)
        differences = compare_reports(self.run_dir, scratch, [c.key for c in self.configs])
        self.record["relabel_check"] = {"ok": not differences, "differences": differences[:20]}
        shutil.rmtree(scratch, ignore_errors=True)
        self.step("relabel_check", time.perf_counter() - t0)
        if differences:
            self.say("relabel check FAILED: " + "; ".join(differences[:5]))
        else:
            self.say("relabel check: labels and report reproduced from the traces alone")

    def main(self) -> int:
        try:
            return self._main()
        except BaseException as e:
            if self.run_dir.is_dir():
                self.record["status"] = "failed"
                self.record["error"] = f"{type(e).__name__}: {e}"
                self.save()
            raise

    def _main(self) -> int:
        model, venv = self.prepare()
        cases = self.demo()
        server, venv = self.start_server_or_portable(model, venv)
        t0 = time.perf_counter()
        try:
            for cfg in self.configs:
                server = self.run_config(cfg, cases, server, model, venv)
        finally:
            server.stop()
        self.step("configs", time.perf_counter() - t0)
        self.report()
        self.relabel_check()
        self.record["status"] = "complete"
        self.record["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self.save()
        render_doc(self.doc, latest_runs(self.out / "runs"), ROOT)
        self.say(f"wrote {self.doc} (total {self.record['total_s']:.0f}s)")
        return 0 if self.record["relabel_check"]["ok"] else 1


def prepare_only() -> int:
    """Fill the cache (model, wheel, venv) and record how long each took; no run folder."""
    logs = CACHE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    args = llama.cmake_args()
    m = ensure_model(CACHE, logs / "model-fetch.log")
    w = llama.ensure_wheel(CACHE, logs / "wheel-build.log", args)
    v = llama.ensure_server_venv(CACHE, w.path, logs / "server-venv.log")
    remember(m.fetched, m.seconds, w.built, w.seconds, args)
    for what, done in (("model", m), ("wheel", w), ("server venv", v)):
        state = "made" if getattr(done, "fetched", getattr(done, "built", False)) else "cached"
        print(f"{what}: {done.path} ({state}, {done.seconds:.0f}s)")
    return 0


def _terminated(signum: int, _frame: object) -> None:
    # SIGTERM (make interrupted, a CI timeout) unwinds like Ctrl-C: the server is stopped and the
    # run folder says it did not finish, instead of an orphaned server and a run "running" forever
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    p = argparse.ArgumentParser(prog="python -m proof.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=os.environ.get("PROOF_CASES", "core"),
                   help="core (default: one case per trap, 13), all (35), a count N spread over "
                   "the case file, or case ids a,b,c")
    p.add_argument("--warehouse", choices=sorted(WAREHOUSES),
                   default=os.environ.get("PROOF_WAREHOUSE", "demo"),
                   help="demo (default), second (the tests' second warehouse, another domain), "
                   "lahman (a public dataset's starter project, tests/zoo) or writes (the "
                   "demo's write cases, each configuration on its own copy)")
    p.add_argument("--out", type=Path, default=None,
                   help="default demo-out/proof (the second warehouse: demo-out/proof-second)")
    p.add_argument("--doc", type=Path, default=None,
                   help="default docs/proof.md (the second warehouse: docs/proof-second.md)")
    p.add_argument("--threads", type=int, default=int(os.environ.get("PROOF_THREADS", "2")))
    p.add_argument("--configs", default=None,
                   help="comma-separated subset of generic,bare,grounded,discovery,motherduck,"
                   "sqlite,grounded-again (grounded with the agent's ask_again option, labelled "
                   "both ways: proof/second_turn.py); default: the warehouse's (writes: "
                   "grounded,sqlite)")
    p.add_argument("--make-started", type=float, default=None,
                   help="when `make proof` started (Unix seconds): the record then also holds "
                   "the time from there, its venv step included")
    p.add_argument("--distractors", type=int, default=0,
                   help="add N generated products no question needs to the demo before it is "
                   "built (proof/distractors.py), to measure discovery over a larger catalog")
    p.add_argument("--render-only", action="store_true",
                   help="only rewrite the doc from the runs already in OUT/runs")
    p.add_argument("--prepare-only", action="store_true",
                   help="only fetch the model and build the wheel and venv into the cache")
    a = p.parse_args(argv)
    where = WAREHOUSES[a.warehouse]
    a.out = a.out or ROOT / "demo-out" / where.out
    a.doc = a.doc or ROOT / "docs" / where.doc
    try:
        if a.render_only:
            render_doc(a.doc, latest_runs(a.out.resolve() / "runs"), ROOT)
            print(f"wrote {a.doc}")
            return 0
        if a.prepare_only:
            return prepare_only()
        keys = [k.strip() for k in (a.configs or where.configs).split(",") if k.strip()]
        unknown = sorted(set(keys) - {c.key for c in CONFIGS})
        if unknown:
            raise ProofError(f"unknown configuration {unknown[0]!r}.")
        configs = [c for c in CONFIGS if c.key in keys]
        if a.distractors and a.warehouse != "demo":
            raise ProofError("--distractors adds products to the demo warehouse only.")
        return Pipeline(a.out, a.cases, a.doc, a.threads, configs, a.make_started,
                        a.warehouse, a.distractors).main()
    except ProofError as e:
        print(f"make proof: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
