"""Encoder concepts/s and llama.cpp tokens/s, settings side by side.

    python -m dev.bench_cpu [--part encoder|llama|sampling|all] [--isa native,x86-64-v3] [--out FILE]


The encoder part embeds the same sample of a taxonomy's concept texts under each
setting (model, intra-op threads, batch size, batch order, instruction-set level).
The settings of one level share a worker process; a level other than ``native``
gets its own worker with CPUID masked (``fhs/run/cpu_info.py``), since the runtime
chooses its kernels once, at load. The workers take turns, one setting at a time,
and each round visits the settings in the opposite order to the last, so slow
spells of a shared machine fall on every setting alike; the table gives the median
round. Each setting's vectors are compared with the first setting's of the same
model: ``max |d|`` is the largest coordinate difference.

The llama.cpp part loads the model once per setting (threads, n_batch, n_ubatch,
flash attention) in this process and times a prompt evaluated whole (KV cache
cleared) and the same prompt's last part after a shared prefix (what prefix reuse
across calls saves), then greedy generation; it checks that every setting generates
the same tokens as the first.

The sampling part replays the requests a method makes (schemas, temperatures
and seeds as the ``cpu`` profile sends them; built with the simulated model, as
``python -m dev.bench_kv`` does) on two llama.cpp backends in this process, grammar
sampling over every token against the likeliest-first step
(``fhs/llm/likeliest_first.py``), request by request, alternating which goes
first; it reports generated tokens/s and whether every reply is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dev.cli import ROOT
from dev.cpuid_mask import can_mask, isa_environment
from fhs.llm.llama_cpp import N_UBATCH
from fhs.run.cpu_info import cpu_record, llama_system_info


@dataclass(frozen=True)
class EncoderSetting:
    model: str = "minilm-int8-d32"  # the cpu profile's for ICD-10-CM, the default texts
    threads: int = 2
    batch_size: int = 32
    order: str = "tokens"  # tokens (the encoder's own) | chars (sorted by characters) | given (as listed)
    isa: str = "native"
    spinning: bool = True  # ONNX Runtime's worker threads spin between ops
    streams: int = 1  # batches run at once, each on threads // streams intra-op threads
    chunk: int = 0  # texts per encode call, as a dense build's checkpoints cut them (0: one call)
    processes: int = 1  # forked one-thread processes that embed the chunks side by side

    def label(self) -> str:
        spin = "" if self.spinning else " nospin"
        streams = f" s{self.streams}" if self.streams > 1 else ""
        chunks = f" c{self.chunk}" if self.chunk else ""
        processes = f" p{self.processes}" if self.processes > 1 else ""
        return (f"{self.model} {self.isa} t{self.threads} b{self.batch_size} {self.order}"
                f"{spin}{streams}{chunks}{processes}")


@dataclass(frozen=True)
class LlamaSetting:
    n_threads: int = 2
    n_batch: int = 512
    n_ubatch: int = 512
    flash_attn: bool = False
    quant: str = ""  # "" = the GGUF as shipped; else re-quantized to this llama.cpp type (Q8_0, Q4_0)

    def label(self) -> str:
        quant = f" {self.quant}" if self.quant else ""
        return f"t{self.n_threads} batch {self.n_batch} ubatch {self.n_ubatch}{' fa' if self.flash_attn else ''}{quant}"


# --- encoder ---------------------------------------------------------------------------------

def _chunks(texts: Sequence[str], setting: EncoderSetting) -> list[list[int]]:
    """Index batches for the orders the encoder does not form itself."""
    order = list(range(len(texts)))
    if setting.order == "chars":
        order.sort(key=lambda i: len(texts[i]))
    return [order[i:i + setting.batch_size] for i in range(0, len(order), setting.batch_size)]


def _worker() -> None:
    """Embeds on request: one JSON line in (setting, texts file, vectors file), seconds out."""
    from fhs.retrieval.dense import embedded_chunks
    from fhs.retrieval.encoders import MODELS, OnnxEncoder

    encoders: dict[tuple, Any] = {}
    print(json.dumps({"ready": True, "cpu": cpu_record()}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        setting = EncoderSetting(**job["setting"])
        texts = json.loads(Path(job["texts"]).read_text(encoding="utf-8"))
        key = (setting.model, setting.threads, setting.spinning, setting.streams)
        if key not in encoders:
            encoders[key] = OnnxEncoder(MODELS[setting.model], threads=setting.threads, spinning=setting.spinning,
                                        streams=setting.streams)
        encoder = encoders[key]
        started = time.perf_counter()
        if setting.chunk:  # as load_or_build_embeddings embeds a build
            chunks = [texts[i:i + setting.chunk] for i in range(0, len(texts), setting.chunk)]
            vectors = np.concatenate(list(embedded_chunks(encoder, chunks, batch_size=setting.batch_size,
                                                          processes=setting.processes)))
        elif setting.order == "tokens":
            vectors = encoder.encode(texts, batch_size=setting.batch_size, documents=True)
        else:
            vectors = np.zeros((len(texts), encoder.spec.dim), dtype=np.float32)
            for batch in _chunks(texts, setting):  # one call per batch: exactly this batch is padded
                vectors[batch] = encoder.encode([texts[i] for i in batch], batch_size=len(batch), documents=True)
        seconds = time.perf_counter() - started
        if job.get("save"):
            np.save(job["save"], vectors)
        print(json.dumps({"seconds": seconds}), flush=True)


def bench_encoder(texts: Sequence[str], settings: Sequence[EncoderSetting], *, rounds: int = 3,
                  scratch: Path | None = None) -> dict[str, Any]:
    """Each setting embeds ``texts`` once per round; concepts/s and vector agreement per setting."""
    with tempfile.TemporaryDirectory(prefix="fhs-bench-cpu-") as tmp:
        folder = Path(scratch or tmp)
        texts_file = folder / "texts.json"
        texts_file.write_text(json.dumps(list(texts)), encoding="utf-8")
        workers: dict[str, subprocess.Popen] = {}
        cpus: dict[str, dict] = {}
        try:
            for isa in dict.fromkeys(s.isa for s in settings):
                env = isa_environment(isa, folder)
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
                proc = subprocess.Popen([sys.executable, "-m", "dev.bench_cpu", "--worker"], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                workers[isa] = proc
                cpus[isa] = json.loads(proc.stdout.readline())["cpu"]

            def ask(k: int, save: bool) -> float:
                proc = workers[settings[k].isa]
                job = {"setting": asdict(settings[k]), "texts": str(texts_file),
                       "save": str(folder / f"vectors{k}.npy") if save else None}
                proc.stdin.write(json.dumps(job) + "\n")
                proc.stdin.flush()
                answer = proc.stdout.readline()
                if not answer:
                    raise RuntimeError(f"the encoder worker for {settings[k].label()} stopped")
                return json.loads(answer)["seconds"]

            for k in range(len(settings)):  # warm-up: loads each session, writes the vectors
                ask(k, save=True)
            times: list[list[float]] = [[] for _ in settings]
            for r in range(rounds):
                for k in (range(len(settings)) if r % 2 == 0 else reversed(range(len(settings)))):
                    times[k].append(ask(k, save=False))
        finally:
            for proc in workers.values():
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=60)
        rows = []
        first_of: dict[tuple[str, int], int] = {}
        for k, setting in enumerate(settings):
            vectors = np.load(folder / f"vectors{k}.npy")
            # chunked rows compare with the first of their chunking (a chunk is batched on its own)
            ref = np.load(folder / f"vectors{first_of.setdefault((setting.model, setting.chunk), k)}.npy")
            median = statistics.median(times[k])
            rows.append({"setting": setting.label(), **asdict(setting), "concepts_per_s": round(len(texts) / median, 1),
                         "seconds": round(median, 3), "spread": f"{min(times[k]):.2f}-{max(times[k]):.2f}",
                         "max_abs_diff": float(np.abs(vectors - ref).max()),
                         "min_cosine": float((vectors * ref).sum(axis=1).min())})
    base = rows[0]["concepts_per_s"]
    for row in rows:
        row["ratio"] = round(row["concepts_per_s"] / base, 2)
    return {"concepts": len(texts), "rounds": rounds, "cpu": cpus, "rows": rows}


# --- llama.cpp -------------------------------------------------------------------------------

def _prompt_text() -> str:
    """Realistic prompt words: the project's own prompt templates, repeated as needed."""
    from importlib import resources

    folder = resources.files("fhs.method").joinpath("prompts")
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.iterdir(), key=lambda p: p.name)
                       if p.name.endswith((".txt", ".md")))


