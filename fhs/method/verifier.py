"""The candidate-level verifier (Section 4.4): dimension verdicts, support, consensus, Eq. 3.

For each hypothesis h_j an LLM judges every candidate of a window B on every
named dimension: support, contradict (the paper's "no support") or
unresolved (abstain). It never picks an answer. From those verdicts:

    v_j(c)  = supports / non-abstaining verdicts        (Section 4.4; variants below)
    v_j(c)  = mean of v_j over the judged window        for unjudged candidates ("mean" fill)
    v̄(c)    = (1/J) sum_j v_j(c)                        (Eq. 2)
    score(c) = S~(c) + beta * v̄(c)                      (Eq. 3)

so the verifier only reorders the fused pool. Scoring variants:

- ``paper``: count only the dimensions the hypothesis resolved (an unresolved
  dimension is "excluded from later scoring") and the verifier did not abstain on;
- ``code``: count every dimension the verifier did not abstain on (the authors' code);
- ``strict``: abstentions count as non-support, denominator = all dimensions.

A candidate with no countable verdict is *unjudged* and receives the fill.
The window is built once per fact from the fused order and shared by all
hypotheses: it scans the top ``max(scan, k_v)`` candidates and keeps the first
(highest-ranked) candidate of each new category profile, then fills any
remaining slots by rank from the scanned list (``rank`` variant: plain top k_v).

Scoring (``score_pool``: v_j, the fill, Eq. 2, Eq. 3) is a pure function of
verdicts in hand. The calls that produce them (``fhs.method.fhs.ask_verifier``)
take a ``Verification`` and return one ``Judged`` per asked hypothesis, so a
``KnownVerdicts`` (the run layer's verdict ledger) can wrap them from outside
the method.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Protocol

from fhs.data.domain import CategoryProfile, Domain
from fhs.data.evidence import evidence_block
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.contract import LLM, Request
from fhs.llm.jsonout import MAX_REPLY_CHARS, parse_array, parse_object
from fhs.method.config import FHSConfig
from fhs.method.hypotheses import Hypothesis
from fhs.method.prompting import (
    DEFAULT_ORDER,
    Budget,
    clip,
    context_ladder,
    fact_messages,
    fit_to_budget,
    last_resort,
    render,
)
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import FusedPool

PURPOSE = "verifier"
# Hypothesis.source of a reading that is one free-text description, not a partial assignment
DESCRIPTION_SOURCE = "description"

# Every template a verifier request is rendered from (fhs/method/prompts/): the verdict ledger keys by them.
VERIFIER_TEMPLATES = (
    "system",
    "verifier",
    "verifier_rules",
    "verifier_answer",
    "verifier_rules_compact",
    "verifier_answer_compact",
    "verifier_description",
)
VERDICT_LABELS = ("support", "contradict", "unresolved")
# The compact answer: one letter per dimension, in the domain's order (book/deviations.md).
CODE_LETTERS = ("S", "C", "A")
_CODE_VALUES: dict[str, bool | None] = {"S": True, "C": False, "A": None, "U": None}
_SUPPORT = {"support", "supports", "supported", "yes", "true"}
_CONTRADICT = {
    "contradict",
    "contradicts",
    "contradicted",
    "contradiction",
    "no support",
    "no_support",
    "not supported",
    "unsupported",
    "no",
    "false",
}
_ID_KEYS = ("id", "concept_id", "concept", "tag", "candidate", "candidate_id")
_RANK_KEYS = ("rank", "index", "candidate_index")


# ---- the window -----------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The K_v candidates the verifier sees, in fused order, with the profiles that chose them."""

    ids: tuple[str, ...]
    profiles: tuple[CategoryProfile, ...]
    variant: str
    scanned: int  # how many fused candidates were scanned
    distinct_profiles: int  # distinct signatures among the scanned candidates

    def to_dict(self) -> dict[str, Any]:
        return {
            "ids": list(self.ids),
            "profiles": [{dim: list(cats) for dim, cats in profile} for profile in self.profiles],
            "variant": self.variant,
            "scanned": self.scanned,
            "distinct_profiles": self.distinct_profiles,
        }


