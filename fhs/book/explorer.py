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

A run folder may come from someone else, and its files may have changed since
the run: the facts and taxonomy are shown only where the run's stamp vouches
for today's content (``fhs.book.verified_inputs``), and the page says which input
changed. A record edited by hand shows what can still be read and a note for
the rest, never a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from fhs.book.verified_inputs import vouched_inputs
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
        raise InputError(
            "not a run directory (no records.jsonl)",
            path=run_dir,
            fix="pass the --out directory of an `fhs run`, or a chapter's run under runs/<profile>/",
        )
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
    return InputError(
        f"no fact {fact_id!r} in this run{hint}",
        path=run_dir / "records.jsonl",
        field="id",
        fix=f"the ids are the 'id' field of records.jsonl; list them with `fhs show {run_dir} --list`",
    )


def open_run(run_dir: str | Path, data: str | Path | None = None) -> LoadedRun:
    """Read a run directory; its facts and taxonomy come from the files or dataset its config names."""
    path = Path(run_dir)
    records_path = _records_path(path)
    config_path = path / "run-config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    except (ValueError, UnicodeDecodeError):
        raise InputError("not valid JSON", path=config_path, fix="restore the run's run-config.json") from None
    if not isinstance(config, dict):
        raise InputError("expected a JSON object", path=config_path, fix="restore the run's run-config.json")
    records = {r["id"]: r for r in read_records(records_path)}
    facts, taxonomy, note = vouched_inputs(config, data, path)
    return LoadedRun(path, config, records, {f.id: f for f in facts if f.id in records}, taxonomy, note)


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


def split_row(line: str) -> list[str]:
    """One flattened row back as cells: split at a ``|`` with space (or the line's end) on both sides,
    so an empty cell written ``a | | b`` stays a cell rather than gluing ``| b`` onto the next one."""
    return [cell.strip() for cell in _CELL_BAR.split(line)]


_CELL_BAR = re.compile(r"(?:(?<=\s)|^)\|(?=\s|$)")