def bench_llama(settings: Sequence[LlamaSetting], *, model: str = "qwen2.5-0.5b", prompt_tokens: int = 1500,
                suffix_tokens: int = 200, generate: int = 48, rounds: int = 2) -> dict[str, Any]:
    """Prompt tok/s (whole, and the suffix after a shared prefix) and generation tok/s per setting."""
    import llama_cpp

    from fhs.llm.models import model_path, requantized

    path = model_path(model)
    engines = [llama_cpp.Llama(model_path=str(requantized(path, s.quant) if s.quant else path), n_ctx=4096,
                               seed=0, verbose=False,
                               n_threads=s.n_threads, n_threads_batch=s.n_threads, n_batch=s.n_batch,
                               n_ubatch=s.n_ubatch, flash_attn=s.flash_attn) for s in settings]
    words = engines[0].tokenize(_prompt_text().encode("utf-8"), add_bos=False)
    while len(words) < prompt_tokens:
        words = words + words
    prompt = list(words[:prompt_tokens])
    banned = {engines[0].token_eos(): -1e9}

    def one(engine, tokens: list[int], keep: int) -> dict[str, float]:
        """Evaluate ``tokens`` after keeping the first ``keep`` of the cache, then generate greedily."""
        engine.n_tokens = keep  # eval() drops the KV cache past n_tokens and evaluates the rest
        started = time.perf_counter()
        engine.eval(tokens[keep:])
        evaluated = time.perf_counter() - started
        out: list[int] = []
        vocab = engine.n_vocab()
        started = time.perf_counter()
        for _ in range(generate):
            logits = np.ctypeslib.as_array(engine._ctx.get_logits_ith(-1), shape=(vocab,)).copy()
            for token, bias in banned.items():
                logits[token] += bias
            token = int(np.argmax(logits))
            out.append(token)
            engine.eval([token])
        return {"prompt_s": evaluated, "prompt_tokens": len(tokens) - keep,
                "gen_s": time.perf_counter() - started, "tokens": out}

    stats: list[dict[str, list[float]]] = [{"whole": [], "suffix": [], "gen": []} for _ in settings]
    generated: list[list[int]] = [[] for _ in settings]
    for r in range(rounds):
        for k in (range(len(settings)) if r % 2 == 0 else reversed(range(len(settings)))):
            engine = engines[k]
            whole = one(engine, prompt, 0)
            shared = one(engine, prompt, prompt_tokens - suffix_tokens)  # the prefix is still cached
            stats[k]["whole"].append(whole["prompt_tokens"] / whole["prompt_s"])
            stats[k]["suffix"].append(shared["prompt_tokens"] / shared["prompt_s"])
            stats[k]["gen"].append(generate / whole["gen_s"])
            generated[k] = whole["tokens"]
    rows = []
    for k, setting in enumerate(settings):
        whole_tps = statistics.median(stats[k]["whole"])
        suffix_tps = statistics.median(stats[k]["suffix"])
        gen_tps = statistics.median(stats[k]["gen"])
        seconds = prompt_tokens / whole_tps + generate / gen_tps
        shared_seconds = suffix_tokens / suffix_tps + generate / gen_tps
        rows.append({"setting": setting.label(), **asdict(setting), "prompt_tok_s": round(whole_tps, 1),
                     "suffix_tok_s": round(suffix_tps, 1), "gen_tok_s": round(gen_tps, 1),
                     "call_s": round(seconds, 2), "call_s_shared_prefix": round(shared_seconds, 2),
                     "same_tokens": generated[k] == generated[0]})
    base = rows[0]["call_s"]
    for row in rows:
        row["ratio"] = round(base / row["call_s"], 2)
    return {"model": model, "prompt_tokens": prompt_tokens, "suffix_tokens": suffix_tokens, "generate": generate,
            "rounds": rounds, "llama_cpp": llama_system_info(), "rows": rows}


