"""CodiEsp: diagnosis (or procedure) mentions of Spanish clinical cases, relocated into English.

The corpus (CLEF eHealth 2020, Zenodo 3837305) annotates ICD-10 diagnosis
codes (track ``diagnosis``, CodiEsp-D, the paper's benchmark) and ICD-10-PCS
procedure codes (track ``procedure``, CodiEsp-P) on Spanish text;
``{split}X.tsv`` gives each mention's text and offsets.
A fact here is one row of the track's label whose code is in the inventory, deduplicated
on (document, offsets, code), with its mention relocated into the English
machine translation (``fhs.data.relocate``). Only English text reaches ``value``,
``context`` and ``sentence``: the codes of the ``.tsv`` files are gold and stay
in ``gold``.

``load`` keeps the exactly relocated facts (the paper's "exact relocation"
set); ``keep="all"`` also returns the rest, with the Spanish mention as value,
for probes that do not read the value (the oracle sanity check).

CodiEsp-P golds are often 4-character prefixes of 7-character PCS codes; the
procedure track marks such a fact ``metadata["gold_match"] = "prefix"`` (any
code under it counts, see ``fhs.data.facts.GOLD_MATCHES``).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from fhs.core.errors import InputError, choose
from fhs.data.datadir import SOURCES
from fhs.data.facts import Fact
from fhs.data.relocate.align import ALIGN_METHODS, AlignConfig
from fhs.data.relocate.alignments import AlignmentStore
from fhs.data.relocate.cache import relocation_cache_path
from fhs.data.relocate.contract import AlignedDocument, Relocation, RelocationTask, Relocator
from fhs.data.relocate.deterministic import DeterministicRelocator
from fhs.data.relocate.pieces import MAX_COVER_WORDS, relocate_mentions
from fhs.data.relocate.pieces import Mention as PieceMention
from fhs.data.relocate.sentences import english_lines, split_spanish_sentences
from fhs.data.taxonomies.icd10cm import normalize_icd_code
from fhs.data.taxonomies.ids import gold_known
from fhs.data.taxonomy import Taxonomy

SPLITS = ("train", "dev", "test")
LABELS = ("DIAGNOSTICO", "PROCEDIMIENTO")
KEEP = ("exact", "all")


@dataclass(frozen=True)
class Track:
    """One CodiEsp track: which rows it reads and how its facts are named and typed.

    ``code_length``: the length of a full code; a shorter gold is a prefix
    (scored with the prefix rule). ``None``: golds are scored exactly.
    """

    label: str
    datatype: str
    id_prefix: str  # fact ids and relocation cache files start with it
    code_length: int | None = None


TRACKS = {
    "diagnosis": Track("DIAGNOSTICO", "diagnosis", "codiesp"),
    "procedure": Track("PROCEDIMIENTO", "procedure", "codiesp-P", code_length=7),
}
_FIELDS = ("articleID", "label", "code", "reference", "offsets")


def normalize_code(raw: str) -> str:
    """A gold code as the inventory spells it (``s22.49xa`` -> ``S22.49XA``)."""
    return normalize_icd_code(raw)


@dataclass(frozen=True)
class Mention:
    """One annotated row of ``{split}X.tsv``."""

    document_id: str
    label: str
    code: str  # diagnosis codes normalised to the inventory's spelling
    reference: str  # the Spanish mention as the annotators wrote it
    offsets: str  # as in the file: "start end" parts joined by ";"
    spans: tuple[tuple[int, int], ...]
    line: int


def _parse_offsets(text: str, path: Path, line: int) -> tuple[tuple[int, int], ...]:
    spans = []
    for part in text.split(";"):
        pieces = part.split()
        if len(pieces) != 2 or not all(piece.isdigit() for piece in pieces):
            raise InputError(
                f"expected 'start end' pairs separated by ';', got {text!r}", path=path, line=line, field="offsets"
            )
        start, end = int(pieces[0]), int(pieces[1])
        if end < start:
            raise InputError(f"span {start} {end} ends before it starts", path=path, line=line, field="offsets")
        if end > start:  # the corpus has a few empty parts ("1446 1446"); they cover nothing
            spans.append((start, end))
    if not spans:
        raise InputError(f"no non-empty span in {text!r}", path=path, line=line, field="offsets")
    return tuple(spans)


def read_mentions(path: str | Path) -> list[Mention]:
    """Every row of a CodiEsp-X file, checked; errors name the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such CodiEsp annotation file", path=path, fix=SOURCES["codiesp"].how_to_get)
    mentions: list[Mention] = []
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.rstrip("\n").rstrip("\r")
            if not text.strip():
                continue
            parts = text.split("\t")
            if len(parts) != len(_FIELDS):
                raise InputError(
                    f"expected {len(_FIELDS)} tab-separated fields, got {len(parts)}",
                    path=path,
                    line=number,
                    field=_FIELDS[min(len(parts), len(_FIELDS) - 1)],
                    fix=f"columns are {', '.join(_FIELDS)}",
                )
            document_id, label, code, reference, offsets = (part.strip() for part in parts)
            if not document_id:
                raise InputError("empty document id", path=path, line=number, field="articleID")
            if label not in LABELS:
                raise InputError(f"expected one of {LABELS}, got {label!r}", path=path, line=number, field="label")
            if not code:
                raise InputError("empty code", path=path, line=number, field="code")
            if label == "DIAGNOSTICO":
                try:
                    normalized = normalize_code(code)
                except (InputError, ValueError) as error:
                    raise InputError(
                        f"not an ICD-10 diagnosis code: {code!r}", path=path, line=number, field="code"
                    ) from error
            else:  # procedure (ICD-10-PCS) codes are kept as written, upper-cased
                normalized = code.upper()
            if not reference:
                raise InputError("empty mention text", path=path, line=number, field="reference")
            spans = _parse_offsets(offsets, path, number)
            mentions.append(Mention(document_id, label, normalized, reference, offsets, spans, number))
    return mentions


