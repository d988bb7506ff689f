"""A domain: the named dimensions a hypothesis fills, and the category profiles of concepts.

The method is the same for every taxonomy; what changes is this file's
content. A domain file (YAML, see ``fhs/data/domains/us-gaap.yaml``) gives the
ordered dimensions with their generator and verifier glosses, the operator
vocabulary the generator prompt lists, and the category vocabularies that give
each candidate a *profile* -- the signature the verifier's window uses to pick
structurally different candidates instead of lexical near-duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from fhs.core.errors import InputError, shown
from fhs.core.text import camel_split, normalize_token, token_set, tokenize
from fhs.core.yamlfile import read_yaml_file
from fhs.data.taxonomy import Concept

DOMAINS_DIR = Path(__file__).resolve().parent / "domains"
PROFILES_HELD = 100_000  # more than any bundled taxonomy has concepts: memory stays bounded
_WORD = re.compile(r"[a-z0-9]+")
_DIMENSION_NAME = re.compile(r"[A-Z][A-Z0-9_]*")

# A concept's category profile: per dimension, the categories it belongs to (the window of Section 4.4 reads it)
CategoryProfile = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Dimension:
    """One named dimension of a hypothesis."""

    name: str  # upper case, e.g. "FAMILY"
    gloss: str  # what the generator is told
    verifier_gloss: str  # what the verifier judges against
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operator:
    name: str
    gloss: str


@dataclass(frozen=True)
class Phrase:
    """A vocabulary phrase, prepared once for both ways it can match."""

    text: str
    pattern: re.Pattern[str]  # the phrase as whole words, case-insensitive
    tokens: frozenset[str]  # its tokens; empty when the phrase has function words
    # its letter-and-digit runs: the pattern can match only a text that has every one of them as
    # a run of its own, so checking the set first spares most searches (same matches)
    words: frozenset[str] = frozenset()

    @classmethod
    def of(cls, text: str) -> Phrase:
        words = text.lower().split()
        pattern = re.compile(r"(?<![a-z0-9])" + r"\s+".join(map(re.escape, words)) + r"(?![a-z0-9])")
        # A phrase with function words ("with complications") must occur verbatim:
        # matching its remaining tokens would also match "without complications".
        raw = re.findall(r"[A-Za-z0-9]+", text)
        whole = all(normalize_token(word) is not None for word in raw)
        return cls(
            text=text,
            pattern=pattern,
            tokens=frozenset(tokenize(text)) if whole else frozenset(),
            words=frozenset(_WORD.findall(text.lower())),
        )

    def matches(self, lowered: str, tokens: frozenset[str], words: frozenset[str] | None = None) -> bool:
        """Whether the phrase occurs in ``lowered`` (``words``: its letter-and-digit runs, if known)."""
        if (words is None or self.words <= words) and self.pattern.search(lowered):
            return True
        return bool(self.tokens) and self.tokens <= tokens


@dataclass(frozen=True)
class ProfileDimension:
    """One dimension of the category profile: named categories, each with phrases.

    ``from_metadata`` names a concept metadata key whose value, when present,
    is the category itself (e.g. the ICD chapter a taxonomy loader records).
    """

    name: str
    categories: tuple[tuple[str, tuple[Phrase, ...]], ...]
    from_metadata: str | None = None

    def categories_of(self, concept: Concept, lowered: str, tokens: frozenset[str]) -> tuple[str, ...]:
        if self.from_metadata:
            value = str((concept.metadata or {}).get(self.from_metadata, "") or "").strip()
            if value:
                return (f"{self.from_metadata}:{value}",)
        words = frozenset(_WORD.findall(lowered))
        found = [name for name, phrases in self.categories if any(p.matches(lowered, tokens, words) for p in phrases)]
        return tuple(sorted(found))


@dataclass(frozen=True)
class Domain:
    """Everything taxonomy-specific that the method's prompts and window need."""

    name: str
    taxonomy: str  # how prompts name the taxonomy, e.g. "US-GAAP"
    evidence: str  # how prompts describe a fact, e.g. "a numeric fact located in ..."
    query_guidance: str  # how the definition-style query should be worded
    dimensions: tuple[Dimension, ...]
    operators: tuple[Operator, ...]
    profile: tuple[ProfileDimension, ...]
    source: str = ""  # the file it was loaded from
    # Profiles already computed, by what they depend on (see ``profile_of``); not part of equality.
    _profiles: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)
    # One copy of each distinct profile: most concepts share a handful, so the memo holds references
    _distinct: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    @property
    def operator_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.operators)

    def profile_of(self, concept: Concept) -> CategoryProfile:
        """The concept's category profile: per profile dimension, the sorted matching categories.

        The text matched is the concept's id (camel case split), label,
        definition and datatype.

        Profiles are remembered per concept (the window scans the same candidates
        fact after fact; matching every phrase was a fifth of a run's client CPU),
        keyed by everything the match reads, so at most one entry per concept. Equal
        profiles are stored once, so an entry costs its key, not a tree of tuples.
        """
        metadata = concept.metadata or {}
        key = (
            concept.id,
            concept.label,
            concept.definition,
            concept.datatype,
            tuple(str(metadata.get(d.from_metadata, "")) for d in self.profile if d.from_metadata),
        )
        known = self._profiles.get(key)
        if known is None:
            if len(self._profiles) >= PROFILES_HELD:
                self._profiles.clear()
                self._distinct.clear()
            profile = self._profile(concept)
            known = self._profiles[key] = self._distinct.setdefault(profile, profile)
        return known

    def _profile(self, concept: Concept) -> CategoryProfile:
        text = " ".join([concept.id, camel_split(concept.id), concept.label, concept.definition, concept.datatype])
        lowered = " ".join(text.lower().split())
        tokens = token_set(text)
        return tuple((dim.name, dim.categories_of(concept, lowered, tokens)) for dim in self.profile)