def sampling_requests(datasets: Sequence[str] = ("codiesp", "fincl"), methods: Sequence[str] = ("fhs",), *,
                      facts: int = 1, data: str | Path | None = None) -> list:
    """The requests ``methods`` send on each dataset's first ``facts`` contexts (cpu profile, simulated answers)."""
    from dev.bench_prefix import simulated_logs
    from fhs.method.config import FHSConfig

    order = FHSConfig().prompt_order
    logs = simulated_logs(datasets, methods, facts=facts, profile="cpu", orders=[order], data=data, progress=False)
    return logs[order].requests


def bench_sampling(requests: Sequence[Any], *, model: str = "qwen2.5-0.5b", n_ctx: int = 8192) -> dict[str, Any]:
    """Generated tokens/s with grammar sampling over every token and with the likeliest-first step."""
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import model_path

    names = ("every token", "likeliest first")
    backends = [LlamaCppBackend(model_path(model), n_ctx=n_ctx, likeliest_first=flag, model_name=model)
                for flag in (False, True)]
    replies: list[list[str]] = [[], []]
    totals = [{"calls": 0, "tokens_out": 0, "seconds": 0.0, "generate_seconds": 0.0} for _ in names]
    for i, request in enumerate(requests):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            (answer,) = backends[k].complete([request])
            replies[k].append(answer.text)
            total = totals[k]
            total["calls"] += 1
            total["tokens_out"] += answer.tokens_out
            total["seconds"] += answer.seconds
            total["generate_seconds"] += answer.seconds - (answer.prompt_seconds or 0.0)
    rows = []
    for k, name in enumerate(names):
        total = totals[k]
        rows.append({"setting": name, **{key: round(v, 2) for key, v in total.items()},
                     "gen_tok_s": round(total["tokens_out"] / total["generate_seconds"], 1),
                     "same_replies": sum(a == b for a, b in zip(replies[k], replies[0])),
                     "narrowed": backends[k].sampled.get("narrowed", 0), "whole": backends[k].sampled.get("whole", 0)})
    for row in rows:
        row["ratio"] = round(rows[0]["seconds"] / row["seconds"], 2)
    return {"model": model, "requests": len(requests), "llama_cpp": llama_system_info(), "rows": rows}


