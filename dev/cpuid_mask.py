"""Hide AVX-512, VNNI and AMX from CPUID, to measure an AVX2-only CPU on a newer one.

ONNX Runtime and numpy choose their kernels from CPUID when they load. The preload
library compiled from ``x86_64_v3.c`` (beside this file) answers CPUID as an
x86-64-v3 CPU would, so a child process started with :func:`isa_environment`
runs the AVX2/FMA3 kernels. It needs Linux and a CPU or hypervisor with CPUID
faulting (``cpuid_fault`` in /proc/cpuinfo). ``python -m dev.bench_cpu --isa
x86-64-v3`` and ``python3 -m dev.cold_book --mask x86-64-v3`` use it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from fhs.core.errors import InputError
from fhs.run.cpu_info import MASKED_ENV, cpu_flags

ISAS = ("native", "x86-64-v3")
SOURCE = Path(__file__).with_name("x86_64_v3.c")


def can_mask() -> bool:
    """Whether CPUID can be masked here (Linux, and a CPU or hypervisor with CPUID faulting)."""
    return "cpuid_fault" in cpu_flags()


def x86_64_v3_library(cache: Path) -> Path:
    """The CPUID-masking preload library, compiled once into ``cache`` with the system's C compiler."""
    source = SOURCE.read_bytes()
    target = cache / f"x86_64_v3-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if target.is_file():
        return target
    if not can_mask():
        raise InputError("this CPU (or its hypervisor) has no CPUID faulting, so CPUID cannot be masked",
                         field="isa", fix="measure with --isa native here, or on a machine whose /proc/cpuinfo "
                                          "lists cpuid_fault")
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise InputError("--isa x86-64-v3 needs a C compiler to build its preload library", field="isa",
                         fix="install one (e.g. apt-get install gcc) or set CC")
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / "x86_64_v3.c"
    src.write_bytes(source)
    scratch = target.with_suffix(f".{os.getpid()}.tmp")
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(scratch), str(src)], check=True)
    os.replace(scratch, target)
    return target


def isa_environment(isa: str, cache: Path) -> dict[str, str]:
    """Environment for a child process that runs with ``isa``'s kernels."""
    env = dict(os.environ)
    env.pop(MASKED_ENV, None)
    if isa == "x86-64-v3":
        env["LD_PRELOAD"] = str(x86_64_v3_library(cache))
    elif isa != "native":
        raise InputError(f"unknown instruction-set level {isa!r}", field="isa", fix=f"one of {', '.join(ISAS)}")
    return env


if __name__ == "__main__":  # the library's path, for LD_PRELOAD=$(python -m dev.cpuid_mask) make book
    print(x86_64_v3_library(Path.home() / ".cache" / "fhs"))
