"""A simulated OpenAI-compatible server: a batching GPU server's timing, a stand-in model's answers.

    python -m fhs.plan.sim_server --port 8000 [--host 127.0.0.1] [--prefill-tps 20000] [--decode-tps 1500]
        [--max-num-seqs 256] [--time-scale 1.0] [--max-model-len 32768] [--model NAME]
        [--kv-tokens N] [--log FILE.jsonl] [--fixed-latency SECONDS]
        [--busy SHARE [--retry-after SECONDS]] [--hang SHARE] [--drip SECONDS [--drip-share SHARE]] [--seed N]

It answers ``POST /v1/chat/completions`` with :func:`fhs.plan.simulated.simulated_answer`
(valid under the request's own JSON schema, varied by seed; greedy requests
ignore the seed), ``usage`` counted with Qwen's vocabulary (``fhs.llm.tokens``),
and ``finish_reason`` ("length" when the answer is cut at ``max_tokens``);
``GET /v1/models`` lists the model with its ``max_model_len``. A prompt plus
``max_tokens`` over ``max_model_len`` is refused with HTTP 400, as vLLM does.
As vLLM does too, ``POST /tokenize`` (``{"model", "prompt"}``) answers ``{"count",
"tokens", "max_model_len"}``; ``GET /metrics`` reports the KV cache's size in vLLM's
``vllm:cache_config_info`` line (``--kv-tokens`` in blocks of 16); and a request with
``"ignore_eos": true`` decodes all of its ``max_tokens`` (what a decode probe asks).

**Latency model** (a continuous-batching server such as vLLM, idealised):

- ``--max-num-seqs`` sequences run at once; a request beyond them waits in a
  first-come-first-served queue (the client still counts it as in flight).
- Prefill is compute-bound: one prefill lane processes prompt tokens at
  ``--prefill-tps``, so prompts admitted together are prefilled one after another.
- Decode is memory-bound: each engine step advances every running sequence by
  one token and costs the same whether the batch is full or not, so one
  sequence decodes at ``decode-tps / max-num-seqs`` tokens a second. A half
  empty batch wastes half the GPU; that is the cost of a client that does not
  keep the server full.
- A request's latency: queueing + prefill (waiting for the lane included) +
  completion tokens at the per-sequence rate. ``--time-scale`` divides every
  latency (rehearse days of GPU time in hours); ``--fixed-latency S`` instead
  answers every request S seconds (scaled) after it arrived, admitting any
  number at once.

**Measurements.** The server counts the requests in flight (arrived, not yet
answered) and running (admitted to a sequence slot) over time. ``GET /stats``
returns the summary (``?timeline=1`` adds every change point);
``POST /stats/reset`` starts a new measurement; SIGTERM or SIGINT prints the
summary on stderr before exiting. Utilisation is the time-weighted mean of the
requests running, over ``max-num-seqs``, from the first arrival to the last
answer (the time work remained). With ``--log`` each request adds one JSON
line: arrival, start (admitted), finish (seconds since the server started),
prompt and completion tokens, ``max_tokens``, ``finish_reason``, ``purpose``
(from the ``X-FHS-Purpose`` header the fhs client sends, else the body's
``user`` field), the SHA-256 of the prompt (its messages as JSON) and
``prefix_hashes``: a chained hash of every full block of 16 prompt tokens (the
ChatML-wrapped token ids, as vLLM's prefix cache hashes its blocks), so the
prefix two requests share is the count of leading hashes they share, times 16.

**A busy or broken server** (what a long run must survive; each a share of the
chat requests, drawn with ``--seed``): ``--busy`` answers HTTP 429 with
``Retry-After: --retry-after`` at once, before any work; ``--hang`` reads the
request and never answers, holding the connection open until the client gives
up on it; ``--drip S`` sends the answer's body (headers at once) in small
pieces spread over S seconds, for ``--drip-share`` of the answers. ``/stats``
counts them (``busy``, ``hung``, ``dripped``). ``--time-scale`` divides the
Retry-After and the drip's seconds too, so a busy server runs on the same
compressed clock as a healthy one (the tests' busy servers do).

asyncio only, no thread per request: it shares the machine's cores with the client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import random
import signal
import subprocess
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

from fhs.llm.tokens import CHATML_GENERATION_PROMPT, CHATML_PER_MESSAGE, QWEN3_NO_THINKING, default_counter
from fhs.plan.simulated import simulated_answer

COMMAND = (sys.executable, "-m", "fhs.plan.sim_server")  # how to start it as its own process

BLOCK = 16  # tokens per prefix-hash block (vLLM's default KV block size)
PURPOSE_HEADER = "x-fhs-purpose"  # fhs.llm.openai.PURPOSE_HEADER
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass
class Options:
    prefill_tps: float = 20_000.0
    decode_tps: float = 1_500.0
    max_num_seqs: int = 256
    time_scale: float = 1.0
    max_model_len: int = 32_768
    kv_tokens: int = 283_808  # the KV cache's size in tokens (what /metrics reports)
    model: str = "Qwen/Qwen3-32B"
    log: str | None = None
    fixed_latency: float | None = None
    busy: float = 0.0  # share of chat requests answered 429 at once
    retry_after: float = 1.0  # the Retry-After of those answers, in seconds
    hang: float = 0.0  # share of chat requests never answered (the connection is held open)
    drip: float = 0.0  # seconds over which an answer's body is sent, piece by piece
    drip_share: float = 1.0  # share of answers sent that way (with drip > 0)
    seed: int = 0


@dataclass
class Level:
    """A count over time: its current value and every change, for time-weighted means."""

    now: int = 0
    changes: list[tuple[float, int]] = field(default_factory=list)
    peak: int = 0

    def move(self, at: float, by: int) -> None:
        self.now += by
        self.peak = max(self.peak, self.now)
        self.changes.append((at, self.now))

    def mean(self, start: float, end: float) -> float:
        """Time-weighted mean over [start, end]."""
        if end <= start:
            return 0.0
        total, level, last = 0.0, 0, start
        for at, value in self.changes:
            if at > start:
                total += level * (min(at, end) - last)
                last = min(at, end)
            level = value
            if at >= end:
                break
        total += level * (end - last)
        return total / (end - start)

    def share_at_least(self, threshold: int, start: float, end: float) -> float:
        if end <= start:
            return 0.0
        covered, level, last = 0.0, 0, start
        for at, value in self.changes:
            if at > start:
                covered += (min(at, end) - last) * (level >= threshold)
                last = min(at, end)
            level = value
        covered += (end - last) * (level >= threshold)
        return covered / (end - start)


class Simulator:
    """The server's state: the sequence slots, the prefill lane, the counters and the log."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.counter = default_counter()
        self.started = time.monotonic()
        self.log = open(options.log, "a", encoding="utf-8") if options.log else None  # noqa: SIM115
        self.draw = random.Random(options.seed).random  # who is refused, hung or dripped
        self.reset()

    def reset(self) -> None:
        self.in_flight, self.running = Level(), Level()
        self.requests = self.refused = self.cut = 0
        self.busy = self.hung = self.dripped = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.first_arrival: float | None = None
        self.last_finish: float | None = None
        self._waiting: deque[asyncio.Future] = deque()
        self._slots_used = 0
        self._lane_free = 0.0

    def clock(self) -> float:
        return time.monotonic() - self.started

    async def admit(self) -> None:
        if self._slots_used < self.options.max_num_seqs and not self._waiting:
            self._slots_used += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        await waiter  # the slot was passed on by release()

    def release(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._slots_used -= 1

    def tokens(self, messages: list[dict], thinking_off: bool) -> tuple[int, list[int]]:
        """Prompt tokens as the server counts them, and the ChatML-wrapped id sequence for prefix hashes."""
        ids: list[int] = []
        total = CHATML_GENERATION_PROMPT + (QWEN3_NO_THINKING if thinking_off else 0)
        tokenize = getattr(self.counter, "tokenize", None)
        for message in messages:
            content = str(message.get("content") or "")
            if tokenize is not None:
                body = tokenize(content)
            else:  # no vocabulary: pieces of 3 characters stand in for tokens (tokens.CharEstimate)
                body = [
                    int.from_bytes(hashlib.sha1(content[i : i + 3].encode()).digest()[:4], "big")
                    for i in range(0, len(content), 3)
                ]
            role = zlib.crc32(str(message.get("role")).encode())
            ids += [-1, role, *body, -2]  # <|im_start|>role ... <|im_end|>
            total += len(body) + CHATML_PER_MESSAGE
        return total, ids

    async def complete(self, body: dict, headers: dict[str, str]) -> tuple[int, dict]:
        arrival = self.clock()
        self.first_arrival = arrival if self.first_arrival is None else self.first_arrival
        self.in_flight.move(arrival, +1)
        try:
            return await self._complete(body, headers, arrival)
        finally:
            self.last_finish = self.clock()
            self.in_flight.move(self.last_finish, -1)

    async def _complete(self, body: dict, headers: dict[str, str], arrival: float) -> tuple[int, dict]:
        options = self.options
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, {"error": {"message": "messages must be a non-empty list", "type": "BadRequestError"}}
        temperature = float(body.get("temperature", 1.0) or 0.0)
        if int(body.get("n", 1) or 1) > 1 and temperature == 0:
            return 400, {"error": {"message": "n must be 1 when using greedy sampling", "type": "BadRequestError"}}
        max_tokens = int(body.get("max_tokens") or 16)
        kwargs = body.get("chat_template_kwargs") or {}
        prompt_tokens, ids = self.tokens(messages, thinking_off=kwargs.get("enable_thinking") is False)
        if prompt_tokens + max_tokens > options.max_model_len:
            self.refused += 1
            message = (
                f"This model's maximum context length is {options.max_model_len} tokens. "
                f"However, you requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or completion."
            )
            return 400, {"error": {"type": "BadRequestError", "message": message}}
        seed = int(body.get("seed") or 0)
        try:
            text = simulated_answer(messages, schema_of(body), seed=seed, temperature=temperature)
        except ValueError as error:  # a schema the stand-in model cannot answer
            return 400, {"error": {"message": str(error), "type": "BadRequestError"}}
        completion = self.counter.count(text) + 1  # + the end-of-turn token
        finish_reason = "stop"
        if body.get("ignore_eos") is True:  # vLLM's extension: decode until max_tokens
            completion = max(completion, max_tokens)
        if completion > max_tokens:
            text, completion, finish_reason = text[: max(1, len(text) * max_tokens // completion)], max_tokens, "length"
            self.cut += 1
        scale = options.time_scale
        if options.fixed_latency is not None:
            start = arrival
            self.running.move(start, +1)
            try:
                await asyncio.sleep(options.fixed_latency / scale)
            finally:
                self.running.move(self.clock(), -1)
        else:
            await self.admit()
            start = self.clock()
            self.running.move(start, +1)
            try:
                prefill_end = max(start, self._lane_free) + prompt_tokens / options.prefill_tps / scale
                self._lane_free = prefill_end
                decode = completion * options.max_num_seqs / options.decode_tps / scale
                await asyncio.sleep(max(0.0, prefill_end + decode - self.clock()))
            finally:
                self.running.move(self.clock(), -1)
                self.release()
        finish = self.clock()
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion
        if self.log is not None:
            self._log(
                self.log,
                body,
                headers,
                arrival,
                start,
                finish,
                prompt_tokens,
                completion,
                max_tokens,
                finish_reason,
                ids,
            )
        return 200, {
            "id": f"chatcmpl-sim-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or options.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
            },
        }

    def _log(
        self,
        log: TextIO,
        body: dict,
        headers: dict[str, str],
        arrival: float,
        start: float,
        finish: float,
        prompt_tokens: int,
        completion: int,
        max_tokens: int,
        finish_reason: str,
        ids: list[int],
    ) -> None:
        prompt = json.dumps(body.get("messages"), ensure_ascii=False, sort_keys=True)
        chain, hashes = hashlib.sha256(), []
        for begin in range(0, len(ids) - len(ids) % BLOCK, BLOCK):
            chain.update(",".join(map(str, ids[begin : begin + BLOCK])).encode() + b";")
            hashes.append(chain.copy().hexdigest()[:16])
        line = {
            "arrival": round(arrival, 4),
            "start": round(start, 4),
            "finish": round(finish, 4),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "max_tokens": max_tokens,
            "finish_reason": finish_reason,
            "purpose": headers.get(PURPOSE_HEADER) or body.get("user") or "",
            "temperature": body.get("temperature"),
            "seed": body.get("seed"),
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            "prefix_block": BLOCK,
            "prefix_hashes": hashes,
        }
        log.write(json.dumps(line) + "\n")
        log.flush()

    def stats(self, timeline: bool = False) -> dict[str, Any]:
        start = self.first_arrival or 0.0
        end = self.last_finish if self.in_flight.now == 0 and self.last_finish is not None else self.clock()
        seqs = self.options.max_num_seqs
        busy = max(end - start, 0.0) if self.first_arrival is not None else 0.0
        summary = {
            "model": self.options.model,
            "max_num_seqs": seqs,
            "time_scale": self.options.time_scale,
            "fixed_latency": self.options.fixed_latency,
            "requests": self.requests,
            "refused": self.refused,
            "cut_at_max_tokens": self.cut,
            "busy": self.busy,
            "hung": self.hung,
            "dripped": self.dripped,
            "in_flight_now": self.in_flight.now,
            "running_now": self.running.now,
            "max_in_flight": self.in_flight.peak,
            "max_running": self.running.peak,
            "busy_seconds": round(busy, 3),
            "mean_in_flight": round(self.in_flight.mean(start, end), 3),
            "mean_running": round(self.running.mean(start, end), 3),
            "utilisation": round(self.running.mean(start, end) / seqs, 4),
            "share_of_time_in_flight_at_least": {
                str(n): round(self.in_flight.share_at_least(n, start, end), 4) for n in sorted({1, 16, 64, 128, seqs})
            },
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if timeline:
            summary["in_flight_timeline"] = [[round(t, 4), n] for t, n in self.in_flight.changes]
        return summary


def schema_of(body: dict) -> dict | None:
    """The JSON schema a request asks for, in any of the fields vLLM reads."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    if fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    for name in ("structured_outputs", "guided_json"):
        value = body.get(name)
        if isinstance(value, dict):
            return value.get("json", value) if name == "structured_outputs" else value
    return None


# ----------------------------------------------------------------------------- HTTP/1.1


async def _handle(sim: Simulator, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
            length = int(headers.get("content-length") or 0)
            if length > MAX_BODY_BYTES:
                await _send(writer, 413, {"error": {"message": "body too large"}}, close=True)
                return
            raw = await reader.readexactly(length) if length else b""
            chat = method == "POST" and urlsplit(target).path.rstrip("/") == "/v1/chat/completions"
            options, extra, drip = sim.options, {}, 0.0
            if chat and options.busy and sim.draw() < options.busy:
                sim.busy += 1
                status, payload = 429, {"error": {"message": "too many requests", "type": "RateLimitError"}}
                extra = {"Retry-After": f"{options.retry_after / options.time_scale:g}"}
            elif chat and options.hang and sim.draw() < options.hang:
                sim.hung += 1
                while await reader.read(65536):  # never answer; wait for the client to give up
                    pass
                return
            else:
                status, payload = await _route(sim, method, target, headers, raw)
                if chat and options.drip and sim.draw() < options.drip_share:
                    sim.dripped += 1
                    drip = options.drip / options.time_scale
            close = headers.get("connection", "").lower() == "close"
            await _send(writer, status, payload, close=close, headers=extra, drip=drip)
            if close:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _route(sim: Simulator, method: str, target: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any]:
    url = urlsplit(target)
    path = url.path.rstrip("/")
    if method == "GET" and path == "/v1/models":
        return 200, {
            "object": "list",
            "data": [
                {
                    "id": sim.options.model,
                    "object": "model",
                    "owned_by": "sim",
                    "max_model_len": sim.options.max_model_len,
                }
            ],
        }
    if method == "GET" and path in ("/stats", "/v1/stats"):
        return 200, sim.stats(timeline=parse_qs(url.query).get("timeline", ["0"])[0] not in ("0", ""))
    if method == "POST" and path in ("/stats/reset", "/v1/stats/reset"):
        sim.reset()
        return 200, {"reset": True}
    if method == "GET" and path in ("/health", "/v1/health"):
        return 200, {"ok": True}
    if method == "GET" and path == "/metrics":
        blocks = sim.options.kv_tokens // BLOCK
        return 200, (
            f'vllm:cache_config_info{{block_size="{BLOCK}",cache_dtype="auto",'
            f'gpu_memory_utilization="0.9",num_gpu_blocks="{blocks}"}} 1.0\n'
        )
    if method == "POST" and path == "/tokenize":
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return 400, {"error": {"message": "a prompt string is required", "type": "BadRequestError"}}
        tokenize = getattr(sim.counter, "tokenize", None)
        tokens = tokenize(body["prompt"]) if tokenize else []
        count = len(tokens) if tokenize else sim.counter.count(body["prompt"])
        return 200, {"count": count, "max_model_len": sim.options.max_model_len, "tokens": tokens}
    if method == "POST" and path == "/v1/chat/completions":
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, {"error": {"message": "the body is not JSON", "type": "BadRequestError"}}
        if not isinstance(body, dict):
            return 400, {"error": {"message": "the body is not a JSON object", "type": "BadRequestError"}}
        return await sim.complete(body, headers)
    return 404, {"error": {"message": f"no route {method} {path}"}}


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    payload: Any,
    close: bool = False,
    headers: dict[str, str] | None = None,
    drip: float = 0.0,
) -> None:
    """One answer; with ``drip``, the headers at once and the body in pieces spread over ``drip`` seconds."""
    data = payload.encode("utf-8") if isinstance(payload, str) else json.dumps(payload).encode("utf-8")
    kind = "text/plain" if isinstance(payload, str) else "application/json"
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large", 429: "Too Many Requests"}.get(
        status, "Error"
    )
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\n{extra}"
        f"Content-Length: {len(data)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    ).encode("latin-1")
    if not drip:
        writer.write(head + data)
        await writer.drain()
        return
    writer.write(head)
    pieces = max(1, min(len(data), 20))
    step = -(-len(data) // pieces)
    for start in range(0, len(data), step):
        await writer.drain()
        await asyncio.sleep(drip / pieces)
        writer.write(data[start : start + step])
    await writer.drain()


async def serve(options: Options, host: str, port: int) -> None:
    sim = Simulator(options)
    server = await asyncio.start_server(
        lambda r, w: _handle(sim, r, w), host, port, limit=MAX_HEADER_BYTES, backlog=1024
    )
    stop = asyncio.get_running_loop().create_future()

    def stopping() -> None:
        if not stop.done():
            stop.set_result(None)

    for name in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(name, stopping)
    bound = server.sockets[0].getsockname()[1]
    print(
        f"sim_server: http://{host}:{bound}/v1 model {options.model}, max-num-seqs {options.max_num_seqs}, "
        f"prefill {options.prefill_tps:g} tok/s, decode {options.decode_tps:g} tok/s, time scale "
        f"{options.time_scale:g}"
        + (f", fixed latency {options.fixed_latency:g} s" if options.fixed_latency is not None else ""),
        flush=True,
    )
    async with server:
        await stop
    print("sim_server: " + json.dumps(sim.stats()), file=sys.stderr, flush=True)
    if sim.log is not None:
        sim.log.close()


def parse_args(argv: list[str] | None = None) -> tuple[Options, str, int]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--prefill-tps", type=float, default=20_000.0, help="prompt tokens a second (one lane)")
    parser.add_argument("--decode-tps", type=float, default=1_500.0, help="generated tokens a second, full batch")
    parser.add_argument("--max-num-seqs", type=int, default=256, help="sequences running at once")
    parser.add_argument("--time-scale", type=float, default=1.0, help="every latency is divided by this")
    parser.add_argument("--max-model-len", type=int, default=32_768, help="prompt + max_tokens allowed")
    parser.add_argument(
        "--kv-tokens", type=int, default=Options.kv_tokens, help="the KV cache's size in tokens, as /metrics reports it"
    )
    parser.add_argument("--model", default="Qwen/Qwen3-32B", help="the served model name")
    parser.add_argument("--log", default=None, help="one JSON line per request to this file")
    parser.add_argument(
        "--fixed-latency",
        type=float,
        default=None,
        help="answer every request this many seconds after it arrived, any number at once",
    )
    parser.add_argument("--busy", type=float, default=0.0, help="share of chat requests answered 429 at once")
    parser.add_argument(
        "--retry-after", type=float, default=1.0, help="the Retry-After of a 429, in seconds (divided by --time-scale)"
    )
    parser.add_argument(
        "--hang", type=float, default=0.0, help="share of chat requests never answered (the connection is held open)"
    )
    parser.add_argument(
        "--drip",
        type=float,
        default=0.0,
        help="send an answer's body in small pieces spread over this many seconds (divided by --time-scale)",
    )
    parser.add_argument("--drip-share", type=float, default=1.0, help="share of answers dripped (with --drip)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the busy, hung and dripped draws")
    args = parser.parse_args(argv)
    for name in ("prefill_tps", "decode_tps", "time_scale"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be above 0")
    if args.max_num_seqs < 1 or args.max_model_len < 1 or args.kv_tokens < BLOCK:
        parser.error(f"--max-num-seqs and --max-model-len must be at least 1, --kv-tokens at least {BLOCK}")
    for name in ("busy", "hang", "drip_share"):
        if not 0 <= getattr(args, name) <= 1:
            parser.error(f"--{name.replace('_', '-')} is a share between 0 and 1")
    if args.retry_after < 0 or args.drip < 0:
        parser.error("--retry-after and --drip are seconds, at least 0")
    options = Options(
        prefill_tps=args.prefill_tps,
        decode_tps=args.decode_tps,
        max_num_seqs=args.max_num_seqs,
        time_scale=args.time_scale,
        max_model_len=args.max_model_len,
        kv_tokens=args.kv_tokens,
        model=args.model,
        log=args.log,
        fixed_latency=args.fixed_latency,
        busy=args.busy,
        retry_after=args.retry_after,
        hang=args.hang,
        drip=args.drip,
        drip_share=args.drip_share,
        seed=args.seed,
    )
    return options, args.host, args.port


# ----------------------------------------------------------------------------- for tests and benchmarks


@contextlib.contextmanager
def running(port: int, *args: str, ready_s: float = 60.0):
    """Run the simulator as its own process (its own core and GIL); yield its base URL; stop it on exit."""
    import httpx

    command = [*COMMAND, "--port", str(port), *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if process.poll() is not None:
                said = process.stderr.read() if process.stderr is not None else ""
                raise RuntimeError(f"sim_server exited with {process.returncode}: {said[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sim_server did not answer within {ready_s:g} s")
            time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def stats(url: str, timeline: bool = False) -> dict:
    import httpx

    root = url.rstrip("/").removesuffix("/v1")
    return httpx.get(f"{root}/stats", params={"timeline": int(timeline)}, timeout=10, trust_env=False).json()


def main(argv: list[str] | None = None) -> int:
    options, host, port = parse_args(argv)
    asyncio.run(serve(options, host, port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
