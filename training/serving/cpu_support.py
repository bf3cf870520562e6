"""What the llama.cpp library was built to use, held against what this CPU has.

A llama.cpp built with GGML_NATIVE bakes in the build host's instruction sets, and pip's wheel
cache hands that build to every later install. On a host that advertises AVX-512 and AMX such a
build segfaulted in `decode` on every multi-token prompt (issue 38), so the project builds for any
x86-64 CPU with AVX2 (the Makefile's LLAMA_CPU_ARGS) and checks at the server's start, from what
the library itself reports (`llama_print_system_info`), that it is that build and that this CPU
has every instruction set it uses. Not a list of CPU names: the library's own word and the
kernel's flags.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

#: llama.cpp's feature names -> the /proc/cpuinfo flag that says the CPU has it.
CPU_FLAG = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "AVX_VNNI": "avx_vnni",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
#: Fast paths a portable build leaves out: present only in a build for one host's CPU.
HOST_SPECIFIC = ("AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8")
#: Set to 1 to serve with a build for this host's CPU (a user's own native build, for speed).
ALLOW_NATIVE_ENV = "AUTOENVSCALING_ALLOW_NATIVE_LLAMA"
REBUILD = (
    "reinstall the embedded extra with the project's build flags: `make setup` (it builds "
    "llama-cpp-python for any AVX2 CPU into its own wheel folder, never from pip's cache)"
)


class UnsupportedCpuError(RuntimeError):
    """The installed llama.cpp build cannot be trusted on this CPU; the message says why and what to do."""


class CpuSupport(BaseModel):
    """The library's instruction sets and this CPU's, and what is wrong between them."""

    system_info: str = Field(description="llama_print_system_info(), as the library printed it.")
    built_for: list[str] = Field(description="Instruction sets the library reports as used.")
    missing: list[str] = Field(description="Used by the library, not advertised by this CPU.")
    host_specific: list[str] = Field(description="Fast paths of a build for one host's CPU.")

    @property
    def portable(self) -> bool:
        return not self.host_specific

    def problem(self, allow_native: bool = False) -> str | None:
        """Why this build must not serve here, or None."""
        if self.missing:
            return (
                f"llama.cpp was built for {', '.join(self.missing)}, which this CPU does not "
                f"advertise: it would crash on the first request; {REBUILD}"
            )
        if self.host_specific and not allow_native:
            return (
                f"llama.cpp was built for one host's CPU ({', '.join(self.host_specific)}): such a "
                "build segfaulted in decode on CPUs that advertise these paths; "
                f"{REBUILD}, or set {ALLOW_NATIVE_ENV}=1 to serve with it anyway"
            )
        return None


def library_features(system_info: str) -> list[str]:
    """The instruction sets a llama.cpp system-info line reports as on (`NAME = 1`)."""
    return [name for name, on in re.findall(r"([A-Z0-9_]+) = (\d+)", system_info) if on != "0"]


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The flags the kernel reports for this CPU (empty where it does not say)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return set()
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def assess(system_info: str, flags: set[str]) -> CpuSupport:
    """Hold what the library reports against `flags` (an x86 CPU's; elsewhere nothing is missing)."""
    used = [f for f in library_features(system_info) if f in CPU_FLAG]
    x86 = "sse2" in flags
    return CpuSupport(
        system_info=system_info.strip(),
        built_for=used,
        missing=[f for f in used if x86 and CPU_FLAG[f] not in flags],
        host_specific=[f for f in used if f in HOST_SPECIFIC],
    )


def installed_support() -> CpuSupport:
    """The installed llama-cpp-python's build against this machine's CPU."""
    import llama_cpp  # the embedded extra; imported here so the graph process never loads it

    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return assess(text, cpu_flags())


def check_cpu_support() -> CpuSupport:
    """`installed_support()`, raising UnsupportedCpuError where it must not serve here."""
    support = installed_support()
    problem = support.problem(allow_native=os.environ.get(ALLOW_NATIVE_ENV) == "1")
    if problem:
        raise UnsupportedCpuError(f"{problem}\n(library: {support.system_info})")
    return support
