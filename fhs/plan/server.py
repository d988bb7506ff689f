"""The GPU server a plan runs on, modelled: prefill, decode at the batch the KV cache allows, a floor.

One tokens-per-second figure measured on another request shape (4,000 in / 200 out) hides
what decides this workload's time: long prompts (the selector's about 15k tokens), short
answers, and a KV cache that on one 80 GB GPU in BF16 holds only a few such prompts at once.
So the plan's time is

- prefill: prompt tokens not served by the prefix cache over a prefill rate; the range runs
  from the share a cache that never evicts would serve (measured on the plan's own traffic,
  ``meter.PrefixShare``) to no reuse at all;
- decode: output tokens over the rate a decode step reaches when it reads the weights once
  and the KV cache of the batch the memory allows (memory-bandwidth bound);
- a floor: the FLOPs of every token the prefix cache cannot serve (2 x parameters, plus
  attention over the context) at ``MFU_FLOOR`` of peak, or at the utilisation the rates
  themselves imply where that is higher, so no modelled figure falls below it.

Memory is what the devices report (``nvidia-smi``'s memory.total, in MiB), not the marketing
size: vLLM's ``--gpu-memory-utilization`` (0.9 by default) is a share of it. Assumed, and
printed with the plan: 2 GiB per GPU for activations, CUDA graphs and the CUDA context,
decode at 70% of peak memory bandwidth, prefill and decode not overlapped (chunked prefill
overlaps them, so the sum is an upper figure).

Published rates (H100, Qwen3-32B, GPUStack performance lab, "Optimizing Qwen3-32B Throughput
on NVIDIA H100 GPUs"): vLLM BF16 2,148.69 total tok/s on "Long Prompt" (4,000 in, 200 out),
2,771.81 on "Very Long Prompt" (32,000 in, 100 out); the BF16 prefill rate is the two-term fit
to the two. No vLLM FP8 figure is published there: the FP8 rate is TensorRT-LLM's 4,068.16 on
"Very Long Prompt", flagged as such. The same lab's A100 page measured vLLM BF16 at 1,798.45 on
"Very Long Prompt": 0.65 of the H100's, where the A100 has 0.60 of its memory bandwidth and
0.32 of its compute, so that figure is bandwidth-bound; other GPUs' rates are the H100's scaled
by memory bandwidth and flagged "scaled", and a scaled rate past ``MFU_CAP`` of peak compute is
cut to it. A user's measured
rates replace them (``fhs plan --base-url`` or ``--bench-json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024**3
MIB = 1024**2
MEMORY_UTILIZATION = 0.9  # vLLM's default --gpu-memory-utilization, a share of the memory the device reports
OVERHEAD_GIB = 2.0  # activations, CUDA graphs and the CUDA context, per GPU
BANDWIDTH_EFFICIENCY = 0.7  # of peak memory bandwidth a decode step reaches
MFU_FLOOR = 0.6  # model-FLOPs utilisation no server is taken to beat (the floor's)
MFU_CAP = 0.4  # a published rate scaled past this utilisation is cut to it
MAX_BATCH = 256  # vLLM's default --max-num-seqs


@dataclass(frozen=True)
class GPU:
    name: str
    memory_mib: int  # memory.total as nvidia-smi reports it
    bf16_tflops: float  # dense peak
    fp8_tflops: float
    bandwidth_tbs: float
    source: str
    per_node: int = 8  # GPUs an HGX / DGX node holds: the widest tensor parallelism on one node

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB


# memory.total as nvidia-smi prints it ("81559MiB" on an H100 80GB HBM3, "143771MiB" on an H200,
# "183359MiB" on a B200); peak rates from NVIDIA's datasheets (SXM, dense)
GPUS = {
    "h100": GPU("H100 SXM 80GB HBM3", 81_559, 989, 1979, 3.35, "nvidia-smi memory.total; NVIDIA H100 datasheet"),
    "h200": GPU("H200 SXM 141GB", 143_771, 989, 1979, 4.8, "nvidia-smi memory.total; NVIDIA H200 datasheet"),
    "b200": GPU("B200 180GB", 183_359, 2250, 4500, 8.0, "nvidia-smi memory.total; NVIDIA DGX B200 datasheet"),
}
PRECISIONS = {"bf16": 2, "fp8": 1}  # bytes per weight and per KV element


@dataclass(frozen=True)
class ModelShape:
    """What sizes a dense transformer's serving: parameters, layers, attention heads, embeddings."""

    name: str = "Qwen3-32B"
    params_b: float = 32.76
    layers: int = 64
    q_heads: int = 64
    kv_heads: int = 8
    head_dim: int = 128
    vocab: int = 151_936
    hidden: int = 5_120

    def kv_bytes_per_token(self, precision: str) -> int:
        """K and V of every layer: 64 x 8 x 128 x 2 x 2 bytes = 256 KiB in BF16."""
        return 2 * self.layers * self.kv_heads * self.head_dim * PRECISIONS[precision]

    def weight_bytes(self, precision: str) -> float:
        """Every parameter at the precision's width, but the input embeddings and the output layer
        (vocabulary x hidden each), which an FP8 checkpoint served by vLLM keeps in BF16."""
        embeddings = 2 * self.vocab * self.hidden
        return (self.params_b * 1e9 - embeddings) * PRECISIONS[precision] + embeddings * PRECISIONS["bf16"]

    def flops_per_token(self, context: float) -> float:
        """2 x parameters, plus attention's QK^T and AV over ``context`` earlier tokens."""
        return 2 * self.params_b * 1e9 + 4 * self.layers * self.q_heads * self.head_dim * context

    def tensor_parallel_widths(self, most: int) -> list[int]:
        """Widths vLLM splits this model over: dividing the query heads, and dividing the KV heads
        or a multiple of them (the KV heads are then copied)."""
        return [
            tp
            for tp in range(1, most + 1)
            if self.q_heads % tp == 0 and (self.kv_heads % tp == 0 or tp % self.kv_heads == 0)
        ]


