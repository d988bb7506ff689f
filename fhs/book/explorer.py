"""The per-fact explorer: one offline HTML page showing what a run did with chosen facts.

For each fact: its source context with the fact marked (a table context as a
table with the cell marked, a passage with the mention marked), then per run
every stage its record keeps: hypotheses (UNRESOLVED shown as such), rendered
queries, each ranking's head with the gold marked, the fused pool, the
verifier's window as a verdict heatmap (candidate x dimension, one panel per
hypothesis), the Eq. 3 decomposition S~ + beta * v̄ for the head, and the
selector's choice. Records come from ``records.jsonl``; the facts and taxonomy
from what ``run-config.json`` names (a bundled dataset, or the files of an
``fhs run --facts ... --taxonomy ...``). The page is a Jinja2 template
(``templates/explorer.html.j2``) with inline CSS and nothing loaded from the network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from fhs.core.errors import InputError
from fhs.core.files import write_text_atomic
from fhs.data.datasets.html_tables import cell_kind
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.run.records import read_records

HEAD = 10  # candidates shown per ranking, pool and decomposition
TEMPLATES = Path(__file__).with_name("templates")


@dataclass
class LoadedRun:
    """A run directory's records, with the facts and taxonomy the run used (when they can be found)."""

    path: Path
    config: dict[str, Any]
    records: dict[str, dict]
    facts: dict[str, Fact]
    taxonomy: Taxonomy | None
    note: str = ""

    @property
    def label(self) -> str:
        model = (self.config.get("model") or {}).get("model", "")
        return f"{self.config.get('method', '?')} · {self.path.name}" + (f" · {Path(model).name}" if model else "")


def _records_path(run_dir: str | Path) -> Path:
    path = Path(run_dir) / "records.jsonl"
    if not path.is_file():
        raise InputError("not a run directory (no records.jsonl)", path=run_dir,
                         fix="pass the --out directory of an `fhs run`, or a chapter's run under runs/<profile>/")
    return path


def check_fact_ids(run_dir: str | Path, ids: list[str]) -> None:
    """Fail on a fact id the run did not record, before any data is loaded."""
    path = _records_path(run_dir)
    known = {r["id"] for r in read_records(path)}
    for fact_id in ids:
        if fact_id not in known:
            raise _unknown(fact_id, Path(run_dir), known)


def _unknown(fact_id: str, run_dir: Path, known=()) -> InputError:
    near = [k for k in known if k.endswith(fact_id) or fact_id in k][:3]
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return InputError(f"no fact {fact_id!r} in this run{hint}", path=run_dir / "records.jsonl", field="id",
                      fix=f"the ids are the 'id' field of records.jsonl; list them with `fhs show {run_dir} --list`")


def open_run(run_dir: str | Path, data: str | Path | None = None) -> LoadedRun:
    """Read a run directory; its facts and taxonomy come from the files or dataset its config names."""
    path = Path(run_dir)
    records_path = _records_path(path)
    config_path = path / "run-config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    records = {r["id"]: r for r in read_records(records_path)}
    facts, taxonomy, note = _inputs(config, data)
    return LoadedRun(path, config, records, {f.id: f for f in facts if f.id in records}, taxonomy, note)


_DATASETS_SEEN: dict[tuple[str, str], tuple[list[Fact], Taxonomy]] = {}


def _inputs(config: dict, data) -> tuple[list[Fact], Taxonomy | None, str]:
    from fhs.data.datasets import DATASETS
    from fhs.data.facts import read_facts
    from fhs.data.taxonomies import TAXONOMIES, load_taxonomy, load_taxonomy_file
    from fhs.run.inputs import load_experiment

    if config.get("facts"):
        facts_path, name = Path(config["facts"]), config.get("taxonomy", "")
        if not facts_path.is_file():
            return [], None, f"the run's facts file {facts_path} is gone: context not shown"
        taxonomy = load_taxonomy(name, data) if name in TAXONOMIES else \
            load_taxonomy_file(name) if name and Path(name).is_file() else None
        return read_facts(facts_path), taxonomy, ""
    if config.get("dataset") in DATASETS:
        key = (config["dataset"], str(data))
        if key not in _DATASETS_SEEN:  # several runs of one dataset on a page load it once
            experiment = load_experiment(config["dataset"], data=data, progress=False)
            _DATASETS_SEEN[key] = (experiment.facts, experiment.taxonomy)
        facts, taxonomy = _DATASETS_SEEN[key]
        return facts, taxonomy, ""
    return [], None, "run-config.json names no dataset or facts file: context not shown"


def fact_ids(run: LoadedRun) -> list[str]:
    return list(run.records)


def require_fact(run: LoadedRun, fact_id: str) -> dict:
    if fact_id not in run.records:
        raise _unknown(fact_id, run.path, run.records)
    return run.records[fact_id]


# ---- the context --------------------------------------------------------------------------

def normalize_space(text: str) -> str:
    return " ".join(text.split())


def _contains(cell: str, value: str) -> bool:
    return bool(value) and normalize_space(value) in normalize_space(cell)


