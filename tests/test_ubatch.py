"""llama.cpp evaluates a prompt 128 tokens a step instead of 512: the same replies, sooner."""

from __future__ import annotations

import pytest

from fhs.llm.contract import Message, Request

SCHEMA = {"type": "object", "properties": {"concept": {"type": "string"}, "why": {"type": "string"}},
          "required": ["concept", "why"]}
# about 900 prompt tokens: seven steps of 128, two of 512, so every step boundary differs
CONTEXT = " ".join(f"Row {n}: interest expense on long-term debt was {n * 37 % 1000} thousand dollars in "
                   f"fiscal {2000 + n % 24}, against {n * 53 % 900} thousand the year before." for n in range(30))


def requests() -> list[Request]:
    # the step size changes how the prompt is evaluated, not how a reply is generated: a dozen tokens show the
    # replies agree, and generation no longer outweighs the prompts
    asks = ("Which US-GAAP concept does the first row's value denote?",
            "Which ICD-10-CM code fits a closed fracture of the left wrist?")
    return [Request(messages=(Message("system", "Answer as JSON."), Message("user", CONTEXT + "\n\n" + ask)),
                    max_tokens=12, schema=schema, temperature=temperature, seed=seed, purpose="t")
            for ask in asks for schema in (SCHEMA, None) for temperature, seed in ((0.0, 0), (0.8, 7))]


@pytest.mark.model
@pytest.mark.parametrize("model", ["smollm2-135m", "qwen2.5-0.5b"])
def test_steps_of_128_tokens_answer_as_steps_of_512(model):
    from fhs.llm.llama_cpp import N_UBATCH, LlamaCppBackend
    from fhs.llm.models import model_path

    default = LlamaCppBackend(model_path(model), n_ctx=2048, kv_states=0)
    wide = LlamaCppBackend(model_path(model), n_ctx=2048, kv_states=0, n_ubatch=512)
    assert default._llm.context_params.n_ubatch == N_UBATCH == 128
    assert wide._llm.context_params.n_ubatch == 512
    asked = requests()
    narrow_answers = [default.complete([r])[0] for r in asked]
    wide_answers = [wide.complete([r])[0] for r in asked]
    assert min(a.tokens_in for a in narrow_answers) > 512  # two steps of 512, several of 128
    assert [a.text for a in narrow_answers] == [a.text for a in wide_answers]
    assert [a.tokens_out for a in narrow_answers] == [a.tokens_out for a in wide_answers]