# --- the comparisons ``python -m dev.bench_cpu`` makes ---------------------------------------------------

def encoder_grid(isas: Sequence[str], model: str = "minilm-int8-d32", chunk: int = 128) -> list[EncoderSetting]:
    """Per level: the book's cut (32 word pieces) against the earlier one (64), batching by
    characters against by tokens, and a build's chunks of ``chunk`` texts in one two-thread
    session against two forked one-thread processes; on the first level also threads, batch
    size, spinning and two batches at once (streams)."""
    grid: list[EncoderSetting] = []
    for n, isa in enumerate(isas):
        grid += [EncoderSetting("minilm-int8-d64", isa=isa), EncoderSetting(model, order="chars", isa=isa),
                 EncoderSetting(model, isa=isa)]
        if n == 0:
            grid += [EncoderSetting(model, isa=isa, threads=1), EncoderSetting(model, isa=isa, batch_size=8),
                     EncoderSetting(model, isa=isa, batch_size=128), EncoderSetting(model, isa=isa, spinning=False),
                     EncoderSetting(model, isa=isa, streams=2)]
        grid += [EncoderSetting(model, isa=isa, chunk=chunk), EncoderSetting(model, isa=isa, chunk=chunk, processes=2)]
    return grid


LLAMA_GRID = (LlamaSetting(), LlamaSetting(n_ubatch=128), LlamaSetting(n_ubatch=256),
              LlamaSetting(n_batch=1024, n_ubatch=1024), LlamaSetting(flash_attn=True), LlamaSetting(n_threads=1),
              LlamaSetting(quant="Q8_0"), LlamaSetting(quant="Q4_0"))