def concept_or_stub(taxonomy: Taxonomy | None, concept_id: str) -> Concept:
    """The concept, or a bare stand-in whose label is its id (never fails on an unknown id)."""
    concept = taxonomy.get(concept_id) if taxonomy is not None else None
    return concept if concept is not None else Concept(id=concept_id, label=concept_id)


def build_window(
    pool: FusedPool | Sequence[str],
    taxonomy: Taxonomy | None,
    domain: Domain,
    k_v: int = 10,
    scan: int = 60,
    variant: str = "profile",
) -> Window:
    """Choose the verifier window from the fused order (module docstring has the rule)."""
    ids = list(pool.ids if isinstance(pool, FusedPool) else pool)
    if variant not in ("profile", "rank"):
        raise ValueError(f"window variant must be 'profile' or 'rank', got {variant!r}")
    scanned = ids[: max(scan, k_v)] if variant == "profile" else ids[:k_v]
    profiles = {cid: domain.profile_of(concept_or_stub(taxonomy, cid)) for cid in scanned}
    if variant == "rank":
        chosen = scanned[:k_v]
    else:
        chosen, seen = [], set()
        for cid in scanned:
            if profiles[cid] not in seen:
                seen.add(profiles[cid])
                chosen.append(cid)
                if len(chosen) == k_v:
                    break
        if len(chosen) < k_v:  # too few distinct profiles: fill by rank from the scanned list
            taken = set(chosen)
            chosen += [cid for cid in scanned if cid not in taken][: k_v - len(chosen)]
    position = {cid: i for i, cid in enumerate(ids)}
    chosen.sort(key=position.__getitem__)
    return Window(
        ids=tuple(chosen),
        profiles=tuple(profiles[cid] for cid in chosen),
        variant=variant,
        scanned=len(scanned),
        distinct_profiles=len(set(profiles.values())),
    )


# ---- the prompt -------------------------------------------------------------------


def candidate_line(number: int, concept: Concept, definition_chars: int, label_chars: int | None = None) -> str:
    """``[number] id / datatype / label / definition`` with the definition (and, last resort, the label) cut."""
    label = concept.label or concept.id
    if label_chars is not None and len(label) > label_chars:
        label = clip(label, label_chars)
    parts = [f"[{number}] {concept.id}", concept.datatype or "-", label]
    definition = clip(concept.definition, definition_chars)
    if definition:
        parts.append(definition)
    return " / ".join(parts)


def verifier_schema(domain: Domain, window_ids: Sequence[str], compact: bool = True) -> dict[str, Any]:
    """Exactly one entry per window candidate, in the window's order.

    A fixed-length array keeps constrained decoding from stopping after the
    first candidate (small models otherwise close the list early) or judging
    one candidate twice. Compact: each entry is a code of one letter per
    dimension (``S``/``C``/``A``) in the domain's order; verbose: an object with
    the candidate's id and one word per dimension. The authors' prompt also
    asked for a confidence that no score ever read; leaving it out saves
    generated tokens on every entry.
    """
    names = list(domain.dimension_names)

    def entry(cid: str) -> dict[str, Any]:
        if compact:
            return {"type": "string", "pattern": f"^[{''.join(CODE_LETTERS)}]{{{len(names)}}}$"}
        return {
            "type": "object",
            "properties": {
                "id": {"type": "string", "enum": [cid]},
                **{name: {"type": "string", "enum": list(VERDICT_LABELS)} for name in names},
            },
            "required": ["id", *names],
        }

    # Position i judges the i-th window candidate: only verdicts are generated.
    verdicts = {
        "type": "array",
        "prefixItems": [entry(cid) for cid in window_ids],
        "minItems": len(window_ids),
        "maxItems": len(window_ids),
    }
    return {"type": "object", "properties": {"verdicts": verdicts}, "required": ["verdicts"]}


def interpretation_lines(hypothesis: Hypothesis, names: Sequence[str]) -> str:
    """What the verifier reads as the interpretation: one line per dimension, or a free-text description.

    A reading built from an unfactorized sample (``source == DESCRIPTION_SOURCE``,
    Table 6's free-text ensemble + verifier, ``fhs/method/parallel_verified.py``)
    is shown as its description, and every dimension is judged against it.
    """
    if hypothesis.source == DESCRIPTION_SOURCE:
        return render("verifier_description", description=hypothesis.retrieval_query).strip()
    return "\n".join(f"{name}: {hypothesis.value(name)}" for name in names)


