"""The paper's claims, each judged on this build's recorded values: the claims page's data and verdicts.

A claim is written once, as data, beside the chapter that tests it: a ``claims:`` list in the
chapter's regression file (``fhs/book/regressions/<chapter>.yaml``). Each entry names the paper's
section, the comparison (one or two of the chapter's metrics, the paper's figures by reference into
``fhs.paper``, the direction or the margin) and the metric that counts its facts. Nothing on the
page is typed by hand: the build's values come from the saved results the regression check reads
(``runs/<profile>/results/<chapter>.json``), the paper's from ``fhs.paper``.

The interval is computed from a mean and its number of facts alone (the saved results keep no
per-fact values): Wilson's score interval for a mean of per-fact values in known bounds (a bounded
value's variance is at most a proportion's with the same mean), and Newcombe's hybrid score
interval for a difference of two means. Newcombe's ignores the pairing of two methods on the same
facts (which widens it) and neither sees the clustering of facts in contexts (which narrows it);
the chapters' paired, context-clustered bootstraps are the finer reading.

A claim whose metric names ``{dataset}`` is judged on every dataset the chapter ran, the paper's
figure taken from the benchmark the dataset stands for (``fhs.paper.PAPER_BENCHMARK``); a dataset
the paper did not use gets no paper figure, and in a book of the user's datasets only claims of that
kind are shown (``paper_datasets``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fhs.book.check import REGRESSIONS_DIR, results_path
from fhs.core.errors import InputError
from fhs.core.yamlfile import read_yaml_file
from fhs.paper import PAPER_BENCHMARK, lookup

Z = 1.959964  # the two-sided 95% normal quantile
HOLDS, FAILS, TOO_FEW, NEEDS = "holds", "does not hold", "too few facts to judge", "needs the paper profile"
KINDS = ("difference", "value")
KEYS = {"id", "claim", "section", "kind", "ours", "paper", "direction", "margin", "facts", "bounds", "llm", "each"}
CEILING_CHAPTER = "09_stage_ceilings"
CEILING_STAGES = ("pool", "verified")  # chapter 9's stages under a perfect model, beside each LLM claim


@dataclass(frozen=True)
class Claim:
    """One claim as written in a regression file; metric references are ``[chapter:]metric``."""

    id: str
    chapter: str
    claim: str
    section: str
    kind: str
    ours: tuple[str, ...]  # one metric (a value, or a difference already) or two (first minus second)
    paper: tuple[str, ...] = ()  # references into fhs.paper.TABLES, in the same order
    direction: int = 1  # +1: the first exceeds the second (or the difference is above zero)
    margin: float = 0.0  # a value claim: how far ours may sit from the paper's and still agree
    facts: str = ""  # the metric that counts the facts behind ``ours``
    bounds: tuple[float, float] = (0.0, 1.0)  # the range of one fact's value
    llm: bool = False
    dataset: str = ""  # set once ``{dataset}`` is filled in


@dataclass(frozen=True)
class Verdict:
    """A claim judged on one build: the paper's figure, ours with its interval, the standing and why."""

    claim: Claim
    paper: float | None
    ours: float | None
    low: float | None
    high: float | None
    facts: int | None
    standing: str
    detail: str = ""
    ceilings: dict[str, float] = field(default_factory=dict)


# ----------------------------------------------------------------------------- reading


def load_claims(directory: Path | None = None) -> list[Claim]:
    """Every chapter's ``claims:`` in file order; a malformed entry is an error naming the file and field."""
    claims = []
    for path in sorted((directory or REGRESSIONS_DIR).glob("*.yaml")):
        raw = read_yaml_file(path) or {}
        entries = raw.get("claims") or [] if isinstance(raw, dict) else []
        if not isinstance(entries, list):
            raise InputError("claims is a list of mappings", path=path, field="claims")
        for number, entry in enumerate(entries):
            claims.extend(_parsed(entry, path, path.stem, f"claims[{number}]"))
    return claims


