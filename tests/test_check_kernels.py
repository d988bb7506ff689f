"""Chapter 5's values are checked against its encoder's kernel family (fhs.book.retriever_swap.check_profile)."""

from __future__ import annotations

from fhs.book import retriever_swap
from fhs.book.check import load_regression
from fhs.run import machine


def test_the_encoder_kernel_follows_the_simd_extensions():
    assert machine.encoder_kernel({"AVX2", "FMA3", "AVX512F"}) == "AVX512F"
    assert machine.encoder_kernel({"AVX2", "FMA3"}) == "FMA3"
    assert machine.encoder_kernel({"SSE42"}) == "AVX or SSE"


def test_fma3_kernels_are_checked_against_their_own_recorded_values(monkeypatch):
    monkeypatch.setattr(machine, "encoder_kernel", lambda simd=None: "FMA3")
    assert retriever_swap.check_profile("cpu") == "cpu-fma3"
    assert retriever_swap.check_profile("paper") == "paper"  # nothing recorded apart: the profile's own
    monkeypatch.setattr(machine, "encoder_kernel", lambda simd=None: "AVX512F")
    assert retriever_swap.check_profile("cpu") == "cpu"


def test_the_two_kernel_families_differ_only_where_a_candidate_list_moved():
    regression = load_regression("05_retriever_swap")
    cpu, fma3 = regression.expected_for("cpu"), regression.expected_for("cpu-fma3")
    assert set(cpu) == set(fma3)
    moved = {name for name in cpu if abs(cpu[name].value - fma3[name].value) > cpu[name].tolerance}
    assert moved and all("/dense/" in name or "dense_minus" in name for name in moved)
    assert not any(name.startswith("fincl/") for name in moved)
