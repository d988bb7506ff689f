"""vLLM in process: the GPU backend of the paper profile."""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.llm.batching import BatchCollector
from fhs.llm.contract import BackendError, Request, Response, as_json_types, chat_messages, derive_seed

PAPER_VLLM_ENGINE_ARGS: dict[str, Any] = {
    "dtype": "bfloat16",
    "tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.9,
    "max_num_seqs": 8,
    "max_model_len": 32_816,
}


def _import_vllm() -> Any:
    try:
        return importlib.import_module("vllm")
    except ImportError as error:
        raise BackendError(
            f"vLLM is not importable ({error}); install the gpu extra on a CUDA machine: "
            "pip install 'fhs[gpu]' (or serve the model with `vllm serve` and use backend 'openai')"
        ) from None


def vllm_structured_kwargs(sampling_module: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The SamplingParams keyword that constrains output to ``schema`` on this vLLM version.

    vLLM 0.11+ has ``StructuredOutputsParams`` (``structured_outputs=``); 0.12
    removed the older ``GuidedDecodingParams`` (``guided_decoding=``) that
    0.10 still needs.
    """
    plain_schema = as_json_types(schema)
    if hasattr(sampling_module, "StructuredOutputsParams"):
        return {"structured_outputs": sampling_module.StructuredOutputsParams(json=plain_schema)}
    if hasattr(sampling_module, "GuidedDecodingParams"):
        return {"guided_decoding": sampling_module.GuidedDecodingParams(json=plain_schema)}
    raise BackendError("this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams")


DEFAULT_BATCH_SIZE = 256  # requests per LLM.chat call; the engine schedules up to max_num_seqs of them at once


class VLLMBackend:
    """vLLM in this process: requests from every thread batched into one ``LLM.chat`` call.

    The offline engine serves one caller at a time, so a collector thread owns
    it (``fhs.llm.batching``): whatever the run's threads have queued, up to
    ``batch_size``, goes to the engine as one batch, one SamplingParams per
    request. Prefix caching is on (the J samples and the two verifier calls of
    a fact share their long prompt). ``enable_thinking`` goes to the chat
    template whatever the model is called (the paper: off; templates without
    the flag ignore it). ``seconds`` on each response is its batch's wall time
    divided evenly.
    """

    def __init__(
        self, model: str, *, enable_thinking: bool = False, batch_size: int = DEFAULT_BATCH_SIZE, **engine_args: Any
    ) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        self._sampling = importlib.import_module("vllm.sampling_params")
        args = {"enable_prefix_caching": True, **engine_args}
        self._llm = vllm.LLM(model=model, **args)
        self.model = model
        self.enable_thinking = bool(enable_thinking)
        self._collector: BatchCollector[Request, Response] = BatchCollector(
            self._complete, batch_size, name=f"fhs-vllm:{model}"
        )
        self.kind = "vllm-thinking" if self.enable_thinking else "vllm"
        self.name = f"vllm:{model}"

    @property
    def batches(self) -> list[int]:
        """The size of every batch sent to the engine so far."""
        return self._collector.batches

    def sampling_params(self, request: Request) -> Any:
        kwargs: dict[str, Any] = {
            "n": 1,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "seed": derive_seed(request.seed, request.sample_index, request.attempt),
        }
        if request.schema is not None:
            kwargs.update(vllm_structured_kwargs(self._sampling, request.schema))
        return self._vllm.SamplingParams(**kwargs)

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        return self._collector.submit(list(requests))

    def _complete(self, requests: Sequence[Request]) -> list[Response]:
        started = time.perf_counter()
        outputs = self._llm.chat(
            [chat_messages(r) for r in requests],
            sampling_params=[self.sampling_params(r) for r in requests],
            use_tqdm=False,
            chat_template_kwargs={"enable_thinking": self.enable_thinking},
        )
        share = (time.perf_counter() - started) / len(requests)
        return [
            Response(
                text=out.outputs[0].text,
                tokens_in=len(out.prompt_token_ids or ()),
                tokens_out=len(out.outputs[0].token_ids or ()),
                seconds=share,
                model=self.model,
                finish_reason=_finish_reason(out.outputs[0]),
            )
            for out in outputs
        ]


def _finish_reason(output: Any) -> str | None:
    """vLLM's ``CompletionOutput.finish_reason`` ("stop", "length", ...), None where it has none."""
    reason = getattr(output, "finish_reason", None)
    return reason if isinstance(reason, str) and reason else None
