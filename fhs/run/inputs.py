"""Everything one run needs, loaded once: facts, taxonomy and a retriever (bm25, dense or hybrid).

Chapters and the command line both start here, so a notebook and ``fhs run``
see the same facts, the same index and the same retrieval settings.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError, shown
from fhs.core.files import cache_dir
from fhs.data.datasets import DatasetSpec, resolve_dataset, taxonomy_dataset
from fhs.data.datasets.loaded import files_dataset, load_dataset
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.backends import ORACLE, Backend, ClientSettings, backend_for, backend_named
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.retrieval.bm25 import SETTING_RULES, RetrievalConfig
from fhs.retrieval.encoders import DEFAULT_MODEL
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, Searcher, make_retriever, retriever_inputs
from fhs.run.digests import facts_digest, file_digest, files_digest, taxonomy_digest
from fhs.run.profiles import RunProfile, get_profile


@dataclass
class Experiment:
    spec: DatasetSpec
    taxonomy: Taxonomy
    facts: list[Fact]
    retriever: Searcher
    domain: str | None = None  # a domain name or YAML path overriding the dataset's own

    def domain_name(self) -> str:
        """The domain LLM methods use: the one given, else the dataset's; an error when there is none."""
        chosen = self.domain or self.spec.domain
        if not chosen:
            from fhs.data.domain import available_domains

            raise InputError(
                f"no domain for the facts of {self.spec.description}",
                field="domain",
                fix=f"LLM methods need the taxonomy's dimensions: pass --domain FILE.yaml (check it "
                f"with `fhs domain check FILE.yaml`) or one of {', '.join(available_domains())}",
            )
        return chosen

    def fingerprint(self, *, llm: bool) -> dict[str, Any]:
        """SHA-256 digests of what a run reads (the run stamp's ``inputs``, see fhs/run/digests.py)."""
        from fhs.data.domain import domain_path
        from fhs.method.prompting import EVIDENCE_FIRST_DIR, PROMPTS_DIR

        inputs: dict[str, Any] = {
            "facts": _once(facts_digest, self.facts),
            "taxonomy": _once(taxonomy_digest, self.taxonomy),
        }
        if retriever_inputs(self.retriever):  # dense/hybrid: the embedding model's files
            inputs["retriever"] = retriever_inputs(self.retriever)
        if llm:
            inputs["domain"] = file_digest(domain_path(self.domain_name()))
            inputs["prompts"] = files_digest([*PROMPTS_DIR.glob("*.txt"), *EVIDENCE_FIRST_DIR.glob("*.txt")])
        return inputs

    def llm_context(
        self, model: ModelChoice, config: FHSConfig | None = None, *, seed: int | None = None, **kw
    ) -> MethodContext:
        """A method context with a model, the dataset's domain and the profile's FHS knobs.

        The list depth and w_cov come from the retriever, the seed from ``seed`` (else the model choice's).
        """
        from fhs.data.domain import load_domain
        from fhs.llm.server_info import context_window

        config = (config or model.profile.fhs_config()).replace(
            k=self.retriever.config.top_k, w_cov=self.retriever.config.w_cov, seed=model.seed if seed is None else seed
        )
        domain = load_domain(self.domain_name())
        gold = model.gold_llm(self.facts, self.taxonomy, domain)
        if gold is not None:  # answers from this experiment's gold: no cache, no ledger, no model
            kw.setdefault("ledger", None)
            return self.method_context(llm=gold, domain=domain, config=config, **kw)
        llm = model.llm()
        # prompt budgets stay within the model's context: the server's or engine's, else the profile's
        config = config.replace(context_tokens=context_window(llm) or config.context_tokens)
        kw.setdefault("ledger", model.ledger())
        return self.method_context(llm=llm, domain=domain, config=config, **kw)

    def method_context(self, **kw) -> MethodContext:
        options = {"oracle_with_id": self.spec.oracle_with_id, **kw.pop("options", {})}
        return MethodContext(taxonomy=self.taxonomy, retriever=self.retriever, options=options, **kw)


_DIGESTS: dict[tuple[int, object], tuple[object, str]] = {}


def _once(digest, value) -> str:
    """``digest(value)`` computed once per process and object (facts and taxonomies are not changed in
    place; holding the object keeps its id() unique)."""
    key = (id(value), digest)
    if key not in _DIGESTS:
        _DIGESTS[key] = (value, digest(value))
    return _DIGESTS[key][1]


