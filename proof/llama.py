"""llama-cpp-python's OpenAI-compatible server: the wheel (built once, cached), its venv, and the
server process on loopback.

``llama-cpp-python`` 0.3.36 is published as source only, and its default build compiles for the
build machine's own CPU (``GGML_NATIVE``), which died with "Illegal instruction" at the first
request on a machine this was measured on. The wheel is built instead for the CPU features
``/proc/cpuinfo`` names (:func:`cmake_args`: AVX-512 where the CPU has it, about 1.35x faster
prompt reading than AVX2 here, else AVX2, else plain), without the multimodal library the server
never loads. ``$PROOF_CMAKE_ARGS`` overrides the choice. Wheels are cached under a key of the
version and those arguments, so another CPU or setting builds its own wheel instead of reusing a
wrong one; a wheel whose first completion fails is replaced by the :data:`PORTABLE` build.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from proof.model import ProofError

LLAMA_VERSION = "0.3.36"
COMMON = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
PORTABLE = (f"{COMMON} -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
            "-DGGML_AVX512=OFF")
AVX512_BASE = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})
AVX512_EXTRAS = (("avx512vbmi", "GGML_AVX512_VBMI"), ("avx512_vnni", "GGML_AVX512_VNNI"),
                 ("avx512_bf16", "GGML_AVX512_BF16"))
# Plain ChatML: the agent's constrained loop (proof/run.py) sends no `tools`, so the function-
# calling handler (which drops tool descriptions from the prompt) is not needed.
CHAT_FORMAT = "chatml"
N_CTX = 8192
LAUNCHER = Path(__file__).with_name("llama_launch.py")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first CPU's feature flags (empty where there is no /proc/cpuinfo)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cmake_args(flags: frozenset[str] | None = None) -> str:
    """The build's CPU settings: ``$PROOF_CMAKE_ARGS``, else the best this CPU's flags allow."""
    if "PROOF_CMAKE_ARGS" in os.environ:
        return os.environ["PROOF_CMAKE_ARGS"]
    flags = cpu_flags() if flags is None else flags
    if not {"avx2", "fma", "f16c"} <= flags:
        avx = "ON" if "avx" in flags else "OFF"
        return (f"{COMMON} -DGGML_AVX={avx} -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF "
                "-DGGML_AVX512=OFF")
    if not flags >= AVX512_BASE:
        return PORTABLE
    extras = " ".join(f"-D{opt}={'ON' if flag in flags else 'OFF'}" for flag, opt in AVX512_EXTRAS)
    return PORTABLE.replace("-DGGML_AVX512=OFF", "-DGGML_AVX512=ON") + " " + extras


def build_key(version: str = LLAMA_VERSION, args: str | None = None) -> str:
    """The cache key of a built wheel: the version and the build's CPU settings."""
    args = cmake_args() if args is None else args
    return hashlib.sha256(f"llama-cpp-python=={version} {args}".encode()).hexdigest()[:12]


def wheel_command(python: str, dest: Path, version: str = LLAMA_VERSION) -> list[str]:
    """``pip wheel`` of the source release, no dependencies (they install from PyPI afterwards)."""
    # --no-cache-dir: pip's own wheel cache is keyed by the source, not by CMAKE_ARGS, and would
    # hand back a wheel built earlier with other CPU settings (seen here: a native build)
    return [python, "-m", "pip", "wheel", "--no-deps", "--no-binary", "llama-cpp-python",
            "--no-cache-dir", "--disable-pip-version-check", "-w", str(dest),
            f"llama-cpp-python=={version}"]