def _parsed(entry: Any, path: Path, chapter: str, where: str) -> list[Claim]:
    if not isinstance(entry, dict):
        raise InputError("a claim is a mapping", path=path, field=where)
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}", path=path, field=where, fix=f"use {sorted(KEYS)}")
    for key in ("id", "claim", "section", "ours"):
        if not entry.get(key):
            raise InputError(f"missing {key!r}", path=path, field=f"{where}.{key}")
    kind = str(entry.get("kind", "difference"))
    if kind not in KINDS:
        raise InputError(f"kind {kind!r} is not one of {', '.join(KINDS)}", path=path, field=f"{where}.kind")
    ours, paper = _names(entry["ours"]), _names(entry.get("paper") or [])
    if not 1 <= len(ours) <= (2 if kind == "difference" else 1) or len(paper) > len(ours):
        raise InputError(
            "a difference names one or two metrics, a value one; the paper at most as many",
            path=path,
            field=f"{where}.ours",
        )
    direction = entry.get("direction", "greater")
    if direction not in ("greater", "less"):
        raise InputError(f"direction {direction!r} is greater or less", path=path, field=f"{where}.direction")
    bounds = entry.get("bounds", [0, 1])
    if not (
        isinstance(bounds, list)
        and len(bounds) == 2
        and all(isinstance(b, (int, float)) for b in bounds)
        and bounds[0] < bounds[1]
    ):
        raise InputError(f"bounds {bounds!r} is [low, high]", path=path, field=f"{where}.bounds")
    margin = entry.get("margin", 0.0)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 0:
        raise InputError(f"margin {margin!r} is a number >= 0", path=path, field=f"{where}.margin")
    base = Claim(
        id=str(entry["id"]),
        chapter=chapter,
        claim=str(entry["claim"]),
        section=str(entry["section"]),
        kind=kind,
        ours=ours,
        paper=paper,
        direction=1 if direction == "greater" else -1,
        margin=float(margin),
        facts=str(entry.get("facts", "")),
        bounds=(float(bounds[0]), float(bounds[1])),
        llm=bool(entry.get("llm", False)),
    )
    each = entry.get("each") or {}
    if not isinstance(each, dict) or len(each) > 1:
        raise InputError("each is one name with a list of values", path=path, field=f"{where}.each")
    if not each:
        return [base]
    ((name, values),) = each.items()
    return [_filled(base, {name: str(value)}, suffix=str(value)) for value in values]


def _names(raw: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in (raw if isinstance(raw, list) else [raw]))


def _filled(claim: Claim, words: Mapping[str, str], suffix: str = "") -> Claim:
    def fill(text: str) -> str:
        for name, value in words.items():
            text = text.replace("{" + name + "}", value)
        return text

    return Claim(
        **{
            **claim.__dict__,
            "id": f"{claim.id}/{suffix}" if suffix else claim.id,
            "claim": fill(claim.claim),
            "ours": tuple(map(fill, claim.ours)),
            "paper": tuple(map(fill, claim.paper)),
            "facts": fill(claim.facts),
            "dataset": words.get("dataset", claim.dataset),
        }
    )


def read_results(runs_dir: str | Path, profile: str) -> dict[str, dict[str, float]]:
    """Every chapter's saved values for ``profile`` (what the regression check compared), by chapter."""
    folder = results_path("x", profile, runs_dir).parent
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(folder.glob("*.json"))
        if not path.name.endswith(".inputs.json")
    }


# ----------------------------------------------------------------------------- expanding


def paper_datasets(results: Mapping[str, Mapping[str, float]]) -> bool:
    """Whether this build ran any of the paper's datasets (else it is a book of the user's own)."""
    return any(key.split("/", 1)[0] in PAPER_BENCHMARK for values in results.values() for key in values)


def expand(claims: list[Claim], results: Mapping[str, Mapping[str, float]]) -> list[Claim]:
    """Each ``{dataset}`` claim once per dataset its chapter ran; in a book without the paper's datasets,
    only those (a claim about a named dataset of the paper's is left out)."""
    own_book = not paper_datasets(results)
    out = []
    for claim in claims:
        if "{dataset}" not in claim.ours[0]:
            if not own_book:
                out.append(claim)
            continue
        chapter, metric = split_ref(claim.ours[0], claim.chapter)
        head, rest = metric.split("{dataset}", 1)
        ran = sorted(
            {
                key[len(head) : -len(rest)]
                for key in results.get(chapter, {})
                if key.startswith(head) and key.endswith(rest) and "/" not in key[len(head) : -len(rest)]
            }
        )
        for dataset in ran:
            benchmark = PAPER_BENCHMARK.get(dataset, "")
            if not benchmark and claim.kind == "value":
                continue  # a value claim is about the paper's figure, which a dataset of one's own lacks
            filled = _filled(claim, {"dataset": dataset, "benchmark": benchmark}, suffix=dataset)
            out.append(filled if benchmark else Claim(**{**filled.__dict__, "paper": ()}))
    return out


def split_ref(ref: str, chapter: str) -> tuple[str, str]:
    """``"09_stage_ceilings:fincl/pool/mrr"`` -> its chapter and metric; a bare metric is ``chapter``'s."""
    head, colon, tail = ref.partition(":")
    return (head, tail) if colon else (chapter, ref)


# ----------------------------------------------------------------------------- intervals


