"""US-GAAP from the official FASB taxonomy files: schema plus label linkbases.

The paper indexes ``<tag>. <standard label>. <documentation>`` with the
documentation from ``us-gaap-doc-2024.xml``, which is not in our data folder.
A user who downloads the taxonomy (xbrl.fasb.org) passes the element schema
(``elts/us-gaap-2024.xsd``) and the label linkbases (``elts/us-gaap-lab-2024.xml``,
``elts/us-gaap-doc-2024.xml``) here and gets the paper's index text.

XBRL connects them indirectly: a ``link:loc`` points at an element by
``href="schema.xsd#element-id"`` and carries a local ``xlink:label``; a
``link:label`` resource carries text, a role and a language; a
``link:labelArrow`` joins a loc label to a resource label. Labels are local to
their extended link, so each ``link:labelLink`` is resolved on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lxml import etree

from fhs.core.errors import InputError
from fhs.core.text import camel_split
from fhs.data.taxonomies.usgaap import xbrl_metadata
from fhs.data.taxonomy import Concept, Taxonomy

XS = "http://www.w3.org/2001/XMLSchema"
XBRLI = "http://www.xbrl.org/2003/instance"
XLINK = "http://www.w3.org/1999/xlink"
XML = "http://www.w3.org/XML/1998/namespace"
LINK = "http://www.xbrl.org/2003/linkbase"

STANDARD_LABEL_ROLE = "http://www.xbrl.org/2003/role/label"
DOCUMENTATION_ROLE = "http://www.xbrl.org/2003/role/documentation"
CONCEPT_LABEL_ARCROLE = "http://www.xbrl.org/2003/arcrole/concept-label"


@dataclass(frozen=True)
class Element:
    """One ``xs:element`` of the schema, with what a Concept needs."""

    name: str
    id: str
    datatype: str
    period_type: str
    balance: str
    abstract: bool
    substitution_group: str


def _parse(path: Path) -> etree._ElementTree:
    try:
        return etree.parse(str(path), etree.XMLParser(remove_comments=True, resolve_entities=False))
    except OSError as error:
        raise InputError(f"cannot read file: {error}", path=path) from None
    except etree.XMLSyntaxError as error:
        line = error.lineno if error.lineno and error.lineno > 0 else None
        raise InputError(f"malformed XML: {error.msg}", path=path, line=line) from None


def _local(qname: str | None) -> str:
    """``xbrli:monetaryItemType`` -> ``monetaryItemType``."""
    return (qname or "").rpartition(":")[2]


def read_schema(schema: Path) -> dict[str, Element]:
    """Top-level elements of the schema by id (the target of every loc href)."""
    root = _parse(schema).getroot()
    if root.tag != f"{{{XS}}}schema":
        raise InputError(f"expected an xs:schema root, found {root.tag!s}", path=schema, line=root.sourceline)
    by_id: dict[str, Element] = {}
    names: set[str] = set()
    for node in root.iterchildren(f"{{{XS}}}element"):
        name = node.get("name")
        if not name:
            raise InputError("xs:element without a name", path=schema, line=node.sourceline, field="name")
        if name in names:
            raise InputError(f"element {name!r} is declared twice", path=schema, line=node.sourceline, field="name")
        names.add(name)
        element = Element(
            name=name,
            id=node.get("id") or "",
            datatype=_local(node.get("type")),
            period_type=node.get(f"{{{XBRLI}}}periodType") or "",
            balance=node.get(f"{{{XBRLI}}}balance") or "",
            abstract=(node.get("abstract") or "false").strip() in ("true", "1"),
            substitution_group=_local(node.get("substitutionGroup")),
        )
        # Elements without an id cannot be the target of a loc; keep them under their name.
        by_id[element.id or f"#name:{name}"] = element
    if not by_id:
        raise InputError("schema declares no xs:element", path=schema)
    return by_id


def _text_of(node: etree._Element) -> str:
    return " ".join("".join(node.itertext()).split())


def _lang_matches(lang: str, wanted: str) -> bool:
    lang, wanted = lang.lower(), wanted.lower()
    return not wanted or lang == wanted or lang.startswith(wanted + "-")


def read_label_linkbase(
    linkbase: Path, elements_by_id: dict[str, Element], schema: Path, *, lang: str = "en"
) -> dict[str, dict[str, str]]:
    """``{element name: {role: text}}`` for the labels in ``linkbase`` in language ``lang``."""
    root = _parse(linkbase).getroot()
    labels: dict[str, dict[str, str]] = {}
    for extended in root.iter():
        if not isinstance(extended.tag, str) or extended.get(f"{{{XLINK}}}type") != "extended":
            continue
        locs: dict[str, list[Element]] = {}
        resources: dict[str, list[tuple[str, str]]] = {}
        arcs = []
        for node in extended:
            if not isinstance(node.tag, str):
                continue
            kind = node.get(f"{{{XLINK}}}type")
            label = node.get(f"{{{XLINK}}}label") or ""
            if kind == "locator":
                element = _resolve_href(node, linkbase, schema, elements_by_id)
                locs.setdefault(label, []).append(element)
            elif kind == "resource" and node.tag == f"{{{LINK}}}label":
                if _lang_matches(node.get(f"{{{XML}}}lang") or "", lang):
                    role = node.get(f"{{{XLINK}}}role") or STANDARD_LABEL_ROLE
                    resources.setdefault(label, []).append((role, _text_of(node)))
                else:
                    resources.setdefault(label, [])
            elif kind == "arc" and node.get(f"{{{XLINK}}}arcrole") == CONCEPT_LABEL_ARCROLE:
                arcs.append(node)
        for arc in arcs:
            source, target = arc.get(f"{{{XLINK}}}from") or "", arc.get(f"{{{XLINK}}}to") or ""
            if source not in locs:
                raise InputError(
                    f"labelArrow from {source!r} names no link:loc",
                    path=linkbase,
                    line=arc.sourceline,
                    field="xlink:from",
                )
            if target not in resources:
                raise InputError(
                    f"labelArrow to {target!r} names no link:label",
                    path=linkbase,
                    line=arc.sourceline,
                    field="xlink:to",
                )
            for element in locs[source]:
                for role, text in resources[target]:
                    labels.setdefault(element.name, {}).setdefault(role, text)  # first label per role wins
    return labels


def _resolve_href(node: etree._Element, linkbase: Path, schema: Path, elements_by_id: dict[str, Element]) -> Element:
    href = node.get(f"{{{XLINK}}}href") or ""
    parts = urlsplit(href)
    target_file = Path(unquote(parts.path)).name if parts.path else schema.name
    if target_file != schema.name:
        raise InputError(
            f"link:loc href {href!r} points into {target_file}, not the schema {schema.name}",
            path=linkbase,
            line=node.sourceline,
            field="xlink:href",
            fix="pass the schema this linkbase was written for",
        )
    element = elements_by_id.get(unquote(parts.fragment)) if parts.fragment else None
    if element is None:
        raise InputError(
            f"link:loc href {href!r} points at no element of {schema.name}",
            path=linkbase,
            line=node.sourceline,
            field="xlink:href",
        )
    return element


def load_fasb(
    schema: str | Path,
    label_linkbases: Sequence[str | Path],
    name: str = "us-gaap",
    *,
    lang: str = "en",
) -> Taxonomy:
    """A taxonomy from the FASB schema and its label/documentation linkbases.

    ``label`` is the standard label (the camel-split name when an element has
    none), ``definition`` the documentation label, ``datatype`` the local name
    of the element's type; period type, balance and abstract go to metadata.
    """
    schema = Path(schema)
    elements_by_id = read_schema(schema)
    labels: dict[str, dict[str, str]] = {}
    for linkbase in label_linkbases:
        for element_name, roles in read_label_linkbase(Path(linkbase), elements_by_id, schema, lang=lang).items():
            for role, text in roles.items():
                labels.setdefault(element_name, {}).setdefault(role, text)
    concepts = []
    for element in elements_by_id.values():
        roles = labels.get(element.name, {})
        standard = roles.get(STANDARD_LABEL_ROLE, "")
        label = standard or camel_split(element.name)
        concepts.append(
            Concept(
                id=element.name,
                label=label,
                definition=roles.get(DOCUMENTATION_ROLE, ""),
                datatype=element.datatype,
                metadata=xbrl_metadata(
                    element.name,
                    element.datatype,
                    label,
                    period_type=element.period_type,
                    balance=element.balance,
                    abstract="true" if element.abstract else "false",
                    substitution_group=element.substitution_group,
                    label_source="standard" if standard else "name",
                ),
            )
        )
    return Taxonomy.from_concepts(name, concepts)
