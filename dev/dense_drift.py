"""How far ONNX Runtime's fast concept vectors stray from the exact ones (the premise of exact rankings).

``fhs.retrieval.exact_dense`` ranks a model's candidate lists by exact vectors and trusts the
fast ones only to within ``DRIFT`` (|v_fast - v_exact|). This measures that distance over
whole taxonomies, with the CPU's own kernels or (``--isa x86-64-v3``, where CPUID can be
masked) with AVX2 kernels, and prints the largest and a few quantiles as JSON.

    FHS_DATA=../shared/data python -m dev.dense_drift --taxonomy us-gaap-2024 --model minilm-int8-d64
    FHS_DATA=../shared/data python -m dev.dense_drift --taxonomy icd-10-cm --model minilm-int8-d32 --sample 8000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def vectors(taxonomy: str, model: str, sample: int | None, exact: bool, out: Path) -> None:
    from fhs.data.taxonomies import load_taxonomy
    from fhs.retrieval.dense import concept_texts
    from fhs.retrieval.encoders import make_encoder, make_exact_encoder

    texts = concept_texts(load_taxonomy(taxonomy, os.environ.get("FHS_DATA")))
    if sample and sample < len(texts):
        picks = np.random.default_rng(0).choice(len(texts), sample, replace=False)
        texts = [texts[i] for i in sorted(picks)]
    encoder = make_exact_encoder(model) if exact else make_encoder(model)
    np.save(out, encoder.encode(texts, documents=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--taxonomy", required=True)
    parser.add_argument("--model", default="minilm-int8")
    parser.add_argument("--sample", type=int, default=None, help="concepts drawn (seed 0); default: all")
    parser.add_argument("--isa", default="native", choices=["native", "x86-64-v3"])
    parser.add_argument("--part", choices=["fast", "exact"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        vectors(args.taxonomy, args.model, args.sample, args.part == "exact", args.out)
        return
    from dev.cpuid_mask import isa_environment

    with tempfile.TemporaryDirectory() as scratch:
        paths = {part: Path(scratch) / f"{part}.npy" for part in ("fast", "exact")}
        for part, path in paths.items():
            env = isa_environment(args.isa, Path.home() / ".cache" / "fhs") if part == "fast" else dict(os.environ)
            command = [sys.executable, "-m", "dev.dense_drift", "--taxonomy", args.taxonomy, "--model", args.model,
                       "--part", part, "--out", str(path)] + (["--sample", str(args.sample)] if args.sample else [])
            subprocess.run(command, env=env, check=True, cwd=Path(__file__).resolve().parent.parent)
        fast, exact = (np.load(paths[part]).astype(np.float64) for part in ("fast", "exact"))
    drift = np.linalg.norm(fast - exact, axis=1)
    print(json.dumps({"taxonomy": args.taxonomy, "model": args.model, "isa": args.isa, "concepts": len(drift),
                      "max": float(drift.max()), "p99.9": float(np.quantile(drift, 0.999)),
                      "median": float(np.median(drift))}))


if __name__ == "__main__":
    main()
