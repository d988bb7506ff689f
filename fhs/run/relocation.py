"""The LLM relocator: a model copies the English phrase, the substring rule decides.

It prepares CodiEsp's data for a run (``fhs.data.relocate`` holds the deterministic one and the contract);
it is no part of the method. The unit tests use a scripted double of the ``fhs.llm.contract.LLM`` protocol.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fhs.data.relocate.contract import Relocation, RelocationTask, accept_span
from fhs.llm.contract import LLM, Message, Request
from fhs.llm.jsonout import parse_object
from fhs.method.prompting import DEFAULT_ORDER, template_path

RELOCATE_PROMPT = "relocate.txt"
RELOCATE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"english": {"type": ["string", "null"]}},
    "required": ["english"],
}


def load_prompt(name: str = RELOCATE_PROMPT, order: str = DEFAULT_ORDER) -> str:
    """A prompt template shipped in ``fhs/method/prompts`` (``order`` as in ``fhs.method.prompting``).

    The default order puts the instructions first, then the English translation
    (shared by the mentions of one document), then the Spanish sentence and mention.
    """
    return template_path(Path(name).stem, order).read_text(encoding="utf-8")


def parse_relocation_answer(text: str) -> tuple[str | None, str]:
    """The phrase a model answered and a note: ``(phrase, "")``, ``(None, "null answer")``
    or ``(None, "malformed: ...")``.

    Tolerant of reasoning blocks, code fences and text around the JSON object.
    """
    answer = parse_object(text)
    if answer is None:
        return None, "malformed: no JSON object"
    if "english" not in answer:
        return None, "malformed: no 'english' field"
    phrase = answer["english"]
    if phrase is None or (isinstance(phrase, str) and phrase.strip().lower() in ("", "null", "none")):
        return None, "null answer"
    if not isinstance(phrase, str):
        return None, f"malformed: 'english' is {type(phrase).__name__}"
    return phrase, ""


class LLMRelocator:
    """Asks a model to copy the English phrase verbatim; keeps only exact substrings.

    One greedy request per mention (``max_tokens`` 96, JSON answer
    ``{"english": "<phrase or null>"}``), sent in batches of ``batch_size``.
    """

    method = "llm"

    def __init__(
        self,
        llm: LLM,
        *,
        template: str | None = None,
        max_tokens: int = 96,
        batch_size: int = 64,
        order: str = DEFAULT_ORDER,
    ) -> None:
        self.llm = llm
        self.template = template if template is not None else load_prompt(order=order)
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        digest = hashlib.sha1(f"{self.template}|{max_tokens}".encode()).hexdigest()[:10]
        model = re.sub(r"[^A-Za-z0-9._-]+", "_", getattr(llm, "name", "model"))
        self.name = f"llm-{model}-{digest}"

    def request(self, task: RelocationTask) -> Request:
        prompt = self.template.format(
            spanish_mention=task.mention,
            spanish_context=task.spanish_context,
            english_text=task.candidate,
        )
        return Request(
            messages=(Message("user", prompt),),
            temperature=0.0,
            max_tokens=self.max_tokens,
            schema=RELOCATE_SCHEMA,
            purpose="relocate",
        )

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]:
        results: list[Relocation] = []
        for begin in range(0, len(tasks), self.batch_size):
            batch = list(tasks[begin : begin + self.batch_size])
            responses = self.llm.complete([self.request(task) for task in batch])
            if len(responses) != len(batch):
                raise RuntimeError(f"{self.name}: {len(responses)} responses for {len(batch)} requests")
            for task, response in zip(batch, responses):
                if response.cut_short:  # the phrase may be cut too: never accept a prefix of it
                    results.append(Relocation.not_found(task, self.method, "malformed: cut at max_tokens"))
                else:
                    results.append(self._judge(task, response.text))
        return results

    def _judge(self, task: RelocationTask, text: str) -> Relocation:
        if not task.candidate:
            return Relocation.not_found(task, self.method, "no English text")
        phrase, note = parse_relocation_answer(text)
        if phrase is None:
            return Relocation.not_found(task, self.method, note)
        span = accept_span(phrase, task.candidate, task.position)
        if span is None:
            return Relocation.not_found(task, self.method, "answer is not a substring of the candidate")
        return Relocation.accepted(task, span[0], span[1], self.method)