QWEN3_32B = ModelShape()
# published prefill rates, one H100 (see the module docstring), and where each comes from
H100_PREFILL = {"bf16": 2829.0, "fp8": 4068.0}
H100_SOURCE = {
    "bf16": "published (vLLM, H100)",
    "fp8": "scaled: TensorRT-LLM's H100 FP8 figure, no vLLM FP8 one is published for this shape",
}


class ServerError(ValueError):
    """A configuration no server can run; the message says what would, ``flag`` which choice to change."""

    def __init__(self, message: str, flag: str = "gpu") -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class Server:
    """A server to plan on: GPU, precision, tensor-parallel width, and what a user measured on theirs."""

    gpu: str = "h100"
    precision: str = "bf16"
    tensor_parallel: int = 1
    prefill_tps: float | None = None  # measured; None: the published figure, scaled
    decode_tps: float | None = None  # measured; None: modelled from memory bandwidth
    kv_capacity: int | None = None  # measured (the server's reported KV cache); None: modelled
    model: ModelShape = QWEN3_32B
    measured_by: str = "measured"

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

    def check(self, longest_request: float = 1) -> None:
        """Refuse what cannot run: more GPUs than a node has, a width the heads do not split over,
        or a KV cache (after the weights) that cannot hold ``longest_request`` tokens. The error
        names the configurations that would."""
        widths = self.model.tensor_parallel_widths(self.spec.per_node)
        if self.tensor_parallel not in widths:
            why = (
                f"a node holds at most {self.spec.per_node} {self.spec.name} GPUs"
                if self.tensor_parallel > self.spec.per_node
                else f"{self.model.name}'s {self.model.q_heads} attention heads and {self.model.kv_heads} KV heads "
                f"do not split over it"
            )
            raise ServerError(
                f"--tensor-parallel {self.tensor_parallel}: {why}; one of {', '.join(map(str, widths))}",
                flag="tensor-parallel",
            )
        if self.kv_capacity is None and self.kv_tokens() < max(longest_request, 1):
            fits = [
                f"--precision {p} --tensor-parallel {tp}"
                for tp, p in sorted(
                    ((tp, p) for p in PRECISIONS for tp in widths), key=lambda c: (c[0], c[1] != self.precision)
                )
                if Server(self.gpu, p, tp, model=self.model).kv_tokens() >= longest_request
            ]
            held = max(self.kv_tokens(), 0)
            raise ServerError(
                f"{self.model.name} in {self.precision.upper()} on {self.describe_gpus()} leaves KV cache for "
                f"{held:,} tokens, less than one {int(longest_request):,}-token request"
                + (
                    f"; fits: {fits[0]}" + (f" (or {fits[1]})" if len(fits) > 1 else "")
                    if fits
                    else "; no width on one node fits"
                )
            )

    def describe_gpus(self) -> str:
        return f"{self.tensor_parallel} x {self.spec.name}" if self.tensor_parallel > 1 else f"one {self.spec.name}"

    def kv_tokens(self) -> int:
        """Tokens the KV cache holds: the server's own figure where measured, else the memory vLLM
        takes (a share of what the devices report), less the weights and overheads; negative
        when the weights alone do not fit."""
        if self.kv_capacity is not None:
            return self.kv_capacity
        free = (
            self.spec.memory_bytes * MEMORY_UTILIZATION - OVERHEAD_GIB * GIB
        ) * self.tensor_parallel - self.model.weight_bytes(self.precision)
        return int(free // self.model.kv_bytes_per_token(self.precision))

    def peak_flops(self) -> float:
        tflops = self.spec.fp8_tflops if self.precision == "fp8" else self.spec.bf16_tflops
        return tflops * 1e12 * self.tensor_parallel

    def prefill_rate(self, context: float = 0.0) -> tuple[float, str]:
        """Prompt tokens a second and where the figure comes from; ``context``: the mean prompt, for
        the compute cap of a scaled figure."""
        if self.prefill_tps:
            return self.prefill_tps, self.measured_by
        h100 = GPUS["h100"]
        rate, source = H100_PREFILL[self.precision], H100_SOURCE[self.precision]
        if self.gpu != "h100" or self.tensor_parallel > 1:
            rate *= self.spec.bandwidth_tbs / h100.bandwidth_tbs * self.tensor_parallel
            source = (
                "scaled: the H100's figure, which is bandwidth-bound, by memory bandwidth"
                + (" and tensor-parallel width" if self.tensor_parallel > 1 else "")
                + ("; " + H100_SOURCE[self.precision] if self.precision == "fp8" else "")
            )
        cap = MFU_CAP * self.peak_flops() / self.model.flops_per_token(context / 2)
        if rate > cap:
            rate, source = cap, source + f"; cut to {MFU_CAP:.0%} of peak compute"
        return rate, source

    def decode_rate(self, batch: int, context: float) -> float:
        """Output tokens/s at ``batch`` sequences of ``context`` tokens: a step reads every weight
        once and each sequence's KV cache, at ``BANDWIDTH_EFFICIENCY`` of peak bandwidth."""
        if self.decode_tps:
            return self.decode_tps
        step_bytes = self.model.weight_bytes(self.precision) + batch * context * self.model.kv_bytes_per_token(
            self.precision
        )
        bandwidth = self.spec.bandwidth_tbs * 1e12 * BANDWIDTH_EFFICIENCY * self.tensor_parallel
        return max(batch, 1) * bandwidth / step_bytes

    def describe(self) -> str:
        return f"{self.describe_gpus()}, {self.model.name} {self.precision.upper()} weights and KV cache"


def _selector(purposes: Mapping[str, Mapping[str, Any]], mean_in: float, mean_out: float) -> Mapping[str, Any]:
    """The longest request shape: the selector's, else the stage with the longest prompts."""
    return purposes.get("selector") or max(
        purposes.values(),
        key=lambda p: p["mean_prompt_tokens"],
        default={"mean_prompt_tokens": mean_in, "mean_output_tokens": mean_out},
    )


def model_time(
    server: Server, purposes: Mapping[str, Mapping[str, Any]], total: Mapping[str, int], prefix_share: float
) -> dict[str, Any]:
    """The plan's prompt and output tokens on ``server``: prefill, decode, KV concurrency, floor, range.

    Raises :class:`ServerError` when the server cannot hold the plan's longest request shape."""
    requests = max(total["requests"], 1)
    mean_in, mean_out = total["prompt_tokens"] / requests, total["output_tokens"] / requests
    selector = _selector(purposes, mean_in, mean_out)
    selector_len = selector["mean_prompt_tokens"] + selector["mean_output_tokens"]
    server.check(selector_len)
    kv = server.kv_tokens()
    held_selector = kv // max(selector_len, 1)
    held_mean = kv // max(mean_in + mean_out, 1)
    batch = max(1, min(int(held_mean), MAX_BATCH))
    prefill_tps, prefill_source = server.prefill_rate(mean_in)
    decode_tps = server.decode_rate(batch, mean_in + mean_out / 2)
    decode_s = total["output_tokens"] / decode_tps

    def prefill_s(share: float) -> float:
        return total["prompt_tokens"] * (1 - share) / prefill_tps

    days, no_reuse = (prefill_s(prefix_share) + decode_s) / 86400, (prefill_s(0.0) + decode_s) / 86400
    flops = 0.0
    for shape in purposes.values():
        flops += (
            shape["prompt_tokens"] * (1 - prefix_share) * server.model.flops_per_token(shape["mean_prompt_tokens"] / 2)
        )
        flops += shape["output_tokens"] * server.model.flops_per_token(shape["mean_prompt_tokens"])
    implied = flops / (server.peak_flops() * days * 86400) if days > 0 else 0.0
    mfu = max(MFU_FLOOR, implied)  # measured rates may beat MFU_FLOOR; the floor stays below them
    floor = flops / (mfu * server.peak_flops()) / 86400
    return {
        "server": server.describe(),
        "gpu": server.gpu,
        "precision": server.precision,
        "tensor_parallel": server.tensor_parallel,
        "kv_tokens": kv,
        "kv_source": server.measured_by
        if server.kv_capacity is not None
        else f"modelled: {MEMORY_UTILIZATION:g} of {server.spec.memory_mib:,} MiB a GPU, less weights and "
        f"{OVERHEAD_GIB:g} GiB",
        "kv_bytes_per_token": server.model.kv_bytes_per_token(server.precision),
        "selector_prompts_held": int(held_selector),
        "mean_requests_held": int(held_mean),
        "max_num_seqs": batch,
        "prefix_share": round(prefix_share, 4),
        "prefill_tps": round(prefill_tps, 1),
        "prefill_source": prefill_source,
        "decode_tps": round(decode_tps, 1),
        "decode_source": server.measured_by if server.decode_tps else "modelled from memory bandwidth",
        "prefill_days": round(prefill_s(prefix_share) / 86400, 2),
        "decode_days": round(decode_s / 86400, 2),
        "days": round(days, 2),
        "no_reuse_days": round(no_reuse, 2),
        "floor_days": round(floor, 2),
        "floor_mfu": round(mfu, 3),
        "range_days": [round(days, 2), round(no_reuse, 2)],
    }


def format_server(model: Mapping[str, Any], estimated: bool = False, label: str = "server") -> list[str]:
    """The modelled server as the plan's closing lines; ``estimated`` marks the days as from estimated tokens."""
    mark = " (from estimated tokens)" if estimated else ""
    return [
        f"{label}: {model['server']}",
        f"  KV cache: {model['kv_tokens']:,} tokens ({model['kv_bytes_per_token'] // 1024} KiB a token; "
        f"{model['kv_source']}); holds {model['selector_prompts_held']:,} selector prompts or "
        f"{model['mean_requests_held']:,} mean requests at once (--max-num-seqs {model['max_num_seqs']})",
        f"  prefill: {model['prefill_days']:,.2f} days at {model['prefill_tps']:,.0f} tok/s "
        f"({model['prefill_source']}), {model['prefix_share']:.1%} of prompt text served by the prefix cache{mark}",
        f"  decode: {model['decode_days']:,.2f} days at {model['decode_tps']:,.0f} tok/s "
        f"({model['decode_source']}, batch {model['max_num_seqs']}){mark}",
        f"  range: {model['range_days'][0]:,.2f} days (a prefix cache that never evicts) to "
        f"{model['range_days'][1]:,.2f} days (no prefix reuse){mark}",
        f"  floor: {model['floor_days']:,.2f} days (every FLOP the prefix cache leaves, at "
        f"{model['floor_mfu']:.0%} of peak compute){mark}",
    ]