@dataclass
class CodiespSplit:
    """What ``load_split`` returns.

    ``facts``: exactly relocated facts; ``unrelocated``: the others (value = the
    Spanish mention); ``all_facts``: both, in the order of the ``.tsv`` file;
    ``stats``: counts and seconds.
    """

    facts: list[Fact]
    unrelocated: list[Fact]
    all_facts: list[Fact]
    stats: dict[str, float] = field(default_factory=dict)


def codiesp_dir(data_dir: str | os.PathLike, split: str) -> Path:
    """The folder of one split. ``data_dir`` may be ``$FHS_DATA`` or its ``codiesp/`` folder."""
    if split not in SPLITS:
        raise InputError(f"unknown CodiEsp split {split!r}", field="split", fix=f"choose one of {', '.join(SPLITS)}")
    root = Path(data_dir).expanduser()
    if not (root / split).is_dir() and (root / "codiesp").is_dir():
        root = root / "codiesp"
    folder = root / split
    missing = [name for name in (f"{split}X.tsv", "text_files", "text_files_en") if not (folder / name).exists()]
    if missing:
        raise InputError(
            f"missing {', '.join(missing)} from {SOURCES['codiesp'].origin}",
            path=folder,
            fix=SOURCES["codiesp"].how_to_get,
        )
    return folder


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise InputError(
            "no such text file",
            path=path,
            fix="the text_files/ and text_files_en/ folders must hold "
            "one <articleID>.txt per document named in the .tsv",
        )
    return path.read_text(encoding="utf-8")


