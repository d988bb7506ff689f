"""ICD-10-CM billable codes from the ``simple-icd-10-cm`` package.

The paper's inventory (71,344 codes) is CodiEsp's valid diagnosis list
intersected with the FY2018 CDC release, which we cannot rebuild here. The
package bundles one official release with its chapter/block/category tree,
inclusion terms and notes; we take every billable code (a category or
subcategory with no children, as the package defines it) and build the
paper's documentation text for it, except the alphabetic-index
paths, which the package does not carry.

Parsing the package's XML and walking its 75k codes take seconds, so the
finished concepts are cached on disk, keyed by the package
version and ``BUILD_VERSION`` (bump it whenever the text built here changes).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from importlib import metadata as package_metadata
from types import ModuleType

from fhs.core.errors import InputError
from fhs.data.taxonomies.cache import cache_path, read_taxonomy_cache, write_taxonomy_cache
from fhs.data.taxonomy import Concept, Taxonomy

TAXONOMY_NAME = "icd-10-cm"
PACKAGE = "simple-icd-10-cm"
DATATYPE = "diagnosis"
BUILD_VERSION = 1

# The ROLE dimension of the paper's Table 3, by code prefix.
ROLE_NEOPLASM = "neoplasm"
ROLE_INJURY = "injury/poisoning"
ROLE_EXTERNAL = "external cause"
ROLE_FACTOR = "health-status factor"
ROLE_PREGNANCY = "pregnancy-related"
ROLE_PERINATAL = "perinatal"
ROLE_CONGENITAL = "congenital"
ROLE_SYMPTOM = "symptom/sign/abnormal-finding"
ROLE_DISEASE = "disease/disorder"
_ROLE_BY_LETTER = {
    "C": ROLE_NEOPLASM,
    "S": ROLE_INJURY,
    "T": ROLE_INJURY,
    "V": ROLE_EXTERNAL,
    "W": ROLE_EXTERNAL,
    "X": ROLE_EXTERNAL,
    "Y": ROLE_EXTERNAL,
    "Z": ROLE_FACTOR,
    "O": ROLE_PREGNANCY,
    "P": ROLE_PERINATAL,
    "Q": ROLE_CONGENITAL,
    "R": ROLE_SYMPTOM,
}

# Category: a letter, then two characters of which at least one is a digit (A00, O9A, QA0).
_CODE = re.compile(r"([A-Z](?:[0-9][0-9A-Z]|[A-Z][0-9]))(?:\.?([0-9A-Z]{1,4}))?")


def normalize_icd_code(raw: str) -> str:
    """``"s22.49xa"`` / ``"S2249XA"`` / ``" r69 "`` -> ``"S22.49XA"`` / ``"S22.49XA"`` / ``"R69"``.

    Upper-case, a dot after the three-character category when more follows,
    no trailing dot. Anything that is not shaped like an ICD-10-CM code is an
    InputError, so a corrupt gold file is noticed instead of never matching.
    """
    text = str(raw).strip().upper().rstrip(".")
    match = _CODE.fullmatch(text)
    if not match:
        raise InputError(
            f"not an ICD-10-CM code: {raw!r}",
            field="code",
            fix="expected a letter, two characters with a digit among them, then optionally '.' and 1-4 characters",
        )
    category, rest = match.groups()
    return f"{category}.{rest}" if rest else category


def icd_role(code: str) -> str:
    """The diagnosis class from the code prefix: C00-D49 neoplasm, S/T injury, V-Y external cause, ..."""
    code = normalize_icd_code(code)
    letter = code[0]
    if letter == "D" and code[1:3].isdigit() and int(code[1:3]) <= 49:
        return ROLE_NEOPLASM
    return _ROLE_BY_LETTER.get(letter, ROLE_DISEASE)


def package_version() -> str:
    try:
        return package_metadata.version(PACKAGE)
    except package_metadata.PackageNotFoundError:
        raise InputError(
            f"the Python package {PACKAGE} is not installed", fix=f"pip install {PACKAGE}==1.5.0"
        ) from None


def _package() -> ModuleType:
    try:
        with warnings.catch_warnings():  # its data loading uses deprecated importlib.resources calls
            warnings.simplefilter("ignore", DeprecationWarning)
            import simple_icd_10_cm
    except ImportError:
        package_version()  # raises the InputError with the install hint
        raise
    return simple_icd_10_cm


def billable_codes(icd: ModuleType | None = None) -> list[str]:
    """Every billable code in package order: categories/subcategories without children.

    Five single-category blocks (B20, F99, P84, R99, Z66) appear twice in the
    package's code list, as block and as category; they are kept once.
    """
    icd = icd or _package()
    codes = (
        code for code in icd.get_all_codes(with_dots=True) if icd.is_category_or_subcategory(code) and icd.is_leaf(code)
    )
    return list(dict.fromkeys(codes))


@dataclass(frozen=True)
class _Hierarchy:
    """Where a code sits: chapter, block, and the diagnosis ancestors from category down to parent."""

    chapter: str
    block: str
    diagnoses: tuple[str, ...]


def _hierarchy(icd: ModuleType, code: str) -> _Hierarchy:
    # get_ancestors lists parent first and the chapter last; blocks sit directly under chapters.
    ancestors = icd.get_ancestors(code)
    return _Hierarchy(chapter=ancestors[-1], block=ancestors[-2], diagnoses=tuple(reversed(ancestors[:-2])))


def _clean(note: str) -> str:
    return " ".join(note.split()).rstrip(" .")


def concept_for_code(icd: ModuleType, code: str) -> Concept:
    """One billable code as a Concept with the paper's documentation text and metadata."""
    place = _hierarchy(icd, code)
    # A block can share its name with its only category (B99), so ask for the block explicitly.
    chapter_description = _clean(icd.get_description(place.chapter))
    block_description = _clean(icd.get_description(place.block, prioritize_blocks=True))
    # Placeholder-X subcategories (T36.0X1) can repeat their parent's label; say it once.
    path = [chapter_description, block_description]
    for ancestor in place.diagnoses:
        ancestor_label = _clean(icd.get_description(ancestor))
        if ancestor_label != path[-1]:
            path.append(ancestor_label)

    parts: list[str] = []
    parts += icd.get_inclusion_term(code)
    parts += icd.get_includes(code)
    parts += icd.get_includes(place.chapter)
    parts += icd.get_includes(place.block, prioritize_blocks=True)
    for ancestor in place.diagnoses:
        parts += icd.get_includes(ancestor)
    parts.append(" > ".join(path))
    definition = ". ".join(dict.fromkeys(text for text in map(_clean, parts) if text))

    compact = code.replace(".", "")
    seventh = ""
    if len(compact) == 7:
        meanings = icd.get_seven_chr_def(icd.get_parent(code), search_in_ancestors=True)
        seventh = meanings.get(compact[-1], "")
    label = " ".join(icd.get_description(code).split())
    return Concept(
        id=code,
        label=label,
        definition=definition,
        datatype=DATATYPE,
        metadata={
            "chapter": place.chapter,
            "chapter_description": chapter_description,
            "block": place.block,
            "block_description": block_description,
            "category": compact[:3],
            "code_length": str(len(compact)),
            "seventh_character": seventh,
            "role": icd_role(code),
        },
    )


def build_icd10cm(icd: ModuleType | None = None) -> Taxonomy:
    """Build the taxonomy from the installed package (slow: see the module docstring)."""
    icd = icd or _package()
    return Taxonomy.from_concepts(TAXONOMY_NAME, (concept_for_code(icd, code) for code in billable_codes(icd)))


def cache_key() -> str:
    return f"{PACKAGE}-{package_version()}-build{BUILD_VERSION}"


def load_icd10cm(data_dir: object = None, *, use_cache: bool = True) -> Taxonomy:
    """ICD-10-CM billable codes; read from the on-disk cache when a current one exists.

    ``data_dir`` is accepted for a uniform loader signature and ignored: the
    codes come from the installed package, not from ``$FHS_DATA``.
    """
    key = cache_key()
    path = cache_path(TAXONOMY_NAME, key)
    if use_cache:
        cached = read_taxonomy_cache(path, key)
        if cached is not None:
            return cached
    taxonomy = build_icd10cm()
    if use_cache:
        try:
            write_taxonomy_cache(path, taxonomy, key)
        except OSError:
            pass  # a read-only home directory must not stop a run; the next load rebuilds
    return taxonomy
