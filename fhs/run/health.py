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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fhs.core.errors import warn

# A stage whose answers fail to parse more often than this gets a warning on stderr.
WARN_SHARE = 0.10


def failed(record: Mapping) -> bool:
    return bool(record.get("failed"))


STAGE_COUNTS = ("calls", "parse_failures", "truncations", "fallbacks")


def record_health(record: Mapping) -> dict[str, list[int]]:
    """One record's ``{stage: [calls, parse_failures, truncations, fallbacks]}`` (see :func:`stage_health`)."""
    if "health" in record and "llm_calls" not in record:  # a summary (fhs.run.summary) already holds it
        stored = record["health"].items()  # a summary written before truncations were counted has three
        return {name: list(c) if len(c) == 4 else [c[0], c[1], 0, c[2]] for name, c in stored}
    stages: dict[str, list[int]] = {}

    def stage(name: str) -> list[int]:
        return stages.setdefault(name or "other", [0, 0, 0, 0])

    for call in record.get("llm_calls") or []:
        counts = stage(call.get("purpose", ""))
        counts[0] += 1
        counts[1] += not call.get("parsed", True)
        counts[2] += bool(call.get("truncated"))
    hypotheses = record.get("hypotheses") or []
    if hypotheses and all(h.get("source") == "fallback" for h in hypotheses):
        stage("hypothesis")[3] += 1
    verifier = record.get("verifier") or {}
    for verdict in verifier.get("verdicts") or []:
        if verdict.get("asked") and not verdict.get("parsed"):
            stage("verifier")[3] += 1
    if "selected" in record and record.get("selection", {}) is None:
        stage("selector")[3] += 1
    return stages


def stage_health(records: Iterable[Mapping]) -> dict[str, dict[str, int]]:
    """Per stage (a call's ``purpose``): calls, answers not parsed, answers cut at max_tokens, fallbacks.

    A cut answer (``truncated``) also counts as not parsed: its stage treated it so.

    Fallbacks count facts (hypothesis: no sample parsed, the direct query was
    searched; selector: the method's order was kept) or hypotheses (verifier:
    the fill value stood in for the verdicts). Reads records or their summaries.
    """
    stages: dict[str, dict[str, int]] = {}
    for record in records:
        for name, counts in record_health(record).items():
            block = stages.setdefault(name, dict.fromkeys(STAGE_COUNTS, 0))
            for key, value in zip(STAGE_COUNTS, counts):
                block[key] += value
    return stages


def failed_facts(records: Sequence[Mapping]) -> dict[str, Any]:
    """Facts that could not be run (with why), by id."""
    bad = [r for r in records if failed(r)]
    return {"count": len(bad), "ids": [r["id"] for r in bad], "reasons": {r["id"]: str(r["failed"])[:300] for r in bad}}


def warn_about(
    stages: Mapping[str, Mapping[str, int]],
    failures: Mapping[str, Any],
    n_records: int,
    share: float = WARN_SHARE,
    refused: str = "miss",
    in_process: bool = False,
) -> list[str]:
    """Warnings on stderr for stages over ``share`` parse failures and for failed facts; returns them.

    ``in_process``: the model runs inside this process (llama.cpp), so there is no server to check;
    the advice is about the model and its token caps instead."""
    lines = []
    advice = (
        "a small in-process model often misses the answer format; a larger model (--profile cpu) "
        "or a higher max_tokens cap helps"
        if in_process
        else "check the server; once it is fixed, run the same command with --retry-unusable to ask it again "
        "for these facts"
    )
    for name, block in stages.items():
        if block["calls"] and block["parse_failures"] > share * block["calls"]:
            cut = block.get("truncations", 0)
            cut_text = f", {cut} of them cut at max_tokens" if cut else ""
            lines.append(
                f"{name}: {block['parse_failures']} of {block['calls']} answers could not be parsed"
                f"{cut_text} ({block['fallbacks']} fallbacks taken); metrics partly measure the fallback, "
                f"not the method ({advice}; parse_failures and truncations in metrics.json)"
            )
    if failures["count"]:
        counted = "count as misses in" if refused == "miss" else "are left out of"
        lines.append(
            f"{failures['count']} of {n_records} facts failed and {counted} the metrics "
            f"(e.g. {failures['ids'][0]}: {next(iter(failures['reasons'].values()))[:160]}); "
            f"run the same command again to retry them"
        )
    for line in lines:
        warn(line)
    return lines