def verifier_prompt(
    fact: Fact,
    hypothesis: Hypothesis,
    candidates: Sequence[Concept],
    domain: Domain,
    context_chars: int,
    definition_chars: int,
    field_chars: int | None = None,
    label_chars: int | None = None,
    compact: bool = True,
    order: str = DEFAULT_ORDER,
) -> str:
    """Instructions, evidence, then the candidates (shared by the J calls), the hypothesis last."""
    names = domain.dimension_names
    if compact:
        rules = render("verifier_rules_compact", order=order)
        answer = render("verifier_answer_compact", order=order, dimension_order=", ".join(names))
    else:
        rules = render("verifier_rules", order=order)
        answer = render(
            "verifier_answer",
            order=order,
            verdict_skeleton=", ".join(f'"{name}": "support|contradict|unresolved"' for name in names),
        )
    return render(
        "verifier",
        order=order,
        evidence_kind=domain.evidence,
        evidence=evidence_block(fact, context_chars, field_chars, order),
        hypothesis_lines=interpretation_lines(hypothesis, names),
        dimension_lines="\n".join(f"- {d.name}: {d.verifier_gloss}" for d in domain.dimensions),
        taxonomy=domain.taxonomy,
        candidate_lines="\n".join(
            candidate_line(i, c, definition_chars, label_chars) for i, c in enumerate(candidates, start=1)
        ),
        verdict_rules=rules.strip(),
        answer_format=answer.strip(),
    )


def verifier_max_tokens(config: FHSConfig, window_size: int, n_dimensions: int) -> int:
    """The generation budget: the configured one, capped for codes at what a full answer needs."""
    if not config.compact_outputs:
        return config.max_tokens_verifier
    return min(config.max_tokens_verifier, 16 + window_size * (n_dimensions + 4))


def verifier_request(
    fact: Fact, hypothesis: Hypothesis, window: Window, taxonomy: Taxonomy | None, domain: Domain, config: FHSConfig
) -> Request:
    """One greedy verifier call for one hypothesis over the window, within its token budget."""
    candidates = [concept_or_stub(taxonomy, cid) for cid in window.ids]
    ladder = [
        {**rung, "definition_chars": config.definition_chars} for rung in context_ladder(config.context_chars)
    ] + last_resort(config.context_chars, labels=True, definition_chars=0)
    compact, order = config.compact_outputs, config.prompt_order
    max_tokens = verifier_max_tokens(config, len(window.ids), len(domain.dimension_names))
    fitted = fit_to_budget(
        lambda context_chars, definition_chars, field_chars=None, label_chars=None: fact_messages(
            verifier_prompt(
                fact,
                hypothesis,
                candidates,
                domain,
                context_chars,
                definition_chars,
                field_chars,
                label_chars,
                compact,
                order,
            ),
            order,
        ),
        ladder,
        Budget(config.verifier_prompt_tokens, max_tokens, config.context_tokens),
        what=f"fact {fact.id}: the {PURPOSE} prompt",
    )
    return Request(
        messages=fitted.messages,
        temperature=0.0,
        top_p=1.0,
        seed=config.seed,
        max_tokens=max_tokens,
        schema=verifier_schema(domain, window.ids, compact) if config.json_schema else None,
        purpose=PURPOSE,
        shortened=fitted.shortened,
        fact_id=fact.id,
        shown=tuple(window.ids),
    )


# ---- parsing ---------------------------------------------------------------------


@dataclass(frozen=True)
class Verdicts:
    """The verifier's rulings on one candidate: per dimension True (support), False (contradict) or None (abstain)."""

    id: str
    rulings: tuple[tuple[str, bool | None], ...]
    confidence: float | None = None

    def ruling(self, name: str) -> bool | None:
        for dim, value in self.rulings:
            if dim == name:
                return value
        return None

    def to_dict(self) -> dict[str, str]:
        return {dim: _NAMES[value] for dim, value in self.rulings}

    @classmethod
    def from_dict(cls, candidate_id: str, entry: Mapping[str, str], dimensions: Sequence[str]) -> Verdicts:
        """Back from ``to_dict`` (a record's or the verdict ledger's entry); a missing dimension abstains."""
        values = {name: value for value, name in _NAMES.items()}
        return cls(
            id=candidate_id, rulings=tuple((name, values.get(entry.get(name, "abstain"))) for name in dimensions)
        )