# ---- loading ------------------------------------------------------------------


def available_domains() -> list[str]:
    return sorted(path.stem for path in DOMAINS_DIR.glob("*.yaml"))


def domain_path(name_or_path: str | Path) -> Path:
    """The YAML file of a bundled domain name or of a path (what a run stamp hashes)."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") or path.is_file()):
        path = DOMAINS_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise InputError(
                f"unknown domain {str(name_or_path)!r}",
                fix=f"use one of {available_domains()} or the path of a domain YAML file",
            )
    return path.resolve()


def load_domain(name_or_path: str | Path) -> Domain:
    """Load a bundled domain by name (``us-gaap``, ``icd-10-cm``) or any domain YAML by path."""
    return _load_domain_file(str(domain_path(name_or_path)))


@cache
def _load_domain_file(path_text: str) -> Domain:
    path = Path(path_text)
    if not path.is_file():
        raise InputError("no such domain file", path=path, fix="pass a YAML file like fhs/data/domains/us-gaap.yaml")
    data, tree = read_domain_yaml(path)
    try:
        return domain_from_dict(data, path=path)
    except InputError as error:
        raise with_line(error, tree) from None


def read_domain_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """The parsed file and its node tree (which knows every key's line); YAML errors name the line."""
    return read_yaml_file(path, tree=True)


_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def line_of(tree: yaml.Node | None, field: str | None) -> int | None:
    """The 1-based line of a key path such as ``dimensions[2].gloss`` (or of its nearest parent)."""
    if tree is None:
        return None
    node, line = tree, tree.start_mark.line + 1
    for key, index in _FIELD_PART.findall(field or ""):
        if isinstance(node, yaml.MappingNode) and key:
            found = next(((k, v) for k, v in node.value if str(k.value) == key), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def with_line(error: InputError, tree: yaml.Node | None) -> InputError:
    """The same error, with the line its key path sits on."""
    if error.line is not None or tree is None:
        return error
    return InputError(error.problem, path=error.path, line=line_of(tree, error.field), field=error.field, fix=error.fix)


def domain_from_dict(data: Any, *, path: str | Path | None = None) -> Domain:
    """Validate a parsed domain file; errors name the file and the key path."""
    reader = _Reader(path)
    reader.mapping(data, "")
    dimensions_raw = reader.sequence(reader.get(data, "dimensions", ""), "dimensions")
    if not dimensions_raw:
        raise InputError("expected at least one dimension", path=path, field="dimensions")
    dimensions: list[Dimension] = []
    for index, item in enumerate(dimensions_raw):
        where = f"dimensions[{index}]"
        reader.mapping(item, where)
        name = reader.text(reader.get(item, "name", where), f"{where}.name")
        if not _DIMENSION_NAME.fullmatch(name):
            raise InputError(
                f"dimension names are upper-case identifiers, got {shown(name)}", path=path, field=f"{where}.name"
            )
        if name in {d.name for d in dimensions}:
            raise InputError(f"duplicate dimension {name!r}", path=path, field=f"{where}.name")
        gloss = reader.text(reader.get(item, "gloss", where), f"{where}.gloss")
        verifier_gloss = reader.text(item.get("verifier_gloss", gloss), f"{where}.verifier_gloss")
        examples = tuple(
            reader.text(v, f"{where}.examples[{i}]")
            for i, v in enumerate(reader.sequence(item.get("examples", []), f"{where}.examples"))
        )
        dimensions.append(Dimension(name, gloss, verifier_gloss, examples))

    operators: list[Operator] = []
    for index, item in enumerate(reader.sequence(data.get("operators", []), "operators")):
        where = f"operators[{index}]"
        reader.mapping(item, where)
        operators.append(
            Operator(
                reader.text(reader.get(item, "name", where), f"{where}.name"),
                reader.text(reader.get(item, "gloss", where), f"{where}.gloss"),
            )
        )
    if not operators or "direct_label" not in {o.name for o in operators}:
        raise InputError(
            "the operator list must include direct_label (the parser's default)", path=path, field="operators"
        )

    profile: list[ProfileDimension] = []
    profile_raw = data.get("profile", {}) or {}
    reader.mapping(profile_raw, "profile")
    for dim_name, spec in profile_raw.items():
        where = f"profile.{dim_name}"
        reader.mapping(spec, where)
        categories_raw = spec.get("categories", {}) or {}
        reader.mapping(categories_raw, f"{where}.categories")
        categories = []
        for category, phrases in categories_raw.items():
            cwhere = f"{where}.categories.{category}"
            phrases = reader.sequence(phrases, cwhere)
            texts = [reader.text(p, f"{cwhere}[{i}]") for i, p in enumerate(phrases)]
            if not texts:
                raise InputError("expected at least one phrase", path=path, field=cwhere)
            categories.append((str(category), tuple(Phrase.of(t) for t in texts)))
        from_metadata = spec.get("from_metadata")
        if from_metadata is not None:
            from_metadata = reader.text(from_metadata, f"{where}.from_metadata")
        if not categories and not from_metadata:
            raise InputError("expected categories or from_metadata", path=path, field=where)
        profile.append(ProfileDimension(str(dim_name), tuple(categories), from_metadata))

    return Domain(
        name=reader.text(reader.get(data, "name", ""), "name"),
        taxonomy=reader.text(reader.get(data, "taxonomy", ""), "taxonomy"),
        evidence=reader.text(reader.get(data, "evidence", ""), "evidence"),
        query_guidance=reader.text(data.get("query_guidance", ""), "query_guidance", allow_empty=True),
        dimensions=tuple(dimensions),
        operators=tuple(operators),
        profile=tuple(profile),
        source="" if path is None else str(path),
    )


class _Reader:
    """Small typed accessors that raise InputError with the file and key path."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> InputError:
        return InputError(problem, path=self.path, field=where or None)

    def mapping(self, value: Any, where: str) -> None:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")

    def sequence(self, value: Any, where: str) -> Sequence[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def get(self, mapping: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in mapping:
            raise self.fail(f"{where}.{key}" if where else key, "missing required key")
        return mapping[key]

    def text(self, value: Any, where: str, *, allow_empty: bool = False) -> str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {type(value).__name__}")
        value = " ".join(value.split())
        if not value and not allow_empty:
            raise self.fail(where, "expected a non-empty string")
        return value
