"""The oracle model: every model stage of FHS answered from the fact's gold concept, with seeded noise.

The gold-query probe (``fhs.method.gold_query``) asks how far the index reaches once
the query names the target. The oracle model asks the same of each stage that
FHS gives to a language model, so the method's architecture can be measured at
full scale with no model at all. It is an analysis tool: ``--backend oracle``
picks it, and no run profile can (``fhs.run.profiles``). What it knows, stage by
stage (``GOLD`` below is the fact's first gold concept in the taxonomy):

- **hypotheses**: on each dimension, ``GOLD``'s categories on the domain profile
  dimension of the same name (``fhs.data.domain``), ``UNRESOLVED`` where it has none
  or the domain profiles no such dimension (US-GAAP's ROLE and EVENT); the
  definition-style query is ``GOLD``'s label and definition, the gold-query
  probe's text without the id. It never copies the id. Every sample is the same.
- **verifier**: per window candidate and dimension, support where the candidate's
  categories equal ``GOLD``'s, abstain where both have none, contradict otherwise,
  whatever the hypothesis shown says.
- **selector**: ``GOLD`` (any gold, under the fact's match rule) where it is in the
  list shown, else the list's first candidate (the method's own top).

Noise (:class:`OracleNoise`) corrupts the first two: each dimension value is
replaced, with probability ``hypotheses``, by another of the domain's values or
``UNRESOLVED``, and the query, with the same probability, by the label and
definition of another concept of the fact's datatype; each support or
contradict verdict is flipped with probability ``verdicts`` (an abstention has
no side to flip). Draws come from a hash of the run seed and the request, one
uniform number per item whatever the level, so a run is reproducible and what is
corrupted at one level is corrupted at every higher one.

The model reads no prompt text: requests name their fact and the concepts they
list (``Request.fact_id``, ``Request.shown``) and it is handed the facts, so
the gold never travels in a request a served model could see.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fhs.core.errors import InputError
from fhs.data.domain import CategoryProfile, Domain
from fhs.data.facts import Fact, gold_match_of, matches_gold
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.contract import Request, Response, cache_key

BACKEND = "oracle"
# The purposes of FHS's model stages and the word for a dimension left open, as the method names them
# (fhs.method.hypotheses, verifier, selector); a model sits below the method, so tests hold the two equal.
HYPOTHESES, VERIFIER, SELECTOR = "hypothesis", "verifier", "selector"
STAGES = (HYPOTHESES, VERIFIER, SELECTOR)
UNRESOLVED = "UNRESOLVED"


@dataclass(frozen=True)
class OracleNoise:
    """How wrong the oracle is on purpose: the chance of corrupting a hypothesis item and of flipping a verdict."""

    hypotheses: float = 0.0
    verdicts: float = 0.0

    def __post_init__(self) -> None:
        for name in ("hypotheses", "verdicts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise InputError(
                    f"oracle noise {name} must be a probability from 0 to 1, got {value!r}",
                    field="oracle-noise",
                    fix="e.g. --oracle-noise hypotheses=0.25,verdicts=0.1",
                )
            object.__setattr__(self, name, float(value))

    @classmethod
    def parse(cls, text: str | None) -> OracleNoise:
        """``"hypotheses=P,verdicts=Q"`` (either may be left out; empty or None is no noise)."""
        given: dict[str, float] = {}
        for part in (text or "").split(","):
            if not part.strip():
                continue
            name, _, value = part.partition("=")
            name = name.strip()
            if name not in ("hypotheses", "verdicts") or not value.strip():
                raise InputError(
                    f"not an oracle noise setting: {part.strip()!r}",
                    field="oracle-noise",
                    fix="use hypotheses=P,verdicts=Q with probabilities from 0 to 1",
                )
            if name in given:
                raise InputError(f"oracle noise {name} is given twice", field="oracle-noise", fix=f"give {name}=P once")
            try:
                given[name] = float(value)
            except ValueError:
                raise InputError(
                    f"oracle noise {name} must be a number, got {value.strip()!r}", field="oracle-noise"
                ) from None
        return cls(**given)

    def __str__(self) -> str:
        return f"hypotheses={self.hypotheses:g},verdicts={self.verdicts:g}"


def value_text(categories: Sequence[str]) -> str:
    """A profile's categories as a dimension value: ``("closed", "unspecified")`` -> ``"closed, unspecified"``.

    Underscores and a metadata key's colon become spaces (``chapter:19`` -> ``chapter 19``)."""
    words = [" ".join(c.replace("_", " ").replace(":", " ").split()) for c in categories]
    return ", ".join(w for w in words if w) or UNRESOLVED