_NAMES = {True: "support", False: "contradict", None: "abstain"}


def verdict_value(text: Any) -> bool | None:
    """support -> True, contradict/no support -> False, anything else -> abstain (None)."""
    if isinstance(text, bool):
        return text
    if not isinstance(text, str):
        return None
    key = " ".join(text.strip().lower().replace("-", " ").split())
    if key in _SUPPORT:
        return True
    if key in _CONTRADICT or key.replace(" ", "_") in _CONTRADICT:
        return False
    return None


def _id_matcher(window_ids: Sequence[str]):
    exact = set(window_ids)
    folded: dict[str, str] = {}
    loose: dict[str, list[str]] = {}
    for cid in window_ids:
        folded.setdefault(cid.lower(), cid)
        bare = cid.split(":", 1)[-1]
        loose.setdefault("".join(ch for ch in bare.lower() if ch.isalnum()), []).append(cid)

    def match(raw: Any) -> str | None:
        if not isinstance(raw, (str, int)) or isinstance(raw, bool):
            return None
        text = str(raw).strip()
        if text in exact:
            return text
        if text.lower() in folded:
            return folded[text.lower()]
        key = "".join(ch for ch in text.split(":", 1)[-1].lower() if ch.isalnum())
        hits = loose.get(key, [])
        return hits[0] if len(hits) == 1 else None

    return match


def parse_verdicts(
    text: str,
    window_ids: Sequence[str],
    dimensions: Sequence[str] = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL"),
) -> dict[str, Verdicts]:
    """Map a verifier reply, compact or verbose, to per-candidate verdicts (see ``read_verdicts``)."""
    return read_verdicts(text, window_ids, dimensions)[0]


def read_verdicts(
    text: str,
    window_ids: Sequence[str],
    dimensions: Sequence[str] = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL"),
) -> tuple[dict[str, Verdicts], int]:
    """Per-candidate verdicts and the number of malformed codes; complete entries of a cut-off reply are kept.

    Compact replies (``{"verdicts": ["SSCAAS", ...]}``) are read by position: the
    i-th code judges the i-th window candidate, one letter per dimension in
    ``dimensions`` order (S support, C contradict, A or U abstain; case and
    separators ignored). A code of the wrong length or with another letter is
    malformed: counted, and its candidate stays unjudged (it gets the fill).
    Verbose entries are matched to window candidates by id (exact,
    case-folded, then ignoring a ``prefix:`` namespace and punctuation), else by
    a 1-based ``rank``/``index``. Unmatched entries are ignored; the first entry
    for a candidate wins. Returns ({}, 0) when nothing usable was found (and for a
    reply over ``MAX_REPLY_CHARS``, which no stage parses).
    """
    if len(text or "") > MAX_REPLY_CHARS:
        return {}, 0
    payload = parse_object(text)
    entries: list[Any]
    if isinstance(payload, dict) and isinstance(payload.get("verdicts"), list):
        entries = payload["verdicts"]
    else:
        entries = parse_array(text) or _cut_codes(text)  # a cut-off reply keeps its complete entries
    if entries and all(isinstance(entry, str) for entry in entries):
        return _read_codes(entries, window_ids, dimensions)
    match = _id_matcher(window_ids)
    result: dict[str, Verdicts] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        cid = next((match(entry[k]) for k in _ID_KEYS if k in entry and match(entry[k])), None)
        if cid is None:
            for key in _RANK_KEYS:
                raw = entry.get(key)
                if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= len(window_ids):
                    cid = window_ids[raw - 1]
                    break
        if cid is None or cid in result:
            continue
        nested = entry.get("dimensions")
        block = nested if isinstance(nested, dict) else entry
        upper = {str(k).strip().upper(): v for k, v in block.items()}
        confidence = entry.get("confidence")
        result[cid] = Verdicts(
            id=cid,
            rulings=tuple((name, verdict_value(upper.get(name.upper()))) for name in dimensions),
            confidence=(
                float(confidence) if isinstance(confidence, (int, float)) and not isinstance(confidence, bool) else None
            ),
        )
    return result, 0


