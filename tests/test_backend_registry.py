"""The backend registry: each backend's cache identity is the one earlier runs stored answers under, and the
run layer reaches every backend, the oracle and a replay included, through ``fhs.llm.backends``."""

import pytest

from fhs.llm.cache import ResponseCache
from fhs.llm.contract import Message, Request, Response, cache_key
from fhs.llm.factory import backend_identity
from fhs.run.inputs import ModelChoice

REQUEST = Request(messages=(Message("user", "q0"),), sample_index=0, purpose="hypothesis")

# (backend, model, options) -> (kind, model, name, provenance) and the key of REQUEST, as runs stored them
IDENTITIES = [
    (("openai", "Qwen/Qwen3-32B", {"base_urls": ["http://x:8000/"]}),
     ("openai", "Qwen/Qwen3-32B", "openai:Qwen/Qwen3-32B", "http://x:8000"),
     "991ff9d52e61b4f4d730e02071e3dd7bcde9a28f9c2c17091e7ab5e493964380"),
    (("openai", "m", {"base_urls": ["http://b", "http://a"], "structured": "gbnf", "thinking": True}),
     ("openai-gbnf-thinking", "m", "openai:m", "http://a,http://b"),
     "804e27fa4a55b1d37e4ef390220090548259f667125ea4197d9f6be43300d6c4"),
    (("openai", "m", {"base_urls": ["http://a"], "any_server": True}),
     ("openai", "m", "openai:m", ""), "36977ba97937668d7a422e7c6d74e098cdc0b046a3f3143e1eaaee23047bfe39"),
    (("llama_cpp", "smollm2-135m", {}), ("llama_cpp", "smollm2-135m", "llama_cpp:smollm2-135m", ""),
     "a58a7aa5397d42f83975e3b3e713251941ea3a3a951258a8333ad5eb6c2ec317"),
    (("llama_cpp", "/x/y/model.gguf", {}), ("llama_cpp", "model.gguf", "llama_cpp:model.gguf", ""),
     "938f51609f769905c36d55228c1decf51aebcea2f26257b92a3f7f7c1cb2f3e9"),
    (("vllm", "Qwen/Qwen3-32B", {}), ("vllm", "Qwen/Qwen3-32B", "vllm:Qwen/Qwen3-32B", ""),
     "25c7f4e12eb1cb59cf91b47cc83a5d72d2edda00788839f154e75c90da1c362f"),
    (("vllm", "Qwen/Qwen3-32B", {"thinking": True}), ("vllm-thinking", "Qwen/Qwen3-32B", "vllm:Qwen/Qwen3-32B", ""),
     "8fb20de245d8ba50c2ecbd8feb949691a7827478e572d0a94cf3cbf3a1f08d7b"),
]


@pytest.mark.parametrize("given, identity, key", IDENTITIES)
def test_each_backends_cache_identity_is_the_one_answers_were_stored_under(given, identity, key):
    backend, model, options = given
    assert backend_identity(backend, model, **options) == identity
    kind, served, _, provenance = identity
    assert cache_key(kind, served, REQUEST, provenance=provenance) == key


def test_a_cached_answer_stored_before_is_found_without_asking_the_server(tmp_path):
    stored = "0649f3f3c3c181f3ae0c74d2f6f84bc919d506e773d86a71ce7167865d6c2830"
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put_many([(stored, "openai", "served", "hypothesis", Response(text="kept", model="served"))])
    cache.close()
    # no server answers at this address: the answer can only come from the cache
    llm = ModelChoice.resolve("paper", model="served", base_urls=["http://x"], cache=tmp_path / "c.sqlite").llm()
    assert (llm.kind, llm.model, llm.name, llm.provenance) == ("openai", "served", "openai:served", "http://x")
    assert llm.key(REQUEST) == stored
    assert [r.text for r in llm.complete([REQUEST])] == ["kept"]


def test_what_a_run_stamp_records_of_each_backend_is_unchanged(tmp_path):
    served = ModelChoice.resolve("paper", model="served", base_urls=["http://x"], cache=tmp_path / "c.sqlite")
    assert served.describe() == {"backend": "openai", "model": "served", "structured": None}
    assert served.fingerprint() == {"model": "served", "base_urls": ["http://x"]}
    oracle = ModelChoice.resolve("paper", backend="oracle", seed=3)
    assert oracle.describe() == {"backend": "oracle", "model": "oracle", "structured": None,
                                 "noise": "hypotheses=0,verdicts=0"}
    assert oracle.fingerprint() == {"model": "oracle"}
    cpu = ModelChoice.resolve("cpu")
    assert cpu.describe() == {"backend": "llama_cpp", "model": "qwen2.5-0.5b", "structured": None}
    assert cpu.fingerprint() == {"sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"}
    vllm = ModelChoice.resolve("paper", backend="vllm", thinking=True)
    assert vllm.describe() == {"backend": "vllm", "model": "Qwen/Qwen3-32B", "structured": None, "thinking": True}


def test_no_layer_outside_fhs_llm_compares_a_backend_name():
    import re
    from pathlib import Path

    named = re.compile(r"backend\W.*(==|!=|\bin\b) *(\(?['\"](llama_cpp|openai|oracle|replay|vllm)['\"]|ORACLE\b|"
                       r"SERVER_BACKENDS)")
    root = Path(__file__).resolve().parents[1] / "fhs"
    found = [f"{path.relative_to(root)}:{number}" for path in root.rglob("*.py") if path.parent.name != "llm"
             for number, line in enumerate(path.read_text().splitlines(), 1) if named.search(line)]
    assert found == []


def test_a_backend_is_one_registry_entry_the_run_layer_builds_without_knowing_it(tmp_path, monkeypatch):
    from fhs.llm import backends
    from fhs.llm.backends import Backend

    class Echo:
        kind, model, name = "echo", "m", "echo:m"

        def complete(self, requests):
            return [Response(text=r.messages[0].content, model="m") for r in requests]

    toy = Backend("echo", "answers with the prompt", lambda model, **kw: Echo(),
                  lambda settings: ("echo", settings.model, f"echo:{settings.model}", ""))
    monkeypatch.setitem(backends.BACKENDS, "echo", toy)
    choice = ModelChoice.resolve("cpu", backend="echo", model="m", cache=tmp_path / "c.sqlite")
    assert [r.text for r in choice.llm().complete([REQUEST])] == ["q0"]
    assert choice.describe() == {"backend": "echo", "model": "m", "structured": None}


def test_the_oracle_and_a_replay_are_registered_backends(tmp_path):
    from fhs.core.errors import InputError
    from fhs.llm.backends import BACKENDS, REPLAY, ClientSettings, backend_for
    from fhs.llm.factory import make_llm

    assert BACKENDS["oracle"].gold is not None and not BACKENDS["oracle"].cached
    assert backend_for(ClientSettings("openai", "m", replay=tmp_path / "a.sqlite")) is REPLAY
    assert backend_for(ClientSettings("openai", "m")) is BACKENDS["openai"]
    with pytest.raises(InputError, match="unknown backend 'oracle'"):
        make_llm("oracle", "m")  # built with its dataset, never on its own
    with pytest.raises(InputError, match="one run takes its answers from one of them|from one of them"):
        ModelChoice.resolve("paper", backend="oracle", replay=tmp_path / "a.sqlite")