def wheel_env(args: str | None = None, jobs: int = 2) -> dict[str, str]:
    return {**os.environ, "CMAKE_ARGS": cmake_args() if args is None else args,
            "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)}


def server_command(python: str, model: Path, port: int, threads: int = 2, n_ctx: int = N_CTX,
                   alias: str | None = None, chat_format: str = CHAT_FORMAT) -> list[str]:
    """The server's command line: llama_cpp.server (through the grammar-fixing launcher)."""
    cmd = [python, str(LAUNCHER), "--model", str(model), "--chat_format", chat_format,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
           "--n_threads", str(threads)]
    if alias:
        cmd += ["--model_alias", alias]
    return cmd


class FirstCompletionError(ProofError):
    """The server started but died or failed on its first token: a wheel built for another CPU."""


@dataclass(frozen=True)
class Built:
    path: Path
    built: bool  # built by this run (False: reused from the cache)
    seconds: float


def _run(cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise ProofError(f"{what} failed (exit {done.returncode}); see {log}.")


def ensure_wheel(cache: Path, log: Path, args: str | None = None) -> Built:
    """The built llama-cpp-python wheel for these CPU settings, building it once (minutes)."""
    started = time.perf_counter()
    args = cmake_args() if args is None else args
    folder = cache / "wheels" / build_key(args=args)
    found = sorted(folder.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    if found:
        return Built(found[0], False, time.perf_counter() - started)
    folder.mkdir(parents=True, exist_ok=True)
    builder = cache / "build-venv"
    if not (builder / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", "--clear", str(builder)], log, "making the build venv")
    _run(wheel_command(str(builder / "bin" / "python"), folder), log,
         f"building llama-cpp-python=={LLAMA_VERSION} (needs cmake-able C/C++ compilers)",
         env=wheel_env(args))
    found = sorted(folder.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    if not found:
        raise ProofError(f"pip wheel wrote no llama_cpp_python wheel into {folder}; see {log}.")
    return Built(found[0], True, time.perf_counter() - started)


def ensure_server_venv(cache: Path, wheel: Path, log: Path) -> Built:
    """A venv with the wheel and the server's dependencies, made once per wheel."""
    started = time.perf_counter()
    stamp = hashlib.sha256(wheel.read_bytes()).hexdigest()
    venv = cache / f"venv-{wheel.parent.name}"
    ok = venv / ".ok"
    if ok.is_file() and ok.read_text().strip() == stamp:
        return Built(venv, False, time.perf_counter() - started)
    _run([sys.executable, "-m", "venv", "--clear", str(venv)], log, "making the server venv")
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
          f"{wheel}[server]"], log, "installing llama-cpp-python[server]")
    ok.write_text(stamp + "\n")
    return Built(venv, True, time.perf_counter() - started)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, object], timeout: float) -> dict[str, object]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data: dict[str, object] = json.loads(r.read())
        return data


class Server:
    """The llama.cpp server as a child process; ``with Server(...) as s: s.base_url``."""

    def __init__(self, cmd: list[str], port: int, log: Path, env: dict[str, str] | None = None):
        self.cmd, self.port, self.log, self.env = cmd, port, log, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, wait_s: float = 300.0) -> None:
        started = time.perf_counter()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True)
        deadline = started + wait_s
        while True:
            if not self.alive():
                code = self.proc.returncode
                # SIGILL while loading (weights are repacked with the build's SIMD code)
                kind = FirstCompletionError if code in (-4, 132) else ProofError
                raise kind(f"the llama.cpp server exited (code {code}) while starting; see "
                           f"{self.log}.")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.perf_counter() > deadline:
                self.stop()
                raise ProofError(f"the llama.cpp server did not answer in {wait_s:.0f}s; see {self.log}.")
            time.sleep(0.5)
        # one real token: a build for the wrong CPU dies here ("Illegal instruction"), not mid-run
        try:
            _post(f"{self.base_url}/completions", {"prompt": "1+1=", "max_tokens": 1,
                                                   "temperature": 0}, timeout=wait_s)
        except (urllib.error.URLError, OSError) as e:
            code = self.proc.poll() if self.proc else None
            self.stop()
            raise FirstCompletionError(
                f"the llama.cpp server failed its first completion ({e}; exit code {code}); see "
                f"{self.log}. A wheel built for another CPU dies here: set PROOF_CMAKE_ARGS (see "
                f"proof/llama.py) and rerun.") from None
        self.ready_s = time.perf_counter() - started

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