def code_rulings(code: str, dimensions: Sequence[str]) -> tuple[tuple[str, bool | None], ...] | None:
    """``"SSCAAS"`` -> one ruling per dimension in order; None for a malformed code."""
    letters = [ch for ch in code.upper() if ch.isalpha()]
    if len(letters) != len(dimensions) or any(ch not in _CODE_VALUES for ch in letters):
        return None
    return tuple((name, _CODE_VALUES[ch]) for name, ch in zip(dimensions, letters))


def _read_codes(
    codes: Sequence[str], window_ids: Sequence[str], dimensions: Sequence[str]
) -> tuple[dict[str, Verdicts], int]:
    result: dict[str, Verdicts] = {}
    malformed = 0
    for cid, code in zip(window_ids, codes):
        rulings = code_rulings(code, dimensions)
        if rulings is None:
            malformed += 1
        else:
            result[cid] = Verdicts(id=cid, rulings=rulings)
    return result, malformed


def _cut_codes(text: str) -> list[str]:
    """The complete quoted codes of a compact reply cut off before its closing brackets."""
    found = re.search(r'"verdicts"\s*:\s*\[', text or "")
    return re.findall(r'"([^"\\]*)"', text[found.end() :]) if found else []


# ---- scoring ---------------------------------------------------------------------


def candidate_support(verdicts: Verdicts, hypothesis: Hypothesis, variant: str = "paper") -> float | None:
    """v_j(c) for one judged candidate, or None if no verdict counts (the candidate is unjudged)."""
    if variant == "strict":
        if not verdicts.rulings:
            return None
        return sum(1 for _, value in verdicts.rulings if value is True) / len(verdicts.rulings)
    if variant == "paper":
        counted = [verdicts.ruling(name) for name in hypothesis.resolved]
    elif variant == "code":
        counted = [value for _, value in verdicts.rulings]
    else:
        raise ValueError(f"scoring variant must be 'paper', 'code' or 'strict', got {variant!r}")
    ruled = [value for value in counted if value is not None]
    return sum(ruled) / len(ruled) if ruled else None


def support(verdicts: Mapping[str, Verdicts], hypothesis: Hypothesis, variant: str = "paper") -> dict[str, float]:
    """v_j(c) for every judged candidate (unjudged ones are left out; see ``fill_support``)."""
    scores: dict[str, float] = {}
    for cid, entry in verdicts.items():
        value = candidate_support(entry, hypothesis, variant)
        if value is not None:
            scores[cid] = value
    return scores


def fill_value(judged: Mapping[str, float], fill: str = "mean") -> float:
    """What an unjudged candidate gets: the mean judged support (0 if none), or 0."""
    if fill == "zero":
        return 0.0
    if fill != "mean":
        raise ValueError(f"fill must be 'mean' or 'zero', got {fill!r}")
    return fmean(judged.values()) if judged else 0.0


def fill_support(judged: Mapping[str, float], pool_ids: Sequence[str], fill: str = "mean") -> dict[str, float]:
    """v_j over the whole pool: judged values kept, every other candidate gets the fill."""
    default = fill_value(judged, fill)
    return {cid: judged.get(cid, default) for cid in pool_ids}


def consensus(per_hypothesis: Sequence[Mapping[str, float]], pool_ids: Sequence[str]) -> dict[str, float]:
    """v̄(c): the mean of the filled v_j(c) over the J hypotheses (Eq. 2); 0 with no hypotheses."""
    if not per_hypothesis:
        return {cid: 0.0 for cid in pool_ids}
    return {cid: fmean(v[cid] for v in per_hypothesis) for cid in pool_ids}


def final_scores(pool: FusedPool, vbar: Mapping[str, float], beta: float) -> Ranking:
    """Eq. 3: S~(c) + beta * v̄(c) over the pool, best first, ties by id. Only reorders the pool."""
    scored = [(s + beta * vbar.get(cid, 0.0), cid) for cid, s in zip(pool.ids, pool.normalized)]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return Ranking(ids=tuple(cid for _, cid in scored), scores=tuple(score for score, _ in scored))