_RETRIEVERS: dict[tuple, tuple[Taxonomy, Searcher]] = {}


def cached_retriever(
    taxonomy: Taxonomy,
    config: RetrievalConfig,
    kind: str = DEFAULT_RETRIEVER,
    model: str = DEFAULT_MODEL,
    cache_key: str | None = None,
) -> Searcher:
    """Index a taxonomy once per process, retriever and configuration (keyed on the object itself).

    ``hybrid`` reuses the ``dense`` retriever of the same taxonomy, so the
    embedding matrix is read once, and a BM25 retriever without coverage, whose index
    is the deployed one's on disk (coverage is a scoring term, not part of the index,
    and building ICD-10-CM's again takes seconds). ``cache_key`` (a digest of a user's taxonomy
    file) also keeps a BM25 index on disk across runs.
    """
    key = (id(taxonomy), config, kind, model if kind != "bm25" else None)
    if key not in _RETRIEVERS:
        options: dict = {}
        if kind == "bm25":  # a built-in taxonomy is keyed by its content, as the run stamp digests it
            options = {"cache_key": cache_key or _once(taxonomy_digest, taxonomy)}
        elif kind == "dense":
            options = {"model": model}
        elif kind == "hybrid":
            plain = replace(config, w_cov=0.0)
            options = {
                "dense": cached_retriever(taxonomy, plain, "dense", model),
                "bm25": cached_retriever(taxonomy, plain, "bm25", cache_key=cache_key),
            }
        # holding the taxonomy keeps id() unique
        _RETRIEVERS[key] = (taxonomy, make_retriever(kind, taxonomy, config, **options))
    return _RETRIEVERS[key][1]


def retrieval_config(source: str | DatasetSpec, retriever: str = DEFAULT_RETRIEVER, **overrides) -> RetrievalConfig:
    """A dataset's retrieval settings (``source``: its spec, or a taxonomy's name, which takes those of the
    first built-in dataset over it); dense and hybrid leave label coverage off unless ``w_cov`` is given
    (the authors' dense and hybrid retrievers have no coverage term)."""
    spec = source if isinstance(source, DatasetSpec) else taxonomy_dataset(source)
    base = RetrievalConfig()
    settings, where = (spec.retrieval, spec.source) if spec is not None else ((), None)
    for name, value in settings:
        if name not in {f.name for f in fields(RetrievalConfig)}:
            raise InputError(
                "not a retrieval setting",
                path=where,
                field=f"retrieval.{name}",
                fix=f"use {', '.join(f.name for f in fields(RetrievalConfig))}",
            )
        problem = SETTING_RULES[name](value)
        if problem:
            raise InputError(f"{problem}, got {shown(value)}", path=where, field=f"retrieval.{name}")
        base = replace(base, **{name: value})
    if retriever != DEFAULT_RETRIEVER:
        base = replace(base, w_cov=0.0)
    given = {k: v for k, v in overrides.items() if v is not None}
    for name, value in given.items():  # a chapter's parameter or a caller's value: the same rules
        problem = SETTING_RULES[name](value) if name in SETTING_RULES else None
        if problem:
            raise InputError(f"{problem}, got {shown(value)}", field=name)
    return replace(base, **given)


def load_experiment(
    dataset: str | Path | DatasetSpec,
    *,
    data: str | Path | None = None,
    limit: int | None = None,
    w_cov: float | None = None,
    progress: bool = True,
    retriever: str = DEFAULT_RETRIEVER,
    dense_model: str = DEFAULT_MODEL,
    **retrieval_overrides,
) -> Experiment:
    """A dataset's experiment: ``dataset`` is a built-in name, a spec file's path or a ``DatasetSpec``.

    The data layer resolves the spec once and reads it once (``fhs.data.datasets.loaded``); between
    the two, the spec's retrieval settings are checked, so a bad one fails before anything is read.
    """
    if limit is not None and limit < 1:  # 0 leaves nothing to run; a negative one cut facts off the end
        raise InputError(f"must be at least 1, got {limit}", field="limit", fix="use at least one fact")
    spec = dataset if isinstance(dataset, DatasetSpec) else resolve_dataset(dataset)
    config = retrieval_config(spec, retriever, w_cov=w_cov, **retrieval_overrides)
    loaded = load_dataset(spec, data, progress=progress)
    facts = loaded.facts[:limit] if limit is not None else loaded.facts
    cache_key = file_digest(spec.taxonomy_file) if spec.taxonomy_file is not None else None
    return Experiment(
        spec=spec,
        taxonomy=loaded.taxonomy,
        facts=facts,
        retriever=cached_retriever(loaded.taxonomy, config, retriever, dense_model, cache_key),
    )