def table_view(fact: Fact) -> dict[str, Any]:
    """The flattened table text (one line per row, cells ``" | "``) back as rows, the fact's cell marked.

    The cell is the one holding the value in the row whose label the row header
    ends with (else the first cell holding the value); the page says so. Short
    rows are re-aligned under the value columns (``_aligned``).
    """
    rows = [line.split(" | ") for line in fact.context.split("\n")]
    row_header = normalize_space(fact.row_header).casefold()
    hits = [(r, c) for r, cells in enumerate(rows) for c, cell in enumerate(cells) if _contains(cell, fact.value)]
    labelled = [(r, c) for r, c in hits if rows[r][0].strip() and row_header.endswith(normalize_space(rows[r][0]).casefold())]
    marked = (labelled or hits or [None])[0]
    width = max((len(cells) for cells in rows), default=0)
    return {
        "kind": "table",
        "rows": [_aligned([{"text": cell, "marked": (r, c) == marked, "span": 1} for c, cell in enumerate(cells)], width)
                 for r, cells in enumerate(rows)],
        "found": marked is not None,
        "candidates": len(hits),
    }


def _aligned(cells: list[dict], width: int) -> list[dict]:
    """Place a short row under the value columns, since the flattened text dropped its empty cells.

    A row of a label and values keeps the label left and moves the values right; a
    row with no values (column headers, dates) sits over the value columns, each cell
    spanning an equal share when the columns divide evenly; a lone label stays left.
    """
    blank = {"text": "", "marked": False, "span": 1}
    missing = width - len(cells)
    if missing <= 0 or len(cells) <= 1:
        return cells + [blank] * max(missing, 0)
    kinds = [cell_kind(cell["text"]) for cell in cells]
    if kinds[0] == "label" and any(k == "value" for k in kinds[1:]):
        return cells[:1] + [blank] * missing + cells[1:]
    if any(k == "value" for k in kinds):
        return cells + [blank] * missing
    span = (width - 1) // len(cells) if (width - 1) % len(cells) == 0 else 1
    return [{**blank, "span": width - span * len(cells)}] + [{**cell, "span": span} for cell in cells]


def text_view(fact: Fact) -> dict[str, Any]:
    """The passage split around the mention: a recorded span first, else the value inside its sentence."""
    text, start = fact.context, -1
    span = fact.metadata.get("span") if isinstance(fact.metadata, dict) else None
    if isinstance(span, list) and len(span) == 2 and text[span[0]:span[1]] == fact.value:
        start = span[0]
    else:
        base = text.find(fact.sentence) if fact.sentence else -1
        start = text.find(fact.value, max(base, 0)) if fact.value else -1
        if start < 0 and fact.value:
            start = text.find(fact.value)
    if start < 0:
        return {"kind": "text", "before": text, "mark": "", "after": "", "found": False}
    end = start + len(fact.value)
    return {"kind": "text", "before": text[:start], "mark": text[start:end], "after": text[end:], "found": True}


def context_view(fact: Fact | None) -> dict[str, Any] | None:
    if fact is None:
        return None
    view = table_view(fact) if fact.modality == "table" else text_view(fact)
    view.update(value=fact.value, row_header=fact.row_header, column_header=fact.column_header,
                sentence=fact.sentence, datatype=fact.datatype, context_id=fact.context_id)
    return view


# ---- the stages ---------------------------------------------------------------------------

def _candidate(cid: str, gold: set[str], taxonomy: Taxonomy | None) -> dict[str, Any]:
    concept = taxonomy.get(cid) if taxonomy is not None else None
    return {"id": cid, "label": concept.label if concept is not None else "", "gold": cid in gold}


def _gold_rank(ids: list[str], gold: set[str]) -> int | None:
    return next((i for i, cid in enumerate(ids, start=1) if cid in gold), None)


def _queries(record: dict) -> list[dict[str, Any]]:
    out = []
    for q in record.get("queries") or []:
        out.append(q if isinstance(q, dict) else {"text": str(q), "rendering": "", "hypothesis_index": None})
    return out


def verifier_panels(verifier: dict, hypotheses: list[dict], gold: set[str], taxonomy) -> list[dict[str, Any]]:
    """One heatmap per hypothesis: window candidates x dimensions, with v_j(c) and the hypothesis's values."""
    window = verifier["window"]["ids"]
    panels = []
    for j, verdicts in enumerate(verifier["verdicts"]):
        dims = hypotheses[j]["dimensions"] if j < len(hypotheses) else {}
        names = list(dims) or sorted({d for e in verdicts["entries"].values() for d in e})
        support = verifier["support"][j] if j < len(verifier.get("support", [])) else {}
        rows = []
        for cid in window:
            entry = verdicts["entries"].get(cid)
            rows.append({**_candidate(cid, gold, taxonomy),
                         "cells": [(entry or {}).get(d, "not judged") for d in names],
                         "judged": entry is not None, "v": support.get(cid)})
        panels.append({"index": j + 1, "asked": verdicts["asked"], "parsed": verdicts["parsed"],
                       "dimensions": [{"name": d, "value": dims.get(d, ""),
                                       "unresolved": str(dims.get(d, "")).upper() == "UNRESOLVED"} for d in names],
                       "rows": rows, "fill": (verifier.get("fill") or [None] * (j + 1))[j]})
    return panels