def query_text(concept: Concept) -> str:
    """The oracle's definition-style query body: the concept's label and definition (no id)."""
    return " ".join(part for part in (concept.label, concept.definition) if part)


class OracleModel:
    """The ``LLM`` protocol answered from the facts' gold (module docstring); no latency, no tokens."""

    # pure Python, and each draw a hash of the seed and the request: a forked copy answers alike,
    # so a run over many facts may split them between processes (fhs.run.runner.run_processes)
    fork_safe = True

    def __init__(
        self, facts: Iterable[Fact], taxonomy: Taxonomy, domain: Domain, noise: OracleNoise = OracleNoise()
    ) -> None:
        self.facts = {fact.id: fact for fact in facts}
        self.taxonomy, self.domain, self.noise = taxonomy, domain, noise
        self.model = BACKEND
        self.kind = BACKEND
        self.name = f"{BACKEND}:{noise}"
        self._profile_dims = {dim.name.upper(): i for i, dim in enumerate(domain.profile)}
        self._values: dict[str, tuple[str, ...]] | None = None
        self._by_type: dict[str, list[str]] | None = None

    # ---- what it knows ------------------------------------------------------------------
    def fact_of(self, request: Request) -> Fact:
        fact = self.facts.get(request.fact_id)
        if fact is None:
            raise InputError(
                f"the oracle was not given fact {request.fact_id!r}",
                field="backend",
                fix="build the oracle over the facts of the run (fhs.run.inputs)",
            )
        return fact

    def gold_of(self, request: Request) -> tuple[Fact, Concept | None]:
        """The request's fact and its first gold concept in the taxonomy (under a prefix gold, the first
        concept below it); None when the taxonomy has none."""
        fact = self.fact_of(request)
        gold = next((self.taxonomy[g] for g in fact.gold if g in self.taxonomy), None)
        if gold is None and gold_match_of(fact) == "prefix":  # the first concept under the prefix
            gold = next((under[0] for g in fact.gold if (under := self.taxonomy.under(g))), None)
        return fact, gold

    def categories(self, concept: Concept | None, dimension: str) -> tuple[str, ...]:
        """``concept``'s categories on the profile dimension named like ``dimension`` (none if unprofiled)."""
        index = self._profile_dims.get(dimension.upper())
        if concept is None or index is None:
            return ()
        profile: CategoryProfile = self.domain.profile_of(concept)
        return profile[index][1]

    def values(self, dimension: str) -> tuple[str, ...]:
        """The values a corrupted ``dimension`` may take: every category the domain has for it, and UNRESOLVED."""
        if self._values is None:
            self._values = {}
            for dim in self.domain.profile:
                names = [value_text((name,)) for name, _ in dim.categories]
                if dim.from_metadata:
                    found = {str(c.metadata.get(dim.from_metadata) or "").strip() for c in self.taxonomy}
                    names += [value_text((f"{dim.from_metadata}:{v}",)) for v in sorted(found) if v]
                self._values[dim.name.upper()] = tuple(dict.fromkeys(names))
        return (*self._values.get(dimension.upper(), ()), UNRESOLVED)

    def same_type(self, datatype: str) -> list[str]:
        """Concept ids of ``datatype``, or every concept id when fewer than two have it: where a
        corrupted query comes from."""
        if self._by_type is None:
            self._by_type = {"": [c.id for c in self.taxonomy]}
            for concept in self.taxonomy:
                self._by_type.setdefault(f"type:{concept.datatype}", []).append(concept.id)
        found = self._by_type.get(f"type:{datatype}", [])
        return found if len(found) > 1 else self._by_type[""]

    # ---- the three stages ---------------------------------------------------------------
    def hypothesis(self, request: Request, rng: random.Random) -> dict[str, Any]:
        fact, gold = self.gold_of(request)
        if gold is None:
            return {}  # nothing to copy: unparseable, so FHS searches with its fallback (the raw fact)
        p = self.noise.hypotheses
        dimensions = {}
        for name in self.domain.dimension_names:
            value = value_text(self.categories(gold, name))
            u, others = rng.random(), [v for v in self.values(name) if v != value]
            pick = rng.choice(others) if others else value  # drawn whatever p is: levels stay coupled
            dimensions[name] = pick if u < p else value
        u, pool = rng.random(), self.same_type(fact.datatype)
        at = rng.randrange(len(pool))
        if pool[at] == gold.id:  # another concept: the next one
            at = (at + 1) % len(pool)
        query = query_text(self.taxonomy[pool[at]] if u < p else gold) or gold.id
        return {"dimensions": dimensions, "operators": ["direct_label"], "retrieval_query": query}

    def verdicts(self, request: Request, rng: random.Random) -> dict[str, Any]:
        _, gold = self.gold_of(request)
        codes = []
        for cid in request.shown:
            candidate = self.taxonomy.get(cid)
            if candidate is None:  # an unknown id is shown as itself (fhs.method.verifier.concept_or_stub)
                candidate = Concept(id=cid, label=cid)
            code = ""
            for name in self.domain.dimension_names:
                want, have = self.categories(gold, name), self.categories(candidate, name)
                letter = "A" if gold is None or (not want and not have) else "S" if want == have else "C"
                if rng.random() < self.noise.verdicts and letter != "A":
                    letter = "C" if letter == "S" else "S"
                code += letter
            codes.append(code)
        return {"verdicts": codes}

    def selection(self, request: Request) -> dict[str, Any]:
        fact = self.fact_of(request)
        rule = gold_match_of(fact)
        index = next((i for i, cid in enumerate(request.shown, start=1) if matches_gold(cid, fact.gold, rule)), 1)
        return {"selected_index": index, "ranked_indices": [index]}

    def answer(self, request: Request) -> dict[str, Any]:
        digest = bytes.fromhex(cache_key(BACKEND, BACKEND, request))  # not the noise: levels share draws
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if request.purpose == HYPOTHESES:
            return self.hypothesis(request, rng)
        if request.purpose == VERIFIER:
            return self.verdicts(request, rng)
        if request.purpose == SELECTOR:
            return self.selection(request)
        raise InputError(
            f"the oracle answers only FHS's stages ({', '.join(STAGES)}), not {request.purpose!r}",
            field="backend",
            fix="use --backend oracle with --method fhs, structured or direct",
        )

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        return [
            Response(text=json.dumps(self.answer(r), ensure_ascii=False), model=self.model, finish_reason="stop")
            for r in requests
        ]


def oracle_for(
    facts: Iterable[Fact],
    taxonomy: Taxonomy,
    domain: Domain,
    noise: OracleNoise | Mapping[str, float] | str | None = None,
) -> OracleModel:
    """The oracle over a run's facts, with ``noise`` given as an :class:`OracleNoise`, a mapping or its text."""
    if noise is None or isinstance(noise, str):
        noise = OracleNoise.parse(noise)
    elif not isinstance(noise, OracleNoise):
        noise = OracleNoise(**noise)
    return OracleModel(facts, taxonomy, domain, noise)
