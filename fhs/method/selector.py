"""The shared listwise selector: one greedy call picks the final answer (the "Acc." column).

Every method hands its final candidate order to the same selector (Appendix
B.5), so accuracy differences come from the candidate lists, not from the
selector. The model sees the evidence and up to K candidates, numbered in the
method's order, and returns ``selected_index`` plus up to 20 ``ranked_indices``.
The final list is: the selected candidate, then the other ranked ones, then
the rest in the method's order. If the reply is unusable, the method's order
is kept unchanged (a documented fallback: Acc. then equals Recall@1).

``FHSConfig.selector_layout="by-id"`` numbers the candidates in concept-id order and
gives the method's order as a list of those numbers (``prompts/selector_by_id.txt``):
requests about one fact then share the candidate block as a prefix a server caches.
The answer's numbers point into the list shown (``Request.shown``) and are mapped back
to the method's order before the final list is built (book/deviations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fhs.data.domain import Domain
from fhs.data.evidence import evidence_block
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import LLM, Request, Response
from fhs.llm.jsonout import parse_object
from fhs.method.config import SELECTOR_LAYOUTS, FHSConfig
from fhs.method.prompting import DEFAULT_ORDER, Budget, Fitted, fact_messages, fit_to_budget, last_resort, render
from fhs.method.verifier import candidate_line, concept_or_stub

PURPOSE = "selector"
# (context characters, definition characters), tried in order until the prompt fits.
SHRINK_LADDER = ((12_000, 320), (8_000, 240), (5_000, 120), (5_000, 0))


@dataclass(frozen=True)
class Selection:
    """The selector's answer as 1-based positions in the method's order (``parse_selection``: in the list shown)."""

    selected_index: int
    ranked_indices: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"selected_index": self.selected_index, "ranked_indices": list(self.ranked_indices)}


# The answer's shape: the compact one leaves out the echoed id (parse_selection never needs it).
ANSWER_SHAPES = {
    True: '{"selected_index": <number>, "ranked_indices": [<number>, ...]}',
    False: '{"selected_index": <number>, "selected_id": "<id>", "ranked_indices": [<number>, ...]}',
}


def selector_prompt(
    fact: Fact,
    ids: Sequence[str],
    taxonomy: Taxonomy | None,
    domain: Domain,
    context_chars: int = 12_000,
    definition_chars: int = 320,
    max_ranked: int = 20,
    field_chars: int | None = None,
    label_chars: int | None = None,
    compact: bool = True,
    order: str = DEFAULT_ORDER,
    layout: str = "ranked",
) -> str:
    """The task and answer shape, the evidence, then the numbered candidates (the part that differs);
    with ``layout="by-id"`` the candidates in id order, then the method's order as their numbers."""
    listed = shown_order(ids, layout)
    lines = "\n".join(
        candidate_line(i, concept_or_stub(taxonomy, cid), definition_chars, label_chars)
        for i, cid in enumerate(listed, start=1)
    )
    fields = {
        "evidence_kind": domain.evidence,
        "evidence": evidence_block(fact, context_chars, field_chars, order),
        "taxonomy": domain.taxonomy,
        "candidate_lines": lines,
        "max_ranked": str(max_ranked),
        "answer_shape": ANSWER_SHAPES[compact],
    }
    if layout == "ranked":
        return render("selector", order=order, **fields)
    number = {cid: i for i, cid in reversed(list(enumerate(listed, start=1)))}
    return render("selector_by_id", order=order, ranking=" ".join(str(number[cid]) for cid in ids), **fields)


def shown_order(ids: Sequence[str], layout: str) -> list[str]:
    """The candidates in the order the prompt numbers them: the method's, or sorted by concept id."""
    if layout not in SELECTOR_LAYOUTS:
        raise ValueError(f"selector layout must be one of {SELECTOR_LAYOUTS}, got {layout!r}")
    return sorted(ids) if layout == "by-id" else list(ids)


def to_method_order(selection: Selection | None, listed: Sequence[str], ids: Sequence[str]) -> Selection | None:
    """A selection read against the ``listed`` numbering, as positions in the method's ``ids``."""
    if selection is None or list(listed) == list(ids):
        return selection
    position = {cid: i for i, cid in reversed(list(enumerate(ids, start=1)))}
    ranked = tuple(dict.fromkeys(position[listed[i - 1]] for i in selection.ranked_indices))
    return Selection(position[listed[selection.selected_index - 1]], ranked)


