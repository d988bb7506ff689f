"""Record the dense lists chapter 5's LLM sample sends to the model, for tests/test_dense_sample.py.

Reads the dense runs that asked a model in a built book's run folder (``runs/`` of a clone
after `make book`, or after `make notebooks ARGS="--only 05_retriever_swap"`), checks that
every recorded list is what an exact search gives again here, and writes each query's
datatype, its top-200 concept ids and the digest of its exact vector. The test then
recomputes those lists' order and scores on whatever CPU runs it.

    FHS_DATA=../shared/data FHS_CACHE=<the build's cache> python -m dev.dense_sample --runs <clone>/runs \\
        --out tests/fixtures/dense_sample_cpu.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def recorded_lists(record: dict) -> list[tuple[str, list[str]]]:
    """(query, ids) pairs of one record: FHS and one-pass keep a list per query, direct its one list."""
    queries = [q["text"] if isinstance(q, dict) else q for q in record.get("queries", [])]
    if "rankings" in record:
        return list(zip(queries, record["rankings"]))
    return [(queries[0], record["ranking"])] if queries and record.get("ranking") else []


def main() -> None:
    from fhs.run.inputs import load_experiment
    from fhs.run.profiles import get_profile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    profile = get_profile(args.profile)
    fixture: dict = {"profile": args.profile, "datasets": {}}
    for config_path in sorted(args.runs.glob("*/*/run-config.json")):
        config = json.loads(config_path.read_text())
        if config["retriever"]["kind"] != "dense" or not config.get("model"):
            continue
        dataset = config["dataset"]
        model = profile.dense_model_for(load_experiment(dataset, progress=False).taxonomy.name)
        experiment = load_experiment(dataset, progress=False, retriever="dense", dense_model=model)
        datatypes = {fact.id: fact.datatype for fact in experiment.facts}
        entry = fixture["datasets"].setdefault(dataset, {"taxonomy": experiment.taxonomy.name, "model": model,
                                                         "queries": {}})
        retriever = experiment.retriever
        for line in (config_path.parent / "records.jsonl").read_text().splitlines():
            record = json.loads(line)
            for query, ids in recorded_lists(record):
                datatype = datatypes[record["id"]]
                again = list(retriever.search(query, datatype, len(ids), exact=True).ids)
                if again != ids:
                    raise SystemExit(f"{config_path.parent.name}: the list of {query[:60]!r} is not the exact search's")
                vector = retriever.exact_query_vector(query)
                entry["queries"][query] = {"datatype": datatype, "ids": ids,
                                           "query_sha256": hashlib.sha256(vector.tobytes()).hexdigest()}
    for entry in fixture["datasets"].values():
        entry["queries"] = [{"query": q, **value} for q, value in sorted(entry["queries"].items())]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    print({name: len(entry["queries"]) for name, entry in fixture["datasets"].items()}, "queries ->", args.out)


if __name__ == "__main__":
    main()
