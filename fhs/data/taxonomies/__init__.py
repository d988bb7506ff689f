"""Taxonomies by name, and a generic loader for a user's own concept file.

``load_taxonomy("us-gaap-2024")`` and ``load_taxonomy("icd-10-cm")`` return
the inventories the book's chapters retrieve against. Each load is cached in
the process (the same name and options return the same object), and the slow
ICD build is also cached on disk (see ``fhs.data.taxonomies.cache``). Loader
modules are imported lazily, so ICD work needs neither lxml nor openpyxl.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError
from fhs.data.taxonomy import Taxonomy


@dataclass(frozen=True)
class TaxonomySpec:
    name: str
    module: str
    function: str
    uses_data_dir: bool
    description: str


TAXONOMIES: dict[str, TaxonomySpec] = {
    spec.name: spec
    for spec in (
        TaxonomySpec(
            "us-gaap-2024",
            "fhs.data.taxonomies.usgaap",
            "load_us_gaap_2024",
            True,
            "US-GAAP 2024: FinTagging's 17,388-concept inventory with FASB definitions merged",
        ),
        TaxonomySpec(
            "icd-10-cm",
            "fhs.data.taxonomies.icd10cm",
            "load_icd10cm",
            False,
            "ICD-10-CM billable codes from the simple-icd-10-cm package",
        ),
    )
}


def taxonomy_names() -> list[str]:
    return list(TAXONOMIES)


def _loader(spec: TaxonomySpec) -> Callable[..., Taxonomy]:
    return getattr(importlib.import_module(spec.module), spec.function)


def load_taxonomy(name: str, data_dir: str | Path | None = None, **options) -> Taxonomy:
    """The taxonomy ``name`` (see ``TAXONOMIES``); ``options`` go to its loader.

    Repeated calls with the same name, data directory and options return the
    same object without reloading.
    """
    spec = TAXONOMIES.get(name)
    if spec is None:
        raise InputError(
            f"unknown taxonomy {name!r}",
            field="taxonomy",
            fix=f"choose one of {', '.join(TAXONOMIES)}, or load a concept file with load_taxonomy_file",
        )
    accepted = [
        parameter.name
        for parameter in inspect.signature(_loader(spec)).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(
            f"taxonomy {name!r} has no option {', '.join(unknown)}",
            field=unknown[0],
            fix=f"its options are: {', '.join(accepted) or 'none'}",
        )
    # The data directory only matters to loaders that read it; resolving it here
    # makes $FHS_DATA part of the cache key.
    directory = None
    if spec.uses_data_dir:
        from fhs.data.datadir import data_dir as resolve_data_dir

        directory = str(resolve_data_dir(data_dir).resolve())
    try:
        frozen = tuple(sorted(options.items()))
        hash(frozen)
    except TypeError:
        raise InputError(
            f"options of taxonomy {name!r} must be plain values (str, bool, number)", field="options"
        ) from None
    return _load_cached(name, directory, frozen)


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, directory: str | None, options: tuple[tuple[str, object], ...]) -> Taxonomy:
    loader = _loader(TAXONOMIES[name])
    return loader(directory, **dict(options)) if directory is not None else loader(**dict(options))


def clear_taxonomy_cache() -> None:
    """Forget taxonomies loaded in this process (tests; a notebook that changed the data)."""
    _load_cached.cache_clear()


def load_taxonomy_file(path: str | Path, name: str | None = None) -> Taxonomy:
    """A taxonomy from a JSONL/CSV/TSV concept file (fields id, label[, definition, datatype, ...])."""
    from fhs.data.taxonomies.generic import load_generic

    return load_generic(path, name)


__all__ = [
    "TAXONOMIES",
    "TaxonomySpec",
    "clear_taxonomy_cache",
    "load_taxonomy",
    "load_taxonomy_file",
    "taxonomy_names",
]