@dataclass(frozen=True)
class Scored:
    """Eq. 2 and Eq. 3 over one fused pool: each hypothesis's filled v_j, its fill, v̄ and the final order."""

    ranking: Ranking
    support: list[dict[str, float]]  # v_j(c) over the whole pool, one per hypothesis
    fills: list[float]
    judged: list[int]  # candidates with a countable verdict, per hypothesis
    vbar: dict[str, float]


def score_pool(
    pool: FusedPool, hypotheses: Sequence[Hypothesis], verdicts: Sequence[Mapping[str, Verdicts]], config: FHSConfig
) -> Scored:
    """Section 4.4 on verdicts already in hand: v_j per hypothesis, the fill, v̄ (Eq. 2), the order (Eq. 3).

    A pure function: the verdicts may come from a model call, a record or the run layer's verdict ledger,
    and the same verdicts give the same order (re-scoring a run calls nothing).
    """
    per_hypothesis, fills, judged_counts = [], [], []
    for hypothesis, found in zip(hypotheses, verdicts):
        judged = support(found, hypothesis, config.scoring)
        per_hypothesis.append(fill_support(judged, pool.ids, config.fill))
        fills.append(fill_value(judged, config.fill))
        judged_counts.append(len(judged))
    vbar = consensus(per_hypothesis, pool.ids)
    return Scored(final_scores(pool, vbar, config.beta), per_hypothesis, fills, judged_counts, vbar)


# ---- one fact's verifier calls -------------------------------------------------------

# One candidate's verdicts as recorded (``Verdicts.to_dict``); None: asked in a complete reply that named it not.
Entry = dict[str, str] | None


@dataclass(frozen=True)
class Verification:
    """One fact's verifier stage: the window, the hypotheses, which of them are asked, and who answers."""

    fact: Fact
    hypotheses: tuple[Hypothesis, ...]
    window: Window
    asks: tuple[int, ...]  # the hypotheses asked about (``paper`` scoring skips one that resolved nothing)
    llm: LLM
    taxonomy: Taxonomy | None
    domain: Domain
    config: FHSConfig


@dataclass(frozen=True)
class Judged:
    """One asked hypothesis's verdicts on the window: those known before its call, and those its call parsed."""

    known: dict[str, Entry]  # window candidate -> verdicts known before the call
    asked: tuple[str, ...] = ()  # the candidates its call asked about (none when every one was known)
    fresh: dict[str, Verdicts] = field(default_factory=dict)
    malformed: int = 0  # codes that named no verdict per dimension: their candidates take the fill
    cut: bool = False  # the reply was cut at max_tokens: the candidates after its last entry took the fill
    call: dict[str, Any] | None = None  # the call's line in the record

    def verdicts(self, dimensions: Sequence[str]) -> dict[str, Verdicts]:
        """Known and fresh verdicts together, in the window's order then the reply's."""
        found = {cid: Verdicts.from_dict(cid, entry, dimensions) for cid, entry in self.known.items() if entry}
        found.update(self.fresh)
        return found

    def learned(self) -> dict[str, Entry]:
        """What a later run may reuse: each parsed verdict and, unless the reply was cut, each candidate asked
        about that it named none for (asking again would replay the same reply). Nothing from an unparsed reply,
        which is asked again."""
        if not self.fresh:
            return {}
        return {
            cid: self.fresh[cid].to_dict() if cid in self.fresh else None
            for cid in self.asked
            if cid in self.fresh or not self.cut
        }


# Asks the model about the window candidates not known for each asked hypothesis (``fhs.method.fhs.ask_verifier``).
Ask = Callable[[Verification, Mapping[int, Mapping[str, Entry]]], dict[int, Judged]]


class KnownVerdicts(Protocol):
    """Verdicts judged before (the run layer's verdict ledger, ``fhs.run.ledger``): it finds what it knows for
    each asked hypothesis, lets ``ask`` call the model about the rest, and keeps what the calls learned."""

    def judge(self, verification: Verification, ask: Ask) -> dict[int, Judged]: ...