def load_experiment_from_files(
    facts_path: str | Path,
    taxonomy_path: str | Path,
    *,
    domain: str | None = None,
    w_cov: float | None = None,
    retriever: str = DEFAULT_RETRIEVER,
    dense_model: str = DEFAULT_MODEL,
    data: str | Path | None = None,
    **retrieval_overrides,
) -> Experiment:
    """An adapter's own run: located facts (JSONL) against a taxonomy file or a built-in one by name,
    searched with ``retriever`` (``fhs.data.datasets.loaded.files_dataset`` says which settings and domain
    each brings). A concept file has no domain: LLM methods then need ``domain`` (a bundled name or a YAML
    path) and stop with an error rather than borrow another taxonomy's dimensions (``Experiment.domain_name``).
    """
    experiment = load_experiment(
        files_dataset(facts_path, taxonomy_path, domain),
        data=data,
        w_cov=w_cov,
        retriever=retriever,
        dense_model=dense_model,
        **retrieval_overrides,
    )
    return replace(experiment, domain=domain)


@dataclass
class ModelChoice:
    """Which model a run uses: the profile's, unless the caller names another (plain data; what each backend
    needs, builds and records is its ``fhs.llm.backends.Backend``)."""

    profile: RunProfile
    backend: str
    model: str
    base_urls: tuple[str, ...] = ()
    seed: int = 0
    cache_path: Path | None = None
    # How an OpenAI-compatible server gets the JSON schema: "json_schema" (vLLM), "json_object"
    # or "gbnf" (llama.cpp's server; gbnf also blocks raw control characters), or "none".
    structured: str | None = None
    replay_unparsed: bool = False  # serve cached answers a stage could not parse instead of asking again
    any_server: bool = False  # replay answers cached from another server URL (same model name)
    max_in_flight: int | None = None  # requests in flight per server URL (None: the profile's)
    thinking: bool | None = None  # the chat template's thinking mode (None: the profile's)
    replay: Path | None = None  # an `fhs archive` file: every answer comes from it, no server is asked
    # An OpenAI-compatible server's client (None: fhs.llm.openai's defaults): the deadline of one request
    # attempt, how long a request goes on with no successful answer from the server before it gives up,
    # and the first wait before asking again where the server names none (doubled at each try)
    request_timeout: float | None = None
    give_up_after: float | None = None
    retry_backoff: float | None = None
    # backend "oracle" only: "hypotheses=P,verdicts=Q" (fhs.llm.oracle.OracleNoise); None is no noise
    oracle_noise: str | None = None
    _llm: object = field(default=None, compare=False, repr=False)
    _ledger: object = field(default=None, compare=False, repr=False)

    @classmethod
    def resolve(
        cls,
        profile: str | RunProfile,
        *,
        backend: str | None = None,
        model: str | None = None,
        base_urls=None,
        seed: int = 0,
        cache: str | Path | None = None,
        structured: str | None = None,
        replay_unparsed: bool = False,
        any_server: bool = False,
        max_in_flight: int | None = None,
        thinking: bool | None = None,
        replay: str | Path | None = None,
        request_timeout: float | None = None,
        give_up_after: float | None = None,
        retry_backoff: float | None = None,
        oracle_noise: str | None = None,
    ) -> ModelChoice:
        """The choice the options name, the profile's filling the rest. The cache and archive paths are made
        absolute here: a process keeps its clients by them, and a relative one names another file once the
        process is in another folder."""
        chosen = get_profile(profile) if isinstance(profile, str) else profile
        named = backend_named(backend or chosen.backend)
        if oracle_noise is not None and named.gold is None:
            raise InputError(
                f"oracle noise is for the {ORACLE} backend only",
                field="oracle-noise",
                fix=f"pass --backend {ORACLE} with it, or leave it out",
            )
        urls = tuple(base_urls or ()) or (chosen.base_urls if named.servers else ())
        checked = named.check(
            ClientSettings(
                named.name,
                model or chosen.model,
                base_urls=urls,
                structured=structured,
                any_server=any_server,
                max_in_flight=int(max_in_flight) if max_in_flight is not None else None,
                thinking=thinking,
                oracle_noise=oracle_noise,
                replay=Path(replay).absolute() if replay else None,
            )
        )
        return cls(
            profile=chosen,
            backend=checked.backend,
            model=checked.model,
            base_urls=checked.base_urls,
            seed=seed,
            cache_path=(Path(cache) if cache else default_llm_cache()).absolute(),
            structured=structured,
            replay_unparsed=replay_unparsed,
            any_server=any_server,
            max_in_flight=checked.max_in_flight,
            thinking=thinking,
            replay=checked.replay,
            request_timeout=_seconds(request_timeout, "request_timeout"),
            give_up_after=_seconds(give_up_after, "give_up_after"),
            retry_backoff=_seconds(retry_backoff, "retry_backoff"),
            oracle_noise=checked.oracle_noise,
        )

    def thinking_mode(self) -> bool:
        return self.profile.thinking if self.thinking is None else bool(self.thinking)

    def settings(self) -> ClientSettings:
        """The client's settings, the profile's filling what the choice leaves open."""
        return ClientSettings(
            self.backend,
            self.model,
            base_urls=self.base_urls,
            structured=self.structured,
            any_server=self.any_server,
            max_in_flight=self.max_in_flight or self.profile.max_in_flight,
            thinking=self.thinking_mode(),
            request_timeout=self.request_timeout,
            give_up_after=self.give_up_after,
            retry_backoff=self.retry_backoff,
            oracle_noise=self.oracle_noise,
            replay=self.replay,
            cache_path=self.cache_path,
            replay_unparsed=self.replay_unparsed,
        )

    def answerer(self) -> Backend:
        """The backend that answers this choice's requests (a replay where an archive is given)."""
        return backend_for(self.settings())

    def llm(self):
        """The cached model client (every call goes through the response cache, or the archive).

        Built once per process for each settings: the choices of several seeds share one client,
        so a local model is loaded once and identical requests in flight together are sent once.
        """
        if self._llm is None:
            settings = self.settings()
            with _CLIENTS_LOCK:
                if settings not in _CLIENTS:
                    _CLIENTS[settings] = backend_for(settings).client(settings)
                self._llm = _CLIENTS[settings]
        return self._llm

    def gold_llm(self, facts: list[Fact], taxonomy: Taxonomy, domain: object):
        """A model answering from ``facts``' gold (the oracle), or None for a backend that does not."""
        gold = self.answerer().gold
        return None if gold is None else gold(self.settings(), facts, taxonomy, domain)

    def fingerprint(self) -> dict[str, object]:
        """What identifies the model's weights: the GGUF's SHA-256, or the server's model and URLs."""
        return backend_named(self.backend).fingerprint(self.settings())

    def ledger(self):
        """The verdict ledger beside the response cache (``verdicts.sqlite``), opened once; a replay's own."""
        if self._ledger is None and self.replay is not None:
            from fhs.run.archive import replay_ledger

            self._ledger = replay_ledger(self.replay, self.cache_path)
        if self._ledger is None:
            from fhs.run.ledger import ledger_beside

            key = ("ledger", str(self.cache_path))
            with _CLIENTS_LOCK:
                if key not in _CLIENTS:
                    _CLIENTS[key] = ledger_beside(self.cache_path)
                self._ledger = _CLIENTS[key]
        return self._ledger

    def describe(self) -> dict:
        """The model as a run stamp records it (the seed is the run's own, ``fhs.run.spec``)."""
        described: dict[str, object] = {"backend": self.backend, "model": self.model, "structured": self.structured}
        named = backend_named(self.backend)
        if named.sends_thinking and self.thinking_mode():
            described["thinking"] = True  # off (the paper) leaves the description as it always was
        if named.gold is not None:
            described.update(model=named.name, noise=self.oracle_noise)
        return described


def _seconds(value: float | int | str | None, name: str) -> float | None:
    """A duration in seconds (a chapter parameter or an option) as the client accepts it, or None for the default."""
    from fhs.llm.openai import check_seconds

    if value is None:
        return None
    try:
        seconds = float(value) if not isinstance(value, bool) else value
    except (TypeError, ValueError):
        raise InputError(f"must be a number of seconds, got {shown(value)}", field=name) from None
    return check_seconds(seconds, name)


_CLIENTS: dict[object, object] = {}  # model clients and verdict ledgers by settings (absolute paths, see resolve)
_CLIENTS_LOCK = threading.Lock()


def default_llm_cache() -> Path:
    """``$FHS_CACHE/llm/responses.sqlite`` (or under ``~/.cache/fhs``)."""
    return cache_dir("llm", "responses.sqlite")
