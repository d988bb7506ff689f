"""How far a run's metrics can be trusted: parse failures, fallbacks and failed facts, per stage.

A stage that cannot parse the model's answer falls back (the hypothesis stage
to the direct query, the verifier to the fill value, the selector to the
method's own order), and a fact whose request the server refused is recorded
as failed. Both leave the run going, which is right, but a metric computed
from fallbacks is not the method's metric: a broken server can score better
than a working one. So every run counts them in ``metrics.json``, and the
runner warns when a stage falls back often.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fhs.core.errors import warn

# A stage whose answers fail to parse more often than this gets a warning on stderr.
WARN_SHARE = 0.10


def failed(record: Mapping) -> bool:
    return bool(record.get("failed"))


def stage_health(records: Sequence[Mapping]) -> dict[str, dict[str, int]]:
    """Per stage (a call's ``purpose``): calls, answers not parsed, answers cut at max_tokens, fallbacks.

    A cut answer (``truncated``) also counts as not parsed: its stage treated it so.

    Fallbacks count facts (hypothesis: no sample parsed, the direct query was
    searched; selector: the method's order was kept) or hypotheses (verifier:
    the fill value stood in for the verdicts).
    """
    stages: dict[str, dict[str, int]] = {}

    def stage(name: str) -> dict[str, int]:
        return stages.setdefault(name or "other", {"calls": 0, "parse_failures": 0, "truncations": 0, "fallbacks": 0})

    for record in records:
        for call in record.get("llm_calls") or []:
            block = stage(call.get("purpose", ""))
            block["calls"] += 1
            block["parse_failures"] += not call.get("parsed", True)
            block["truncations"] += bool(call.get("truncated"))
        hypotheses = record.get("hypotheses") or []
        if hypotheses and all(h.get("source") == "fallback" for h in hypotheses):
            stage("hypothesis")["fallbacks"] += 1
        verifier = record.get("verifier") or {}
        for verdict in verifier.get("verdicts") or []:
            if verdict.get("asked") and not verdict.get("parsed"):
                stage("verifier")["fallbacks"] += 1
        if "selected" in record and record.get("selection", {}) is None:
            stage("selector")["fallbacks"] += 1
    return stages


def failed_facts(records: Sequence[Mapping]) -> dict[str, Any]:
    """Facts that could not be run (with why), by id."""
    bad = [r for r in records if failed(r)]
    return {"count": len(bad), "ids": [r["id"] for r in bad],
            "reasons": {r["id"]: str(r["failed"])[:300] for r in bad}}


def warn_about(stages: Mapping[str, Mapping[str, int]], failures: Mapping[str, Any], n_records: int,
               share: float = WARN_SHARE) -> list[str]:
    """Warnings on stderr for stages over ``share`` parse failures and for failed facts; returns them."""
    lines = []
    for name, block in stages.items():
        if block["calls"] and block["parse_failures"] > share * block["calls"]:
            cut = block.get("truncations", 0)
            cut_text = f", {cut} of them cut at max_tokens" if cut else ""
            lines.append(f"{name}: {block['parse_failures']} of {block['calls']} answers could not be parsed"
                         f"{cut_text} ({block['fallbacks']} fallbacks taken); metrics partly measure the fallback, "
                         f"not the method (check the server; parse_failures and truncations in metrics.json)")
    if failures["count"]:
        lines.append(f"{failures['count']} of {n_records} facts failed and are left out of the metrics "
                     f"(e.g. {failures['ids'][0]}: {next(iter(failures['reasons'].values()))[:160]}); "
                     f"a rerun retries them")
    for line in lines:
        warn(line)
    return lines