def wilson(mean: float, n: int, bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """Wilson's 95% score interval for a mean of ``n`` per-fact values within ``bounds``."""
    low, high = bounds
    p = min(max((mean - low) / (high - low), 0.0), 1.0)
    denominator = 1 + Z * Z / n
    centre = (p + Z * Z / (2 * n)) / denominator
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / denominator
    return low + (high - low) * max(centre - half, 0.0), low + (high - low) * min(centre + half, 1.0)


def newcombe(a: float, b: float, n: int, bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """Newcombe's hybrid score 95% interval for ``a - b`` (two means of ``n`` facts each)."""
    (la, ua), (lb, ub) = wilson(a, n, bounds), wilson(b, n, bounds)
    d = a - b
    return d - math.hypot(a - la, ub - b), d + math.hypot(ua - a, b - lb)


def facts_needed(effect: float, spread: float) -> int:
    """Facts for a 95% interval of half-width ``effect`` when one fact's difference has std ``spread``."""
    return math.ceil((Z * spread / effect) ** 2) if effect else 0


# ----------------------------------------------------------------------------- judging


def judge(claim: Claim, results: Mapping[str, Mapping[str, float]], profile: str) -> Verdict:
    """The claim's standing on ``results`` (chapter -> saved values) under ``profile``."""
    found = [_value(ref, claim.chapter, results) for ref in claim.ours]
    paper = [_paper(ref) for ref in claim.paper]
    given = [p for p in paper if p is not None]
    paper_value = (
        None if not paper or len(given) < len(paper) else (given[0] - given[1] if len(given) == 2 else given[0])
    )
    count = _value(claim.facts, claim.chapter, results) if claim.facts else None
    ceilings = _ceilings(claim, results)
    ours = [v for v in found if v is not None]
    if len(ours) < len(found) or count is None or count < 1:
        missing = "not measured in this build" if profile == "paper" else NEEDS
        return Verdict(
            claim,
            paper_value,
            None,
            None,
            None,
            None if count is None else int(count),
            missing,
            "this build has no value for it",
            ceilings,
        )
    n = int(count)
    value = ours[0] - ours[1] if len(ours) == 2 else ours[0]
    low, high = newcombe(ours[0], ours[1], n, claim.bounds) if len(ours) == 2 else wilson(value, n, claim.bounds)
    rule = _difference if claim.kind == "difference" else _value_claim
    return Verdict(
        claim,
        paper_value,
        value,
        low,
        high,
        n,
        *rule(claim, value, low, high, paper, paper_value, n),
        ceilings=ceilings,
    )


def _difference(
    claim: Claim, value: float, low: float, high: float, paper: list[float | None], effect: float | None, n: int
) -> tuple[str, str]:
    s = claim.direction
    lo, hi = sorted((s * low, s * high))
    shown = s * value
    if lo > 0:
        return HOLDS, f"the interval lies above zero (by {lo:.3f})"
    if hi < 0:
        return FAILS, f"reversed by {-shown:.3f} (the interval lies below zero)"
    target = None if effect is None else s * effect
    if target is not None and target > hi:
        return FAILS, f"ours falls short of the paper's {target:+.3f} by {target - shown:.3f}"
    half = (hi - lo) / 2
    if target and target > 0:
        spread = _spread(paper, claim) if len(paper) == 2 and None not in paper else half * math.sqrt(n) / Z
        return TOO_FEW, (
            f"interval ±{half:.3f} is wider than the paper's {target:+.3f}; "
            f"about {facts_needed(target, spread):,} facts would separate it"
        )
    return TOO_FEW, f"the interval (±{half:.3f}) crosses zero"


def _spread(paper: list[float | None], claim: Claim) -> float:
    """One fact's std of the difference if the two means were the paper's (independent, bounded per fact)."""
    low, high = claim.bounds
    variances = [(p - low) * (high - p) for p in paper if p is not None]
    return math.sqrt(sum(variances))


def _value_claim(
    claim: Claim, value: float, low: float, high: float, paper: list[float | None], target: float | None, n: int
) -> tuple[str, str]:
    if target is None:
        return TOO_FEW, "the paper gives no figure to compare"
    if target < low - claim.margin or target > high + claim.margin:
        gap = min(abs(target - low), abs(target - high)) - claim.margin
        return FAILS, f"the paper's {target:.3f} lies {gap:.3f} beyond our interval and the margin ±{claim.margin:g}"
    if (high - low) / 2 > claim.margin:
        return TOO_FEW, f"interval ±{(high - low) / 2:.3f} is wider than the margin ±{claim.margin:g}"
    return HOLDS, f"within ±{claim.margin:g} of the paper's {target:.3f}, allowing for the interval"


def _value(ref: str, chapter: str, results: Mapping[str, Mapping[str, float]]) -> float | None:
    where, metric = split_ref(ref, chapter)
    value = results.get(where, {}).get(metric)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _paper(ref: str) -> float | None:
    try:
        return lookup(ref)
    except LookupError:
        return None


def _ceilings(claim: Claim, results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Chapter 9's stages under a perfect model for the claim's dataset and metric (LLM claims only)."""
    if not claim.llm:
        return {}
    _, metric = split_ref(claim.ours[0], claim.chapter)
    dataset, name = metric.split("/", 1)[0], metric.rsplit("/", 1)[-1]
    values = results.get(CEILING_CHAPTER, {})
    return {
        stage: values[f"{dataset}/{stage}/{name}"] for stage in CEILING_STAGES if f"{dataset}/{stage}/{name}" in values
    }


def verdicts(results: Mapping[str, Mapping[str, float]], profile: str, directory: Path | None = None) -> list[Verdict]:
    """Every claim of every chapter, expanded over the datasets this build ran and judged."""
    return [judge(claim, results, profile) for claim in expand(load_claims(directory), results)]
