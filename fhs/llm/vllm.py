"""vLLM in process: the GPU backend of the paper profile."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.llm.contract import BackendError, Request, Response, chat_messages, derive_seed, plain


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
    plain_schema = plain(schema)
    if hasattr(sampling_module, "StructuredOutputsParams"):
        return {"structured_outputs": sampling_module.StructuredOutputsParams(json=plain_schema)}
    if hasattr(sampling_module, "GuidedDecodingParams"):
        return {"guided_decoding": sampling_module.GuidedDecodingParams(json=plain_schema)}
    raise BackendError("this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams")


class VLLMBackend:
    """vLLM in this process: one ``LLM.chat`` call per batch, one SamplingParams per request.

    Prefix caching is on (the J samples and the two verifier calls of a fact
    share their long prompt). Qwen3's chat template is rendered with
    ``enable_thinking=False`` as in the paper; other templates ignore the flag.
    ``seconds`` on each response is the batch's wall time divided evenly.
    """

    def __init__(self, model: str, *, enable_thinking: bool = False, **engine_args: Any) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        self._sampling = importlib.import_module("vllm.sampling_params")
        args = {"enable_prefix_caching": True, **engine_args}
        self._llm = vllm.LLM(model=model, **args)
        self.model = model
        self.enable_thinking = enable_thinking
        self._lock = threading.Lock()  # the offline engine serves one caller at a time
        self.kind = "vllm"
        self.name = f"vllm:{model}"

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
        if not requests:
            return []
        with self._lock:
            return self._complete(requests)

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
                finish_reason=getattr(out.outputs[0], "finish_reason", None),  # "length": cut at max_tokens
            )
            for out in outputs
        ]
