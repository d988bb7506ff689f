"""Which CPU ran this, and which of its instruction sets the kernels could use.

ONNX Runtime (the dense encoder), numpy and the Rust tokenizers choose their kernels
from CPUID when they load; llama.cpp is compiled for one set (the Makefile's portable
build: AVX2, FMA, F16C). The book's provenance page records :func:`cpu_record`. The
developers' tools that hide AVX-512 from CPUID or slow the CPU down (``dev/cpuid_mask.py``,
``dev/slow_cpu.py``) set the environment variables named here, so the record says so.
"""

from __future__ import annotations

import importlib
import os
import platform
from pathlib import Path

# The /proc/cpuinfo flags that decide which kernels ONNX Runtime's MLAS and ggml can run.
KERNEL_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
MASKED_ENV = "FHS_CPUID_MASKED"  # set by dev/x86_64_v3.c (preloaded) in a process whose CPUID it masks
SLOWDOWN_ENV = "FHS_SLOWDOWN"  # set by dev/slow_cpu.py for a command it runs as on a slower CPU


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields from /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return fields
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def cpu_flags() -> set[str]:
    """The first processor's flags from /proc/cpuinfo (empty where there is none)."""
    return set(_cpuinfo().get("flags", "").split())


def process_simd() -> list[str]:
    """The SIMD extensions numpy's dispatcher found in this process (what CPUID told it)."""
    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # numpy 2, numpy 1
        try:
            features = importlib.import_module(module).__cpu_features__
        except (ImportError, AttributeError):
            continue
        return [name for name, present in features.items() if present]
    return []


def level(flags: set[str]) -> str:
    """The x86-64 microarchitecture level the flags reach (v4 = AVX-512 F/BW/DQ/VL/CD)."""
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= flags:
        return "x86-64-v4"
    if {"avx2", "fma", "f16c", "bmi2", "movbe"} <= flags:
        return "x86-64-v3"
    if {"sse4_2", "popcnt", "ssse3"} <= flags:
        return "x86-64-v2"
    return platform.machine() or "unknown"


def encoder_kernel(simd: set[str] | None = None) -> str:
    """The fp32 GEMM kernel MLAS runs the dense encoder with here: AVX512F, FMA3 (AVX2) or "AVX or SSE".

    Vectors agree within a kernel family and differ at float rounding across families."""
    simd = set(process_simd()) if simd is None else simd
    return "AVX512F" if "AVX512F" in simd else "FMA3" if {"AVX2", "FMA3"} <= simd else "AVX or SSE"


def mlas_kernels(simd: set[str]) -> str:
    """The GEMM kernels ONNX Runtime's MLAS picks for what CPUID reports (its platform.cpp order).

    The dense encoder's model stores int8 weights but multiplies in fp32 (the runtime folds
    the dequantisation into fp32 weights at load), so the fp32 kernel is the one that runs."""
    fp32 = encoder_kernel(simd)
    if {"AVX512BW", "AVX512DQ", "AVX512VL"} <= simd:
        int8 = "AVX512-VNNI" if "AVX512VNNI" in simd else "AVX512-core"
    else:
        int8 = "AVX2" if "AVX2" in simd else "SSE"
    return f"fp32 GEMM {fp32} (the encoder's), int8 GEMM {int8}"


def cpu_limit(cgroup_text: str | None = None, root: Path = Path("/sys/fs/cgroup")) -> str:
    """The CPU-time quota a cgroup puts on this process, in cores ("none" where none is set).

    A container started with, say, ``--cpus 1.5`` builds the book on less than its cores;
    the provenance page says so. The tightest quota from this process's cgroup up applies."""
    try:
        text = cgroup_text if cgroup_text is not None else Path("/proc/self/cgroup").read_text()
    except OSError:
        return "none"
    limits: list[float] = []
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers and "cpu" not in controllers.split(","):
            continue
        mount: Path | None = root  # cgroup v2; v1 mounts the cpu controller on its own
        if controllers:
            mount = next((root / n for n in ("cpu", "cpu,cpuacct", "cpuacct,cpu") if (root / n).is_dir()), None)
        if mount is None:
            continue
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            group = mount.joinpath(*parts[:depth])
            try:
                if controllers:
                    quota = int((group / "cpu.cfs_quota_us").read_text())
                    period = int((group / "cpu.cfs_period_us").read_text())
                else:
                    first, _, second = (group / "cpu.max").read_text().partition(" ")
                    quota, period = (-1 if first == "max" else int(first)), int(second)
            except (OSError, ValueError):
                continue
            if quota > 0 and period > 0:
                limits.append(quota / period)
    return f"{min(limits):.2f} cores (cgroup CPU quota)" if limits else "none"


def cpu_record() -> dict[str, str]:
    """Model name, x86-64 level, the kernel-relevant flags, cores, and the kernels this process gets."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    seen = set(process_simd())
    masked = bool(os.environ.get(MASKED_ENV))
    return {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "vendor": info.get("vendor_id", ""),
        "family / model / stepping": "/".join(info.get(k, "?") for k in ("cpu family", "model", "stepping")),
        "x86-64 level": level(flags),
        "kernel flags": " ".join(f for f in KERNEL_FLAGS if f in flags) or "(none read)",
        "hypervisor": "yes" if "hypervisor" in flags else "no",
        "cores (this process may use)": str(
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        ),
        "CPU time limit": cpu_limit(),
        "slowed down (dev/slow_cpu.py)": os.environ.get(SLOWDOWN_ENV) or "no",
        "CPUID in this process": "AVX-512, VNNI and AMX masked (x86-64-v3)" if masked else "as the CPU reports",
        "ONNX Runtime kernels": mlas_kernels(seen) if seen else "(numpy could not tell)",
    }


def llama_system_info() -> str:
    """llama.cpp's own line of compiled-in CPU features ('' if llama-cpp-python is missing)."""
    try:
        import llama_cpp
    except ImportError:
        return ""
    return llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
