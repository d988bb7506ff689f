"""The GPU server a plan runs on, modelled: prefill, decode at the batch the KV cache allows, a floor.

One tokens-per-second figure measured on another request shape (4,000 in / 200 out) hides
what decides this workload's time: long prompts (the selector's about 15k tokens), short
answers, and a KV cache that on one 80 GB GPU in BF16 holds only a few such prompts at once.
So the plan's time is

- prefill: prompt tokens not served by the prefix cache (the share measured on the plan's
  own traffic, ``meter.PrefixShare``) over a prefill rate;
- decode: output tokens over the rate a decode step reaches when it reads the weights once
  and the KV cache of the batch the memory allows (memory-bandwidth bound);
- a compute floor: the FLOPs of every token (2 x parameters, plus attention over the
  context) at a stated model-FLOPs utilisation.

Assumed, and printed with the plan: vLLM's default ``--gpu-memory-utilization`` 0.9, 2 GB
per GPU for activations and CUDA graphs, decode at 70% of peak memory bandwidth, prefill
and decode not overlapped (chunked prefill overlaps them, so the sum is an upper figure).
Published figures (H100, Qwen3-32B, GPUStack performance lab,
https://docs.gpustack.ai/2.0/performance-lab/qwen3-32b/h100): vLLM BF16 2,148.69 total tok/s
on "Long Prompt", 2,771.81 on "Very Long Prompt"; TensorRT-LLM FP8 4,068.16 on "Very Long
Prompt". The BF16 prefill rate is the two-term fit to the two vLLM figures; the FP8 prefill
rate is the FP8 figure (prefill-bound). H200 and B200 prefill rates are the H100's scaled by
peak dense compute (the H200 has the H100's compute). A user's measured rates replace them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

GIB = 1024 ** 3
MEMORY_UTILIZATION = 0.9  # vLLM's default --gpu-memory-utilization
OVERHEAD_GB = 2.0  # activations and CUDA graphs, per GPU
BANDWIDTH_EFFICIENCY = 0.7  # of peak memory bandwidth a decode step reaches
MFU_RANGE = (0.4, 0.6)  # model-FLOPs utilisation of the compute floor


@dataclass(frozen=True)
class GPU:
    name: str
    memory_gb: float
    bf16_tflops: float  # dense peak
    fp8_tflops: float
    bandwidth_tbs: float
    source: str


GPUS = {
    "h100": GPU("H100 SXM 80GB", 80, 989, 1979, 3.35, "NVIDIA H100 datasheet (SXM, dense)"),
    "h200": GPU("H200 SXM 141GB", 141, 989, 1979, 4.8, "NVIDIA H200 datasheet (SXM, dense)"),
    "b200": GPU("B200 180GB", 180, 2250, 4500, 8.0, "NVIDIA DGX B200 datasheet, per GPU (dense)"),
}
PRECISIONS = {"bf16": 2, "fp8": 1}  # bytes per weight and per KV element


@dataclass(frozen=True)
class ModelShape:
    """What sizes a dense transformer's serving: parameters, layers and attention heads."""

    name: str = "Qwen3-32B"
    params_b: float = 32.8
    layers: int = 64
    q_heads: int = 64
    kv_heads: int = 8
    head_dim: int = 128

    def kv_bytes_per_token(self, precision: str) -> int:
        """K and V of every layer: 64 x 8 x 128 x 2 x 2 bytes = 256 KiB in BF16."""
        return 2 * self.layers * self.kv_heads * self.head_dim * PRECISIONS[precision]

    def weight_gb(self, precision: str) -> float:
        return self.params_b * PRECISIONS[precision]

    def flops_per_token(self, context: float) -> float:
        """2 x parameters, plus attention's QK^T and AV over ``context`` earlier tokens."""
        return 2 * self.params_b * 1e9 + 4 * self.layers * self.q_heads * self.head_dim * context


QWEN3_32B = ModelShape()
# published prefill rates, one H100 (see the module docstring)
H100_PREFILL = {"bf16": 2829.0, "fp8": 4068.0}