def selector_schema(n: int, max_ranked: int = 20, compact: bool = True) -> dict[str, Any]:
    index = {"type": "integer", "minimum": 1, "maximum": max(n, 1)}
    properties: dict[str, Any] = {"selected_index": index}
    if not compact:
        properties["selected_id"] = {"type": "string"}
    properties["ranked_indices"] = {"type": "array", "items": index, "maxItems": max_ranked}
    return {"type": "object", "properties": properties, "required": ["selected_index", "ranked_indices"]}


def selector_request(
    fact: Fact, ids: Sequence[str], taxonomy: Taxonomy | None, domain: Domain, config: FHSConfig
) -> tuple[Request, Fitted]:
    """The greedy selector call over the head of ``ids``; also returns how its prompt was fitted."""
    shown = list(ids[: config.selector_candidates])
    ladder = [
        {"context_chars": min(c, config.context_chars), "definition_chars": min(d, config.definition_chars)}
        for c, d in SHRINK_LADDER
    ] + last_resort(config.context_chars, labels=True, definition_chars=0)
    order, layout = config.prompt_order, config.selector_layout
    fitted = fit_to_budget(
        lambda context_chars, definition_chars, field_chars=None, label_chars=None: fact_messages(
            selector_prompt(
                fact,
                shown,
                taxonomy,
                domain,
                context_chars,
                definition_chars,
                config.selector_max_ranked,
                field_chars,
                label_chars,
                config.compact_outputs,
                order,
                layout,
            ),
            order,
        ),
        ladder,
        Budget(config.selector_prompt_tokens, config.max_tokens_selector, config.context_tokens),
        what=f"fact {fact.id}: the {PURPOSE} prompt over {len(shown)} candidates",
    )
    request = Request(
        messages=fitted.messages,
        temperature=0.0,
        top_p=1.0,
        max_tokens=config.max_tokens_selector,
        seed=config.seed,
        schema=selector_schema(len(shown), config.selector_max_ranked, config.compact_outputs)
        if config.json_schema
        else None,
        purpose=PURPOSE,
        shortened=fitted.shortened,
        fact_id=fact.id,
        shown=tuple(shown_order(shown, layout)),
    )
    return request, fitted


def _index(value: Any, n: int) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().lstrip("[").rstrip("]").isdigit():
        value = int(value.strip().lstrip("[").rstrip("]"))
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= n else None


def parse_selection(text: str, shown_ids: Sequence[str], max_ranked: int = 20) -> Selection | None:
    """Read a selector reply against the ``shown_ids`` list; None if it names no valid candidate.

    ``selected_index`` must be a shown number; failing that, ``selected_id``
    naming a shown candidate, then the first valid ranked index, stand in.
    Invalid and repeated ranked indices are dropped; at most ``max_ranked`` kept.
    """
    payload = parse_object(text)
    if not isinstance(payload, dict):
        return None
    n = len(shown_ids)
    raw_ranked = payload.get("ranked_indices", [])
    ranked = []
    for value in raw_ranked if isinstance(raw_ranked, list) else []:
        index = _index(value, n)
        if index is not None and index not in ranked:
            ranked.append(index)
    selected = _index(payload.get("selected_index"), n)
    if selected is None:
        named = payload.get("selected_id") or payload.get("selected_tag")
        if isinstance(named, str) and named.strip() in shown_ids:
            selected = list(shown_ids).index(named.strip()) + 1
    if selected is None and ranked:
        selected = ranked[0]
    if selected is None:
        return None
    ranked = [i for i in ranked if i != selected][: max(max_ranked - 1, 0)]
    return Selection(selected_index=selected, ranked_indices=tuple([selected, *ranked]))


def apply_selection(ids: Sequence[str], selection: Selection | None) -> list[str]:
    """Selected first, then the other ranked candidates, then the rest in the given order."""
    ids = list(ids)
    if selection is None:
        return ids
    front = [ids[i - 1] for i in (selection.selected_index, *selection.ranked_indices) if 1 <= i <= len(ids)]
    front = list(dict.fromkeys(front))
    taken = set(front)
    return front + [cid for cid in ids if cid not in taken]


def select(
    fact: Fact, ids: Sequence[str], llm: LLM, taxonomy: Taxonomy | None, domain: Domain, config: FHSConfig
) -> tuple[list[str], Selection | None, list[tuple[Request, Response]]]:
    """Run the selector on a method's final order; returns (reordered ids, selection, calls)."""
    if not ids:
        return [], None, []
    request, _ = selector_request(fact, ids, taxonomy, domain, config)
    (response,) = llm.complete([request])
    selection = (
        None
        if response.cut_short
        else parse_selection(  # a cut answer: the method's order stands
            response.text, request.shown, config.selector_max_ranked
        )
    )
    selection = to_method_order(selection, request.shown, ids[: config.selector_candidates])
    return apply_selection(ids, selection), selection, [(request, response)]