def _sample_texts(taxonomy: str, data: str | Path | None, n: int) -> list[str]:
    """A seeded sample of a taxonomy's concept texts (what the dense index embeds); a name or a concept file."""
    import random

    from fhs.data.taxonomies import load_taxonomy, load_taxonomy_file
    from fhs.retrieval.dense import concept_texts

    loaded = load_taxonomy_file(taxonomy) if Path(taxonomy).is_file() else load_taxonomy(taxonomy, data)
    texts = concept_texts(loaded)
    return random.Random(0).sample(texts, min(n, len(texts)))


def run_bench_cpu(*, part: str = "all", isas: Sequence[str] | None = None, taxonomy: str = "icd-10-cm",
                  data: str | Path | None = None, concepts: int = 512, rounds: int = 3,
                  prompt_tokens: int = 1500, llama_model: str = "qwen2.5-0.5b",
                  sampling_facts: int = 1) -> dict[str, Any]:
    """The encoder, llama.cpp and grammar-sampling comparisons, each printed as its table when done."""
    result: dict[str, Any] = {"cpu": cpu_record()}
    if part in ("encoder", "all"):
        if isas is None:
            isas = ["native", "x86-64-v3"] if can_mask() else ["native"]
        from fhs.retrieval.dense import CHECKPOINT_EVERY

        chunk = min(CHECKPOINT_EVERY, -(-concepts // 4))  # a build's chunks, four or more of them
        encoder = bench_encoder(_sample_texts(taxonomy, data, concepts), encoder_grid(isas, chunk=chunk),
                                rounds=rounds)
        encoder["taxonomy"] = taxonomy
        print(format_encoder(encoder), flush=True)
        result["encoder"] = encoder
    if part in ("llama", "all"):
        llama = bench_llama(LLAMA_GRID, model=llama_model, prompt_tokens=prompt_tokens,
                            suffix_tokens=max(1, prompt_tokens // 8), rounds=max(1, min(rounds, 2)))
        print(format_llama(llama), flush=True)
        result["llama"] = llama
    if part in ("sampling", "all"):
        sampling = bench_sampling(sampling_requests(facts=sampling_facts, data=data), model=llama_model)
        print(format_sampling(sampling), flush=True)
        result["sampling"] = sampling
    return result


# --- tables ----------------------------------------------------------------------------------

def _table(head: list[str], columns: Sequence[tuple[str, int, Any]], rows: Sequence[dict[str, Any]],
           last: tuple[str, Any] | None = None) -> str:
    """Settings side by side: ``columns`` are (header, width, value of a row), the first one left-aligned;
    ``last`` (header, value), if any, closes each line unpadded."""
    def line(cells: Sequence[Any], end: Any) -> str:
        first, *rest = cells
        return f"{first:<{columns[0][1]}}" + "".join(f"{c:>{w}}" for c, (_, w, _) in zip(rest, columns[1:])) \
            + ("" if last is None else f"  {end}")

    return "\n".join(head + [line([h for h, _, _ in columns], last and last[0])]
                     + [line([value(row) for _, _, value in columns], last and last[1](row)) for row in rows])


def _key(name: str) -> Any:
    return lambda row: row[name]


def format_encoder(result: dict[str, Any]) -> str:
    head = [f"encoder: {result['concepts']} concept texts, median of {result['rounds']} rounds"]
    head += [f"  {isa}: {cpu['cpu']}; CPUID {cpu['CPUID in this process']}; {cpu['ONNX Runtime kernels']}"
             for isa, cpu in result["cpu"].items()]
    columns = [("setting", 50, _key("setting")), ("concepts/s", 11, _key("concepts_per_s")),
               ("ratio", 7, _key("ratio")), ("spread s", 12, _key("spread")),
               ("max |d|", 10, lambda row: f"{row['max_abs_diff']:.1e}"),
               ("min cos", 10, lambda row: f"{row['min_cosine']:.6f}")]
    return _table(head, columns, result["rows"])


def format_llama(result: dict[str, Any]) -> str:
    head = [f"llama.cpp {result['model']}: prompt {result['prompt_tokens']} tokens (shared prefix: last "
            f"{result['suffix_tokens']} evaluated), {result['generate']} generated; the backend evaluates "
            f"prompts ubatch {N_UBATCH} (the first row: llama.cpp's default); {result['llama_cpp']}"]
    columns = [("setting", 28, _key("setting")), ("prompt tok/s", 13, _key("prompt_tok_s")),
               ("suffix tok/s", 13, _key("suffix_tok_s")), ("gen tok/s", 10, _key("gen_tok_s")),
               ("call s", 8, _key("call_s")), ("shared s", 9, _key("call_s_shared_prefix")),
               ("ratio", 7, _key("ratio"))]
    return _table(head, columns, result["rows"], ("same tokens", _key("same_tokens")))


def format_sampling(result: dict[str, Any]) -> str:
    head = [f"grammar sampling, {result['model']}: {result['requests']} requests a method sends "
            f"(cpu profile), each answered both ways; {result['llama_cpp']}"]
    columns = [("setting", 18, _key("setting")), ("tokens out", 11, _key("tokens_out")),
               ("call s", 9, _key("seconds")), ("gen s", 9, _key("generate_seconds")),
               ("gen tok/s", 10, _key("gen_tok_s")), ("ratio", 7, _key("ratio")),
               ("narrowed", 10, _key("narrowed")), ("whole", 7, _key("whole"))]
    return _table(head, columns, result["rows"],
                  ("same replies", lambda row: f"{row['same_replies']}/{result['requests']}"))


def main(argv: Sequence[str] | None = None) -> int:
    from dev.cli import names, write_json

    parser = argparse.ArgumentParser(prog="python -m dev.bench_cpu", description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["encoder", "llama", "sampling", "all"], default="all",
                        help="the dense encoder's concepts/s, llama.cpp's tokens/s, grammar sampling "
                             "(every token against likeliest first), or all three")
    parser.add_argument("--isa", default=None,
                        help="comma-separated instruction-set levels for the encoder, native and/or x86-64-v3 "
                             "(AVX-512/VNNI/AMX masked from CPUID; default both where the CPU allows masking)")
    parser.add_argument("--taxonomy", default="icd-10-cm",
                        help="whose concept texts the encoder embeds (a built-in name or a concept file)")
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--concepts", type=int, default=512, help="concept texts embedded per setting and round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per setting")
    parser.add_argument("--prompt-tokens", type=int, default=1500,
                        help="llama.cpp prompt length (the cpu profile's calls run 1-3k tokens)")
    parser.add_argument("--facts", type=int, default=1, help="sampling: facts per dataset, whole contexts")
    parser.add_argument("--model", default="qwen2.5-0.5b", help="llama, sampling: the GGUF model")
    parser.add_argument("--out", default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    result = run_bench_cpu(part=args.part, isas=names(args.isa) if args.isa else None, taxonomy=args.taxonomy,
                           data=args.data, concepts=args.concepts, rounds=args.rounds,
                           prompt_tokens=args.prompt_tokens, llama_model=args.model, sampling_facts=args.facts)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
    else:
        sys.exit(main())
