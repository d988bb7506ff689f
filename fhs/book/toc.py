"""The book's chapters and profiles: which notebooks the TOC lists, with which parameters.

``_toc.yml`` says which chapters exist (a ``book/X`` entry backed by
``notebooks/X.py``; a test holds it to :mod:`fhs.book.registry`); ``fhs/book/profiles.yaml``
(package data) says which parameters each profile gives them. Pure reading, no execution: :mod:`fhs.book.execute` runs
what this module finds.

Two parameters are mappings (:data:`MAPPINGS`): ``server`` (how models are asked) and
``sample`` (how much is run and how it is summarised). A mapping given at several
places (the profile, the chapter's override, the command line) is merged key by key, and
a key given alone joins its mapping: ``-p base_url=URL`` is short for ``-p server.base_url=URL``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.yamlfile import parse_yaml, read_yaml_file

PROFILES = Path(__file__).resolve().parent / "profiles.yaml"  # package data: what each profile passes the chapters


@dataclass(frozen=True)
class Chapter:
    """One TOC entry backed by a notebook source."""

    stem: str  # e.g. "01_readiness_gap"
    source: Path  # notebooks/01_readiness_gap.py
    output: Path  # book/01_readiness_gap.ipynb
    summary: bool = False  # re-run whenever anything before it changed (provenance)


@dataclass(frozen=True)
class ProfileParameters:
    """One profile's entry in fhs/book/profiles.yaml: the papermill parameters every chapter gets
    (the profile's model and sample sizes are ``fhs.run.profiles.RunProfile``)."""

    name: str
    description: str
    parameters: dict[str, Any]


# the keys of each mapping parameter (fhs.book.page reads them)
SERVER_KEYS = ("backend", "model", "base_url", "max_in_flight", "request_timeout", "thinking", "replay", "cache_dir")
SAMPLE_KEYS = ("llm_limit", "llm_fraction", "runs", "seed", "bootstrap_resamples", "protocol_check")
MAPPINGS = {"server": SERVER_KEYS, "sample": SAMPLE_KEYS}
SAMPLE_DEFAULTS: dict[str, Any] = {
    "llm_limit": None,
    "llm_fraction": None,
    "runs": None,
    "seed": 20260724,
    "bootstrap_resamples": 2000,
    "protocol_check": False,
}


def merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``more`` on top of ``base``; the mapping parameters are merged key by key, not replaced."""
    out = dict(base)
    for key, value in more.items():
        if key in MAPPINGS and isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def folded(parameters: dict[str, Any], declared: Iterable[str]) -> dict[str, Any]:
    """The keys of a mapping given alone (``base_url``, ``server.base_url``) moved into the mapping, for a chapter
    that declares the mapping and not the key itself; a null key is the mapping's default and is left out."""
    declared = set(declared)
    homes = {key: name for name, keys in MAPPINGS.items() if name in declared for key in keys if key not in declared}
    out: dict[str, Any] = {}
    into: dict[str, dict[str, Any]] = {}
    for key, value in parameters.items():
        head, dot, tail = key.partition(".")
        name, inner = (head, tail) if dot and head in MAPPINGS else (homes.get(key), key)
        if name is None:
            out[key] = value
        elif value is not None:
            into.setdefault(name, {})[inner] = value
    for name, values in into.items():
        given = out.get(name)
        out[name] = {**(given if isinstance(given, dict) else {}), **values}
    return out


# ----------------------------------------------------------------------------- TOC


def toc_files(toc_path: Path) -> list[str]:
    """Every ``file:`` of a jb-book TOC, in reading order (root first)."""
    try:
        toc = read_yaml_file(toc_path)
    except FileNotFoundError:
        raise InputError("no table of contents", path=toc_path) from None
    if not isinstance(toc, dict) or "root" not in toc:
        raise InputError("a jb-book TOC needs a 'root' entry", path=toc_path, field="root")
    files = [str(toc["root"])]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(str(node["file"]))
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk({k: v for k, v in toc.items() if k != "root"})
    return files


CHAPTER_NAME = re.compile(r"\d\d_\w+")  # a chapter's stem: notebooks/NN_name.py (CONTRIBUTING.md)


def check_chapters(toc_path: Path, stems: Iterable[str]) -> None:
    """The TOC lists exactly the chapters ``stems`` (:mod:`fhs.book.registry`'s), in that order; else a one-line
    error naming the difference. Jupyter Book reads the TOC, so it keeps its copy of the list."""
    listed = [Path(entry).name for entry in toc_files(toc_path) if CHAPTER_NAME.fullmatch(Path(entry).name)]
    stems = list(stems)
    if listed != stems:
        missing, extra = [s for s in stems if s not in listed], [s for s in listed if s not in stems]
        differs = "; ".join(
            part
            for part in (
                missing and f"not listed: {', '.join(missing)}",
                extra and f"not registered: {', '.join(extra)}",
            )
            if part
        )
        raise InputError(
            f"the chapters differ from fhs/book/registry.py's ({differs or 'another order'})",
            path=toc_path,
            fix="list each registered chapter once, as book/<stem>, in the registry's order",
        )


def chapters_from_toc(
    root: Path, toc_name: str = "_toc.yml", notebooks_dir: str = "notebooks", summaries: Iterable[str] = ()
) -> list[Chapter]:
    """The TOC entries that are notebooks: ``book/X`` backed by ``notebooks/X.py``.

    An entry with neither a prose page (``book/X.md``) nor a notebook source is an
    error here, before anything runs, rather than a broken link in the build.
    """
    summaries = set(summaries)
    chapters = []
    for entry in toc_files(root / toc_name):
        entry_path = Path(entry)
        stem = entry_path.name.removesuffix(".ipynb").removesuffix(".md")
        source = root / notebooks_dir / f"{stem}.py"
        prose = root / entry_path.parent / f"{stem}.md"
        if source.is_file():
            if prose.is_file():
                raise InputError(
                    f"both {prose.relative_to(root)} and {source.relative_to(root)} exist",
                    path=root / toc_name,
                    fix="keep one source per TOC entry",
                )
            output = root / entry_path.parent / f"{stem}.ipynb"
            chapters.append(Chapter(stem, source, output, summary=stem in summaries))
        elif not prose.is_file():
            raise InputError(
                f"TOC entry {entry!r} has no source",
                path=root / toc_name,
                fix=f"write {prose.relative_to(root)} or {source.relative_to(root)}",
            )
    return chapters


# ----------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class ProfileFile:
    path: Path
    profiles: dict[str, ProfileParameters]
    chapter_overrides: dict[str, dict[str, dict[str, Any]]]  # stem -> profile -> params
    summaries: tuple[str, ...]

    def profile(self, name: str) -> ProfileParameters:
        try:
            return self.profiles[name]
        except KeyError:
            raise InputError(
                f"unknown profile {name!r}",
                path=self.path,
                field="profiles",
                fix=f"choose one of {', '.join(self.profiles)}",
            ) from None

    def parameters(self, profile: str, stem: str) -> dict[str, Any]:
        """The profile's parameters, the chapter's registry overrides for that profile on top
        (:mod:`fhs.book.registry`), then this file's (a user's own profile file may add some)."""
        from fhs.book.registry import REGISTRY

        entry = next((chapter for chapter in REGISTRY.chapters if chapter.stem == stem), None)
        registered = dict(entry.profile_parameters.get(profile, {})) if entry is not None else {}
        parameters = merged(
            merged(self.profile(profile).parameters, registered), self.chapter_overrides.get(stem, {}).get(profile, {})
        )
        parameters["profile"] = profile
        return parameters


def load_profiles(path: Path) -> ProfileFile:
    """Parse a profile file such as :data:`PROFILES` (see that file for the layout)."""
    try:
        raw = read_yaml_file(path) or {}
    except FileNotFoundError:
        raise InputError("no profile file", path=path) from None
    profiles: dict[str, ProfileParameters] = {}
    for name, spec in (raw.get("profiles") or {}).items():
        if not isinstance(spec, dict) or not isinstance(spec.get("parameters"), dict):
            raise InputError("a profile needs a 'parameters' mapping", path=path, field=f"profiles.{name}.parameters")
        profiles[str(name)] = ProfileParameters(str(name), str(spec.get("description", "")), dict(spec["parameters"]))
    if not profiles:
        raise InputError("no profiles defined", path=path, field="profiles")
    overrides: dict[str, dict[str, dict[str, Any]]] = {}
    summaries = []
    for stem, spec in (raw.get("chapters") or {}).items():
        spec = spec or {}
        if not isinstance(spec, dict):
            raise InputError("a chapter entry is a mapping", path=path, field=f"chapters.{stem}")
        if spec.get("summary"):
            summaries.append(str(stem))
        per_profile = {}
        for profile, params in (spec.get("parameters") or {}).items():
            if profile not in profiles:
                raise InputError(
                    f"override for unknown profile {profile!r}",
                    path=path,
                    field=f"chapters.{stem}.parameters.{profile}",
                )
            if not isinstance(params, dict):
                raise InputError(
                    "overrides are a mapping of parameter -> value",
                    path=path,
                    field=f"chapters.{stem}.parameters.{profile}",
                )
            per_profile[str(profile)] = dict(params)
        overrides[str(stem)] = per_profile
    return ProfileFile(path, profiles, overrides, tuple(summaries))


def parse_assignment(text: str) -> tuple[str, Any]:
    """``-p name=value`` from the command line; the value is read as YAML (``null``, ``3``, ``[0,1]``)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise InputError(f"expected NAME=VALUE, got {text!r}", field="-p")
    return name.strip(), parse_yaml(value, field=f"-p {name.strip()}")


def parse_mapping(text: str) -> dict[str, Any]:
    """``-y 'name: value'`` from the command line: a YAML mapping of parameters, as papermill's ``-y`` takes."""
    value = parse_yaml(text, field="-y")
    if not isinstance(value, dict):
        raise InputError(f"expected a YAML mapping such as 'datasets: [my.yaml]', got {text!r}", field="-y")
    return {str(key): item for key, item in value.items()}