def load_split(
    data_dir: str | os.PathLike,
    taxonomy: Taxonomy | None,
    split: str = "test",
    relocator: Relocator | None = None,
    *,
    align: AlignConfig = AlignConfig(),
    cache: bool | str | os.PathLike = True,
    documents: Collection[str] | None = None,
    track: str = "diagnosis",
    pieces: bool = False,
    max_cover_words: int = MAX_COVER_WORDS,
) -> CodiespSplit:
    """Facts of one CodiEsp split with their relocation; see ``load``.

    ``documents`` restricts the split to those document ids (a sample for an
    expensive relocator). ``track``: ``diagnosis`` (DIAGNOSTICO rows) or
    ``procedure`` (PROCEDIMIENTO rows), see ``TRACKS``. ``pieces``: retry a
    discontinuous mention piece by piece when the whole is not found
    (``fhs.data.relocate.pieces``; off by default, the paper's chapters relocate
    whole mentions only); ``max_cover_words`` bounds the covering stretch.

    ``taxonomy=None`` applies no inventory filter (every code of the track is kept).
    ``cache``: ``True`` for the default cache file under ``$FHS_CACHE`` (or
    ``~/.cache/fhs``), ``False`` for none, or a path.
    """
    started = time.perf_counter()
    chosen = choose(TRACKS, track, "track")
    folder = codiesp_dir(data_dir, split)
    relocator = relocator or DeterministicRelocator()
    tsv = folder / f"{split}X.tsv"
    rows = [
        mention
        for mention in read_mentions(tsv)
        if mention.label == chosen.label and (documents is None or mention.document_id in documents)
    ]
    kept: list[Mention] = []
    seen: set[tuple[str, str, str]] = set()
    for mention in rows:
        if taxonomy is not None and not gold_known(mention.code, taxonomy, _gold_match(chosen, mention.code)):
            continue
        key = (mention.document_id, mention.offsets, mention.code)
        if key in seen:
            continue
        seen.add(key)
        kept.append(mention)

    if cache is True:
        cache_path: Path | None = relocation_cache_path(f"{chosen.id_prefix}-{split}-{align.method}", relocator)
    elif cache is False:
        cache_path = None
    else:
        cache_path = Path(cache)
    # the documents' alignments, beside the relocations (one file for every track and relocator)
    alignments = AlignmentStore(None if cache_path is None else cache_path.parent / f"alignments-codiesp-{split}.json")
    aligned: dict[str, AlignedDocument] = {}
    tasks: list[RelocationTask] = []
    located: list[PieceMention] = []
    for mention in kept:
        document = aligned.get(mention.document_id)
        if document is None:
            spanish = _read_text(folder / "text_files" / f"{mention.document_id}.txt")
            english = _read_text(folder / "text_files_en" / f"{mention.document_id}.txt")
            document = AlignedDocument.build(mention.document_id, spanish, english, align, alignments)
            aligned[mention.document_id] = document
        try:
            tasks.append(document.task(mention.reference, mention.spans))
        except ValueError as error:
            raise InputError(str(error), path=tsv, line=mention.line, field="offsets") from None
        located.append(PieceMention(tasks[-1], mention.spans, document.spanish))
    alignments.save()

    relocations = relocate_mentions(located, relocator, cache_path, pieces=pieces, max_cover_words=max_cover_words)

    facts: list[Fact] = []
    unrelocated: list[Fact] = []
    all_facts: list[Fact] = []
    repeats: Counter[tuple[str, str]] = Counter()
    for mention, task, relocation in zip(kept, tasks, relocations):
        document = aligned[mention.document_id]
        position = (mention.document_id, mention.offsets)
        fact = _fact(split, chosen, mention, task, relocation, document, repeats[position])
        repeats[position] += 1
        (facts if relocation.located else unrelocated).append(fact)
        all_facts.append(fact)

    scopes = Counter(task.scope for task in tasks)
    discontinuous = [relocation for mention, relocation in zip(kept, relocations) if len(mention.spans) > 1]
    stats = {
        f"{chosen.datatype}_rows": len(rows),
        "rows": len(rows),
        "facts": len(kept),
        "documents": len({mention.document_id for mention in kept}),
        "exact": len(facts),
        "unrelocated": len(unrelocated),
        "discontinuous": len(discontinuous),
        "discontinuous_located": sum(r.located for r in discontinuous),
        "found_by_pieces": sum(bool(r.pieces) for r in discontinuous if r.located),
        "sentence_scope": scopes["sentence"],
        "document_scope": scopes["document"],
        "documents_aligned": sum(1 for document in aligned.values() if document.alignment is not None),
        "seconds": round(time.perf_counter() - started, 2),
    }
    return CodiespSplit(facts, unrelocated, all_facts, stats)


def _gold_match(track: Track, code: str) -> str:
    return "prefix" if track.code_length is not None and len(code) < track.code_length else "exact"


def _fact(
    split: str,
    track: Track,
    mention: Mention,
    task: RelocationTask,
    relocation: Relocation,
    document: AlignedDocument,
    repeat: int,
) -> Fact:
    # The id names the document and the Spanish offsets, never the code; a second code on
    # the same mention gets a running number.
    offsets = mention.offsets.replace(" ", "-").replace(";", "+")
    fact_id = f"{track.id_prefix}-{split}:{mention.document_id}:{offsets}" + (f":{repeat + 1}" if repeat else "")
    value = relocation.english if relocation.located else mention.reference
    extra: dict = {}
    if relocation.pieces:
        extra["pieces"] = [list(span) for span in relocation.pieces]
    if _gold_match(track, mention.code) != "exact":
        extra["gold_match"] = _gold_match(track, mention.code)
    return Fact(
        id=fact_id,
        context_id=mention.document_id,
        modality="text",
        value=value or "",
        datatype=track.datatype,
        context=task.candidate,
        gold=(mention.code,),
        sentence=task.candidate,
        metadata={
            "document_id": mention.document_id,
            "document_context": document.english_text,
            "spanish_mention": mention.reference,
            "spanish_offsets": mention.offsets,
            "spanish_context": task.spanish_context,
            "relocation_status": relocation.status,
            "relocation_method": relocation.method,
            "relocated": relocation.located,
            "candidate_scope": task.scope,
            "alignment": document.alignment.method if document.alignment is not None else "none",
            "span": [relocation.start, relocation.end] if relocation.exact else None,
            **extra,
        },
    )