def table_view(fact: Fact) -> dict[str, Any]:
    """The flattened table text (one line per row, cells ``" | "``) back as rows, the fact's cell marked.

    The cell is the one holding the value in the row whose label the row header
    ends with (else the first cell holding the value); the page says so. Short
    rows are re-aligned under the value columns (``_aligned``).
    """
    rows = [split_row(line) for line in fact.context.split("\n")]
    row_header = normalize_space(fact.row_header).casefold()
    hits = [(r, c) for r, cells in enumerate(rows) for c, cell in enumerate(cells) if _contains(cell, fact.value)]
    labelled = [
        (r, c) for r, c in hits if rows[r][0].strip() and row_header.endswith(normalize_space(rows[r][0]).casefold())
    ]
    marked = next(iter(labelled or hits), None)
    width = max((len(cells) for cells in rows), default=0)
    return {
        "kind": "table",
        "rows": [
            _aligned([{"text": cell, "marked": (r, c) == marked, "span": 1} for c, cell in enumerate(cells)], width)
            for r, cells in enumerate(rows)
        ],
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
    if isinstance(span, list) and len(span) == 2 and text[span[0] : span[1]] == fact.value:
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
    view.update(
        value=fact.value,
        row_header=fact.row_header,
        column_header=fact.column_header,
        sentence=fact.sentence,
        datatype=fact.datatype,
        context_id=fact.context_id,
    )
    return view


# ---- the stages ---------------------------------------------------------------------------


def _candidate(cid: str, gold: set[str], taxonomy: Taxonomy | None) -> dict[str, Any]:
    cid = str(cid)
    concept = taxonomy.get(cid) if taxonomy is not None else None
    return {"id": cid, "label": concept.label if concept is not None else "", "gold": cid in gold}


def _gold_rank(ids: list[str], gold: set[str]) -> int | None:
    return next((i for i, cid in enumerate(ids, start=1) if cid in gold), None)


def _queries(record: dict) -> list[dict[str, Any]]:
    out = []
    for q in _items(record.get("queries")):
        if isinstance(q, dict):
            index = q.get("hypothesis_index")
            out.append(
                {**q, "hypothesis_index": index if isinstance(index, int) and not isinstance(index, bool) else None}
            )
        else:
            out.append({"text": str(q), "rendering": "", "hypothesis_index": None})
    return out


def _number(value: Any) -> float | None:
    """A recorded number, or None for anything else (a hand-edited record may hold anything)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _items(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else []


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def verifier_panels(verifier: dict, hypotheses: list[dict], gold: set[str], taxonomy) -> list[dict[str, Any]]:
    """One heatmap per hypothesis: window candidates x dimensions, with v_j(c) and the hypothesis's values."""
    window = [str(cid) for cid in _items(_mapping(verifier.get("window")).get("ids"))]
    supports, fills = _items(verifier.get("support")), _items(verifier.get("fill"))
    panels = []
    for j, verdicts in enumerate(_items(verifier.get("verdicts"))):
        verdicts, dims = (
            _mapping(verdicts),
            _mapping(_mapping(hypotheses[j] if j < len(hypotheses) else {}).get("dimensions")),
        )
        entries = {cid: _mapping(entry) for cid, entry in _mapping(verdicts.get("entries")).items()}
        names = list(dims) or sorted({d for e in entries.values() for d in e})
        support = _mapping(supports[j]) if j < len(supports) else {}
        rows = []
        for cid in window:
            entry = entries.get(cid)
            rows.append(
                {
                    **_candidate(cid, gold, taxonomy),
                    "cells": [str((entry or {}).get(d, "not judged")) for d in names],
                    "judged": entry is not None,
                    "v": _number(support.get(cid)),
                }
            )
        panels.append(
            {
                "index": j + 1,
                "asked": bool(verdicts.get("asked", True)),
                "parsed": bool(verdicts.get("parsed", bool(entries))),
                "dimensions": [
                    {
                        "name": str(d),
                        "value": dims.get(d, ""),
                        "unresolved": str(dims.get(d, "")).upper() == "UNRESOLVED",
                    }
                    for d in names
                ],
                "rows": rows,
                "fill": _number(fills[j]) if j < len(fills) else None,
            }
        )
    return panels


def decomposition(record: dict, beta: float, gold: set[str], taxonomy, head: int = HEAD) -> list[dict[str, Any]]:
    """S~ + beta * v̄ for the head of the final order, next to the score the run recorded."""
    pool, verifier = _mapping(record.get("pool")), _mapping(record.get("verifier"))
    pool_ids = _items(pool.get("ids"))
    s_tilde = {cid: _number(s) for cid, s in zip(pool_ids, _items(pool.get("normalized")))}
    vbar = {cid: _number(v) for cid, v in _mapping(verifier.get("vbar")).items()}
    outside = _number(verifier.get("vbar_outside"))
    recorded = _items(record.get("final_scores"))
    rows = []
    for i, cid in enumerate(_items(record.get("ranking"))[:head]):
        found = vbar.get(cid)
        v = found if found is not None else (outside if outside is not None else 0.0)
        s = s_tilde.get(cid)
        rows.append(
            {
                **_candidate(cid, gold, taxonomy),
                "rank": i + 1,
                "s": s,
                "vbar": v,
                "in_window": cid in vbar,
                "bonus": beta * v,
                "total": (s or 0.0) + beta * v,
                "recorded": _number(recorded[i]) if i < len(recorded) else None,
                "fused_rank": pool_ids.index(cid) + 1 if cid in s_tilde else None,
            }
        )
    return rows


def _hypotheses(record: dict) -> list[dict[str, Any]]:
    """Every hypothesis over one list of dimensions (a hypothesis without one shows it empty)."""
    hypotheses = [_mapping(h) for h in _items(record.get("hypotheses"))]
    names = list(dict.fromkeys(str(d) for h in hypotheses for d in _mapping(h.get("dimensions"))))
    views = []
    for j, h in enumerate(hypotheses):
        dims = {str(d): v for d, v in _mapping(h.get("dimensions")).items()}
        views.append(
            {
                "index": j + 1,
                "source": h.get("source", ""),
                "query": h.get("retrieval_query", ""),
                "operators": [str(o) for o in _items(h.get("operators"))],
                "dimensions": [
                    {"name": d, "value": dims.get(d, ""), "unresolved": str(dims.get(d, "")).upper() == "UNRESOLVED"}
                    for d in names
                ],
            }
        )
    return views


def stage_view(run: LoadedRun, fact_id: str, head: int = HEAD) -> dict[str, Any]:
    """Everything the page shows for one fact in one run."""
    record = require_fact(run, fact_id)
    gold_ids = [str(g) for g in _items(record.get("gold"))]
    gold, taxonomy = set(gold_ids), run.taxonomy
    beta = _number(_mapping(run.config.get("fhs")).get("beta", 0.0)) or 0.0
    ranking = [str(cid) for cid in _items(record.get("ranking"))]
    pool = _mapping(record.get("pool"))
    view = {
        "run": run.label,
        "path": str(run.path),
        "method": record.get("method", run.config.get("method")),
        "gold": [_candidate(g, gold, taxonomy) for g in gold_ids],
        "rank": record.get("rank"),
        "note": "; ".join(str(n) for n in (record.get("note"), run.note) if n),
        "hypotheses": _hypotheses(record),
        "queries": _queries(record),
        "rankings": [
            {
                "index": i + 1,
                "gold_rank": _gold_rank(_items(ids), gold),
                "head": [_candidate(str(c), gold, taxonomy) for c in _items(ids)[:head]],
            }
            for i, ids in enumerate(_items(record.get("rankings")))
        ],
        "pool": None,
        "panels": [],
        "decomposition": [],
        "beta": beta,
        "final": {
            "gold_rank": _gold_rank(ranking, gold),
            "head": [_candidate(c, gold, taxonomy) for c in ranking[:head]],
        },
        "selection": None,
    }
    if pool:
        ids = [str(cid) for cid in _items(pool.get("ids"))]
        view["pool"] = {
            "gold_rank": _gold_rank(ids, gold),
            "size": len(ids),
            "union": pool.get("union_size"),
            "head": [
                {**_candidate(c, gold, taxonomy), "score": _number(s), "normalized": _number(n)}
                for c, s, n in list(zip(ids, _items(pool.get("scores")), _items(pool.get("normalized"))))[:head]
            ],
        }
    if _mapping(record.get("verifier")):
        view["panels"] = verifier_panels(record["verifier"], _items(record.get("hypotheses")), gold, taxonomy)
        view["decomposition"] = decomposition(record, beta, gold, taxonomy, head)
    if "selected" in record:
        view["selection"] = {
            **_candidate(str(record["selected"]), gold, taxonomy),
            "correct": record.get("correct"),
            "parsed": record.get("selection") is not None,
        }
    return view


def safe_stage_view(run: LoadedRun, fact_id: str, head: int = HEAD) -> dict[str, Any]:
    """:func:`stage_view`, or for a record edited out of shape, an empty view that says so."""
    try:
        return stage_view(run, fact_id, head)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as error:
        if isinstance(error, InputError):
            raise
        return {
            "run": run.label,
            "path": str(run.path),
            "method": run.config.get("method"),
            "gold": [],
            "rank": None,
            "note": f"this fact's record cannot be read ({type(error).__name__}: it was edited "
            f"out of the shape fhs run writes); its stages are not shown",
            "hypotheses": [],
            "queries": [],
            "rankings": [],
            "pool": None,
            "panels": [],
            "decomposition": [],
            "beta": 0.0,
            "final": {"gold_rank": None, "head": []},
            "selection": None,
        }


# ---- the page -----------------------------------------------------------------------------


def render_page(runs: list[LoadedRun], ids: list[str], title: str = "FHS explorer") -> str:
    """One HTML page: per fact, its context once and one column per run."""
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["j2", "html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["num"] = lambda value, digits=3: "" if _number(value) is None else f"{value:.{digits}f}"
    facts = []
    for fact_id in ids:
        stages = [safe_stage_view(run, fact_id) for run in runs]
        fact = next((run.facts[fact_id] for run in runs if fact_id in run.facts), None)
        facts.append(
            {
                "id": fact_id,
                "modality": runs[0].records[fact_id].get("modality", ""),
                "context": context_view(fact),
                "runs": stages,
                "missing_context": next((run.note for run in runs if run.note), ""),
            }
        )
    return environment.get_template("explorer.html.j2").render(
        title=title, facts=facts, runs=[run.label for run in runs]
    )


def write_explorer(
    run_dirs: list[str | Path],
    ids: list[str],
    out: str | Path,
    *,
    data: str | Path | None = None,
    title: str = "FHS explorer",
) -> Path:
    """Render the page for ``ids`` across ``run_dirs`` (the first is the reference) and write it."""
    runs = [open_run(path, data) for path in run_dirs]
    if not ids:
        raise InputError(
            "no fact chosen", field="fact", fix=f"pass --fact ID; list ids with `fhs show {run_dirs[0]} --list`"
        )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, render_page(runs, ids, title))
    return out