@dataclass(frozen=True)
class Server:
    """A server to plan on: GPU, precision, tensor-parallel width, and rates a user measured."""

    gpu: str = "h100"
    precision: str = "bf16"
    tensor_parallel: int = 1
    prefill_tps: float | None = None  # measured (vllm bench serve); None: the published figure, scaled
    decode_tps: float | None = None  # measured; None: modelled from memory bandwidth
    model: ModelShape = QWEN3_32B

    def __post_init__(self) -> None:
        if self.gpu not in GPUS:
            raise ValueError(f"unknown GPU {self.gpu!r}: one of {', '.join(GPUS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}: one of {', '.join(PRECISIONS)}")
        if self.tensor_parallel < 1:
            raise ValueError("tensor_parallel must be at least 1")

    @property
    def spec(self) -> GPU:
        return GPUS[self.gpu]

    def kv_tokens(self) -> int:
        """Tokens the KV cache holds: memory vLLM takes, less the weights and overheads."""
        free_gb = (self.spec.memory_gb * MEMORY_UTILIZATION - OVERHEAD_GB) * self.tensor_parallel \
            - self.model.weight_gb(self.precision)
        return max(0, int(free_gb * 1e9 // self.model.kv_bytes_per_token(self.precision)))

    def peak_flops(self) -> float:
        tflops = self.spec.fp8_tflops if self.precision == "fp8" else self.spec.bf16_tflops
        return tflops * 1e12 * self.tensor_parallel

    def prefill_rate(self) -> float:
        if self.prefill_tps:
            return self.prefill_tps
        scale = self.peak_flops() / (GPUS["h100"].fp8_tflops if self.precision == "fp8"
                                     else GPUS["h100"].bf16_tflops) / 1e12
        return H100_PREFILL[self.precision] * scale

    def decode_rate(self, batch: int, context: float) -> float:
        """Output tokens/s at ``batch`` sequences of ``context`` tokens: a step reads every weight
        once and each sequence's KV cache, at ``BANDWIDTH_EFFICIENCY`` of peak bandwidth."""
        if self.decode_tps:
            return self.decode_tps
        step_bytes = self.model.weight_gb(self.precision) * 1e9 \
            + batch * context * self.model.kv_bytes_per_token(self.precision)
        bandwidth = self.spec.bandwidth_tbs * 1e12 * BANDWIDTH_EFFICIENCY * self.tensor_parallel
        return max(batch, 1) * bandwidth / step_bytes

    def describe(self) -> str:
        width = f"{self.tensor_parallel} x " if self.tensor_parallel > 1 else "one "
        return f"{width}{self.spec.name}, {self.model.name} {self.precision.upper()} weights and KV cache"


def model_time(server: Server, purposes: Mapping[str, Mapping[str, Any]], total: Mapping[str, int],
               prefix_share: float) -> dict[str, Any]:
    """The plan's prompt and output tokens on ``server``: prefill, decode, KV concurrency, floor, range."""
    requests = max(total["requests"], 1)
    mean_in, mean_out = total["prompt_tokens"] / requests, total["output_tokens"] / requests
    selector = purposes.get("selector") or max(purposes.values(), key=lambda p: p["mean_prompt_tokens"],
                                               default={"mean_prompt_tokens": mean_in,
                                                        "mean_output_tokens": mean_out})
    kv = server.kv_tokens()
    selector_len = selector["mean_prompt_tokens"] + selector["mean_output_tokens"]
    held_selector = kv // max(selector_len, 1)
    held_mean = kv // max(mean_in + mean_out, 1)
    batch = max(1, min(int(held_mean), 256))
    prefill_s = total["prompt_tokens"] * (1 - prefix_share) / server.prefill_rate()
    decode_tps = server.decode_rate(batch, mean_in + mean_out / 2)
    decode_s = total["output_tokens"] / decode_tps
    flops = 0.0
    for shape in purposes.values():
        flops += shape["prompt_tokens"] * server.model.flops_per_token(shape["mean_prompt_tokens"] / 2)
        flops += shape["output_tokens"] * server.model.flops_per_token(shape["mean_prompt_tokens"])
    floor = {f"{mfu:.0%}": flops / (mfu * server.peak_flops()) / 86400 for mfu in MFU_RANGE}
    days = (prefill_s + decode_s) / 86400
    return {
        "server": server.describe(), "gpu": server.gpu, "precision": server.precision,
        "tensor_parallel": server.tensor_parallel,
        "kv_tokens": kv, "kv_bytes_per_token": server.model.kv_bytes_per_token(server.precision),
        "selector_prompts_held": int(held_selector), "mean_requests_held": int(held_mean),
        "max_num_seqs": batch, "prefix_share": round(prefix_share, 4),
        "prefill_tps": round(server.prefill_rate(), 1),
        "prefill_source": "measured" if server.prefill_tps else "published, scaled by peak compute",
        "decode_tps": round(decode_tps, 1),
        "decode_source": "measured" if server.decode_tps else "modelled from memory bandwidth",
        "prefill_days": round(prefill_s / 86400, 2), "decode_days": round(decode_s / 86400, 2),
        "days": round(days, 2), "floor_days": {k: round(v, 2) for k, v in floor.items()},
        "range_days": [round(min(floor.values()), 2), round(days, 2)],
    }


def format_server(model: Mapping[str, Any], estimated: bool = False) -> list[str]:
    """The modelled server as the plan's closing lines; ``estimated`` marks the days as from estimated tokens."""
    floor = model["floor_days"]
    mark = " (from estimated tokens)" if estimated else ""
    return [
        f"server: {model['server']}",
        f"  KV cache: {model['kv_tokens']:,} tokens ({model['kv_bytes_per_token'] // 1024} KiB a token); holds "
        f"{model['selector_prompts_held']:,} selector prompts or {model['mean_requests_held']:,} mean requests at "
        f"once (--max-num-seqs {model['max_num_seqs']})",
        f"  prefill: {model['prefill_days']:,.2f} days at {model['prefill_tps']:,.0f} tok/s "
        f"({model['prefill_source']}), {model['prefix_share']:.1%} of prompt text served by the prefix cache{mark}",
        f"  decode: {model['decode_days']:,.2f} days at {model['decode_tps']:,.0f} tok/s "
        f"({model['decode_source']}, batch {model['max_num_seqs']}){mark}",
        f"  compute floor: {' to '.join(f'{v:,.2f}' for v in sorted(floor.values()))} days at "
        f"{' to '.join(sorted(floor, reverse=True))} MFU{mark}",
        f"  range: {model['range_days'][0]:,.2f} to {model['range_days'][1]:,.2f} days{mark}",
    ]