def load(
    data_dir: str | os.PathLike,
    taxonomy: Taxonomy | None,
    split: str = "test",
    relocator: Relocator | None = None,
    keep: str = "exact",
    *,
    align: AlignConfig = AlignConfig(),
    cache: bool | str | os.PathLike = True,
    track: str = "diagnosis",
    pieces: bool = False,
) -> list[Fact]:
    """CodiEsp facts of ``split`` ("test" for reporting; "train"/"dev" for tuning).

    ``taxonomy``: the ICD-10-CM inventory; rows whose code it lacks are dropped.
    ``None`` means no inventory filter.
    ``relocator``: defaults to ``DeterministicRelocator()``; pass an
    ``LLMRelocator`` for the paper's model-based relocation.
    ``keep``: ``"exact"`` returns only facts relocated to an exact English
    substring; ``"all"`` appends the others, whose value is the Spanish mention
    and whose ``metadata["relocated"]`` is False.
    ``track``/``pieces``: see ``load_split`` (default: CodiEsp-D, whole mentions).
    """
    if keep not in KEEP:
        raise InputError(f"unknown keep option {keep!r}", field="keep", fix=f"choose one of {', '.join(KEEP)}")
    result = load_split(data_dir, taxonomy, split, relocator, align=align, cache=cache, track=track, pieces=pieces)
    return result.facts if keep == "exact" else result.all_facts


def alignment_summary(data_dir: str | os.PathLike, split: str = "test") -> dict[str, int]:
    """How often the Spanish sentence count equals the English line count, per split.

    ``plain``: sentences as cut by rule; ``with_paragraph_breaks``: blank-line
    runs counted as units too (the translation writes ``1.`` for each); the
    count rule aligns exactly the documents counted there.
    """
    folder = codiesp_dir(data_dir, split)
    counts = {"documents": 0, "plain": 0, "with_paragraph_breaks": 0}
    for path in sorted((folder / "text_files").glob("*.txt")):
        spanish = path.read_text(encoding="utf-8")
        lines = english_lines(_read_text(folder / "text_files_en" / path.name))
        counts["documents"] += 1
        counts["plain"] += len(split_spanish_sentences(spanish)) == len(lines)
        counts["with_paragraph_breaks"] += len(split_spanish_sentences(spanish, paragraph_breaks=True)) == len(lines)
    return counts


def main(argv: list[str] | None = None) -> None:
    """``python -m fhs.data.datasets.codiesp --split test``: the counts reported for a split.

    With ``--out FILE`` it also writes the located facts as a facts JSONL file
    (``fhs/data/facts.py``) that ``fhs run --facts`` reads: the procedure
    track's facts builder is ``--track procedure --pieces --lexicon WORDS.txt
    --taxonomy CONCEPTS.jsonl --out facts.jsonl``.
    """
    import argparse
    import json

    from fhs.data.datadir import data_dir as resolve_data_dir
    from fhs.data.facts import write_facts
    from fhs.data.taxonomies import load_taxonomy_file

    parser = argparse.ArgumentParser(description=(main.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--split", default="test", choices=SPLITS)
    parser.add_argument("--align", default="dp", choices=ALIGN_METHODS)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--track", default="diagnosis", choices=list(TRACKS))
    parser.add_argument(
        "--pieces",
        action="store_true",
        help="retry discontinuous mentions piece by piece (fhs/data/relocate/pieces.py)",
    )
    parser.add_argument("--max-cover-words", type=int, default=MAX_COVER_WORDS)
    parser.add_argument(
        "--lexicon",
        default=None,
        help="extra 'spanish: english ...' words for the relocator (fhs/data/relocate/user_lexicon.py)",
    )
    parser.add_argument("--taxonomy", default=None, help="concept file: keep only facts whose gold it holds")
    parser.add_argument("--keep", default="exact", choices=KEEP, help="facts written by --out")
    parser.add_argument("--out", default=None, help="write the facts here (JSONL)")
    args = parser.parse_args(argv)
    try:
        root = resolve_data_dir(args.data)
        taxonomy = load_taxonomy_file(args.taxonomy) if args.taxonomy else None
        result = load_split(
            root,
            taxonomy,
            args.split,
            DeterministicRelocator(extra_lexicon=args.lexicon),
            align=AlignConfig(method=args.align),
            cache=not args.no_cache,
            track=args.track,
            pieces=args.pieces,
            max_cover_words=args.max_cover_words,
        )
    except InputError as error:
        raise SystemExit(f"error: {error}") from None
    if args.out:
        write_facts(result.facts if args.keep == "exact" else result.all_facts, args.out)
    statuses = Counter(fact.metadata["relocation_status"] for fact in result.all_facts)
    report = dict(
        result.stats,
        statuses=dict(statuses),
        exact_rate=round(len(result.facts) / max(1, len(result.all_facts)), 4),
        sentence_count_match=alignment_summary(root, args.split),
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
