"""The embedded server's llama.cpp build: portable by what the library itself reports, and the
start-up check that refuses a build this CPU cannot run or a build for one host's CPU."""

from __future__ import annotations

import pytest

from autoenvscaling.training.serving import cpu_support
from autoenvscaling.training.serving.cpu_support import (
    ALLOW_NATIVE_ENV,
    UnsupportedCpuError,
    assess,
    cpu_flags,
    library_features,
)

#: llama.cpp's system-info line of a native build on a host with AVX-512 and AMX (the shape the
#: crashing build printed), and of the project's portable build.
NATIVE = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
)
PORTABLE = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
AVX2_CPU = {"sse2", "pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2"}
AMX_CPU = AVX2_CPU | {"avx512f", "avx512vbmi", "avx512_vnni", "amx_int8", "amx_tile"}


def test_features_are_read_from_the_library_line():
    assert library_features(PORTABLE)[:4] == ["SSE3", "SSSE3", "AVX", "AVX2"]
    assert "AVX512" not in library_features(PORTABLE.replace("REPACK = 1", "AVX512 = 0"))


def test_a_native_build_is_refused_even_where_the_cpu_advertises_its_paths():
    support = assess(NATIVE, AMX_CPU)
    assert support.missing == []
    assert support.host_specific == ["AVX512", "AVX512_VBMI", "AVX512_VNNI", "AMX_INT8"]
    problem = support.problem()
    assert problem is not None and "AMX_INT8" in problem and "make setup" in problem
    assert ALLOW_NATIVE_ENV in problem
    assert support.problem(allow_native=True) is None


def test_a_build_using_what_the_cpu_lacks_is_refused_even_when_native_is_allowed():
    support = assess(NATIVE, AVX2_CPU)
    assert support.missing == ["AVX512", "AVX512_VBMI", "AVX512_VNNI", "AMX_INT8"]
    problem = support.problem(allow_native=True)
    assert problem is not None and "does not advertise" in problem


def test_the_portable_build_serves_on_any_avx2_cpu():
    for flags in (AVX2_CPU, AMX_CPU):
        support = assess(PORTABLE, flags)
        assert support.portable and support.problem() is None


def test_cpu_flags_read_this_machine(tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n\nprocessor\t: 1\n")
    assert cpu_flags(fake) == {"fpu", "sse2", "avx2", "avx512f"}
    assert cpu_flags(tmp_path / "missing") == set()


def test_the_installed_llama_cpp_is_the_portable_build():
    """Whatever CPU built it: the library reports AVX2 and none of one host's fast paths."""
    pytest.importorskip("llama_cpp", reason="the embedded extra is not installed")
    support = cpu_support.installed_support()
    assert "AVX2" in support.built_for, support.system_info
    assert support.host_specific == [], support.system_info
    assert support.missing == [], support.system_info
    assert cpu_support.check_cpu_support().portable


def test_the_check_refuses_a_native_build_at_start(monkeypatch):
    llama_cpp = pytest.importorskip("llama_cpp", reason="the embedded extra is not installed")
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: NATIVE.encode())
    monkeypatch.delenv(ALLOW_NATIVE_ENV, raising=False)
    # Refused on any machine: for AMX_INT8 this CPU lacks, or as a build for one host's CPU.
    with pytest.raises(UnsupportedCpuError, match="llama.cpp was built for .*make setup"):
        cpu_support.check_cpu_support()


def test_the_server_process_refuses_to_start_on_a_build_it_cannot_trust(monkeypatch, tmp_path):
    """The check runs in the server process before any model loads: its exit message is what
    the parent shows as the reason the server never became ready."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="the embedded extra is not installed")
    from autoenvscaling.training.serving import embedded_serve

    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: NATIVE.encode())
    monkeypatch.delenv(ALLOW_NATIVE_ENV, raising=False)
    config = tmp_path / "serve.json"
    config.write_text(
        embedded_serve.ServeConfig(model_path=tmp_path / "none.gguf").model_dump_json()
    )
    with pytest.raises(SystemExit) as stopped:
        embedded_serve.main([str(config)])
    assert str(stopped.value.code).startswith("embedded server: llama.cpp was built for")
