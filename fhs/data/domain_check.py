"""``fhs domain check FILE``: is a hand-written domain file fit for the method?

``load_domain`` accepts any well-formed file; this check also says what the
method will do badly with it. Errors (the file cannot serve FHS): YAML or
schema problems, each with its line; a verifier gloss equal to another
dimension's. Warnings (it works, but probably not as meant): a dimension
count other than the paper's six (Section 3 factorizes every hypothesis into
six named dimensions; ``fhs run`` accepts any count), a dimension without a separate
``verifier_gloss`` or without examples, two categories of one profile
dimension whose phrases overlap (every concept matched by the longer phrase
also gets the shorter phrase's category, e.g. ``percutaneous approach``
inside "Percutaneous Endoscopic Approach"), and - given a taxonomy - categories
that match no concept and ``from_metadata`` keys no concept has.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fhs.core.errors import InputError
from fhs.data.domain import Domain, Phrase, domain_from_dict, line_of, read_domain_yaml, with_line
from fhs.data.taxonomy import Taxonomy

DIMENSIONS = 6  # the paper's factorization (Section 3): six named dimensions per hypothesis


@dataclass
class DomainReport:
    """What the check found: ``errors`` and ``warnings`` as ``file:line: message`` strings."""

    path: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    domain: Domain | None = None
    profiles: int | None = None  # distinct category profiles over the taxonomy, when one was given

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self) -> list[str]:
        out = [f"error: {e}" for e in self.errors] + [f"warning: {w}" for w in self.warnings]
        if self.domain is not None:
            summary = (
                f"{self.path}: {len(self.domain.dimensions)} dimensions, {len(self.domain.profile)} profile dimensions"
            )
            if self.profiles is not None:
                summary += f", {self.profiles} distinct profiles over the taxonomy"
            out.append(summary + (", OK" if self.ok else ""))
        return out


def _overlaps(phrases: list[tuple[str, Phrase]]) -> list[tuple[str, Phrase, str, Phrase]]:
    """Pairs (category a, phrase a, category b, phrase b) where phrase a matches wherever b does."""
    found = []
    for cat_a, a in phrases:
        for cat_b, b in phrases:
            if cat_a == cat_b or a is b:
                continue
            verbatim = a.pattern.search(b.text.lower()) is not None
            by_tokens = bool(a.tokens) and a.tokens <= b.tokens
            if verbatim or by_tokens:
                found.append((cat_a, a, cat_b, b))
    return found


def check_domain(path: str | Path, taxonomy: Taxonomy | None = None) -> DomainReport:
    """Check a domain file (and, with ``taxonomy``, how its profiles fall on the concepts)."""
    path = Path(path)
    report = DomainReport(str(path))
    if not path.is_file():
        report.errors.append(f"{path}: no such domain file")
        return report
    try:
        data, tree = read_domain_yaml(path)
        try:
            domain = domain_from_dict(data, path=path)
        except InputError as error:
            raise with_line(error, tree) from None
    except InputError as error:
        report.errors.append(str(error))
        return report
    report.domain = domain

    def at(where: str) -> str:
        return f"{path}:{line_of(tree, where)}"

    if len(domain.dimensions) != DIMENSIONS:
        report.warnings.append(
            f"{at('dimensions')}: field 'dimensions': {len(domain.dimensions)} dimensions, not "
            f"the paper's {DIMENSIONS}; FHS runs with them, but its factorization is six"
        )
    seen = Counter(d.verifier_gloss.lower() for d in domain.dimensions)
    for index, dimension in enumerate(domain.dimensions):
        where = f"dimensions[{index}]"
        if seen[dimension.verifier_gloss.lower()] > 1:
            report.errors.append(
                f"{at(where + '.gloss')}: dimension {dimension.name} has the same verifier gloss "
                f"as another dimension (the verifier could not tell them apart)"
            )
        if "verifier_gloss" not in data["dimensions"][index]:
            report.warnings.append(
                f"{at(where)}: dimension {dimension.name} has no verifier_gloss; "
                f"the verifier reads the generator's gloss"
            )
        if not dimension.examples:
            report.warnings.append(f"{at(where)}: dimension {dimension.name} has no examples")
    for dim in domain.profile:
        phrases = [(name, phrase) for name, group in dim.categories for phrase in group]
        for cat_a, a, cat_b, b in _overlaps(phrases):
            report.warnings.append(
                f"{at(f'profile.{dim.name}.categories.{cat_b}')}: profile {dim.name}: phrase {b.text!r} of "
                f"{cat_b} also matches {cat_a}'s {a.text!r}, so such concepts get both categories"
            )
    if taxonomy is not None:
        _check_against(report, domain, taxonomy, at)
    return report


def _check_against(report: DomainReport, domain: Domain, taxonomy: Taxonomy, at) -> None:
    profiles = [domain.profile_of(concept) for concept in taxonomy]
    report.profiles = len(set(profiles))
    for position, dim in enumerate(domain.profile):
        used = Counter(category for profile in profiles for category in profile[position][1])
        for name, _ in dim.categories:
            if not used[name]:
                report.warnings.append(
                    f"{at(f'profile.{dim.name}.categories.{name}')}: profile {dim.name}: "
                    f"category {name} matches no concept of {taxonomy.name}"
                )
        if dim.from_metadata and not any(dim.from_metadata in concept.metadata for concept in taxonomy):
            report.warnings.append(
                f"{at(f'profile.{dim.name}.from_metadata')}: profile {dim.name}: no concept of "
                f"{taxonomy.name} has metadata {dim.from_metadata!r}"
            )