def decomposition(record: dict, beta: float, gold: set[str], taxonomy, head: int = HEAD) -> list[dict[str, Any]]:
    """S~ + beta * v̄ for the head of the final order, next to the score the run recorded."""
    pool, verifier = record.get("pool") or {}, record.get("verifier") or {}
    s_tilde = dict(zip(pool.get("ids", []), pool.get("normalized", [])))
    vbar = verifier.get("vbar", {})
    outside = verifier.get("vbar_outside")
    recorded = record.get("final_scores") or []
    rows = []
    for i, cid in enumerate(record.get("ranking", [])[:head]):
        v = vbar.get(cid, outside if outside is not None else 0.0)
        rows.append({**_candidate(cid, gold, taxonomy), "rank": i + 1, "s": s_tilde.get(cid), "vbar": v,
                     "in_window": cid in vbar, "bonus": beta * v,
                     "total": s_tilde.get(cid, 0.0) + beta * v,
                     "recorded": recorded[i] if i < len(recorded) else None,
                     "fused_rank": pool["ids"].index(cid) + 1 if cid in s_tilde else None})
    return rows


def stage_view(run: LoadedRun, fact_id: str, head: int = HEAD) -> dict[str, Any]:
    """Everything the page shows for one fact in one run."""
    record = require_fact(run, fact_id)
    gold, taxonomy = set(record.get("gold", [])), run.taxonomy
    beta = float((run.config.get("fhs") or {}).get("beta", 0.0))
    ranking = record.get("ranking", [])
    pool = record.get("pool")
    view = {
        "run": run.label, "path": str(run.path), "method": record.get("method", run.config.get("method")),
        "gold": [_candidate(g, gold, taxonomy) for g in record.get("gold", [])],
        "rank": record.get("rank"), "note": record.get("note", ""),
        "hypotheses": [{"index": j + 1, "source": h.get("source", ""), "query": h.get("retrieval_query", ""),
                        "operators": h.get("operators", []),
                        "dimensions": [{"name": d, "value": v, "unresolved": str(v).upper() == "UNRESOLVED"}
                                       for d, v in h.get("dimensions", {}).items()]}
                       for j, h in enumerate(record.get("hypotheses") or [])],
        "queries": _queries(record),
        "rankings": [{"index": i + 1, "gold_rank": _gold_rank(ids, gold),
                      "head": [_candidate(c, gold, taxonomy) for c in ids[:head]]}
                     for i, ids in enumerate(record.get("rankings") or [])],
        "pool": None, "panels": [], "decomposition": [], "beta": beta,
        "final": {"gold_rank": _gold_rank(ranking, gold), "head": [_candidate(c, gold, taxonomy) for c in ranking[:head]]},
        "selection": None,
    }
    if pool:
        view["pool"] = {"gold_rank": _gold_rank(pool["ids"], gold), "size": len(pool["ids"]),
                        "union": pool.get("union_size"),
                        "head": [{**_candidate(c, gold, taxonomy), "score": s, "normalized": n}
                                 for c, s, n in list(zip(pool["ids"], pool["scores"], pool["normalized"]))[:head]]}
    if record.get("verifier"):
        view["panels"] = verifier_panels(record["verifier"], record.get("hypotheses") or [], gold, taxonomy)
        view["decomposition"] = decomposition(record, beta, gold, taxonomy, head)
    if "selected" in record:
        view["selection"] = {**_candidate(record["selected"], gold, taxonomy), "correct": record.get("correct"),
                             "parsed": record.get("selection") is not None}
    return view


# ---- the page -----------------------------------------------------------------------------

def render_page(runs: list[LoadedRun], ids: list[str], title: str = "FHS explorer") -> str:
    """One HTML page: per fact, its context once and one column per run."""
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2", "html"]),
                              trim_blocks=True, lstrip_blocks=True)
    facts = []
    for fact_id in ids:
        stages = [stage_view(run, fact_id) for run in runs]
        fact = next((run.facts[fact_id] for run in runs if fact_id in run.facts), None)
        facts.append({"id": fact_id, "modality": runs[0].records[fact_id].get("modality", ""),
                      "context": context_view(fact), "runs": stages,
                      "missing_context": next((run.note for run in runs if run.note), "")})
    return environment.get_template("explorer.html.j2").render(title=title, facts=facts,
                                                                runs=[run.label for run in runs])


def write_explorer(run_dirs: list[str | Path], ids: list[str], out: str | Path, *,
                   data: str | Path | None = None, title: str = "FHS explorer") -> Path:
    """Render the page for ``ids`` across ``run_dirs`` (the first is the reference) and write it."""
    runs = [open_run(path, data) for path in run_dirs]
    if not ids:
        raise InputError("no fact chosen", field="fact", fix=f"pass --fact ID; list ids with `fhs show {run_dirs[0]} --list`")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, render_page(runs, ids, title))
    return out
