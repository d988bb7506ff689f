"""Where the real data lives, and what to tell a user when it is not there.

The project never ships data. Every loader asks this module for its folder, so
a missing or incomplete data directory produces one error that says where the
files come from and how to get them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError

ENV_VAR = "FHS_DATA"


@dataclass(frozen=True)
class Source:
    """A dataset folder inside the data directory and how a user obtains it."""

    folder: str
    required: tuple[str, ...]
    origin: str
    how_to_get: str
    license: str


SOURCES: dict[str, Source] = {
    "fintagging": Source(
        folder="fintagging",
        required=("us_gaap_2024_BM25.jsonl", "FinCL-eval-subset.csv"),
        origin="FinTagging benchmark, github.com/The-FinAI/FinTagging",
        how_to_get=(
            "run `fhs data fetch --only fintagging`, or clone github.com/The-FinAI/FinTagging and copy "
            "taxonomy/us_gaap_2024_BM25.jsonl and subdata/FinCL-eval-subset.csv into $FHS_DATA/fintagging/"
        ),
        license="MIT (code); data per FinTagging",
    ),
    "xbrl-terminology": Source(
        folder="xbrl-terminology",
        required=("XBRL_Terminology.xlsx",),
        origin="XBRL-Agent, github.com/KirkHan0920/XBRL-Agent (Datasets/)",
        how_to_get=(
            "run `fhs data fetch --only xbrl-terminology`, or clone github.com/KirkHan0920/XBRL-Agent and copy "
            "'Datasets/XBRL Terminology.xlsx' as XBRL_Terminology.xlsx into $FHS_DATA/xbrl-terminology/"
        ),
        license="MIT",
    ),
    "ixbrl": Source(
        folder="ixbrl",
        required=("MANIFEST.tsv",),
        origin=(
            "SEC EDGAR inline-XBRL 10-K/10-Q primary documents, as collected in "
            "github.com/alphanome-ai/sec-parser-test-data, github.com/dgunning/edgartools and "
            "github.com/RxDataLab/go-edgar"
        ),
        how_to_get=(
            "run `fhs data fetch --only ixbrl`: it downloads the 142 filings at the commits the data lock pins, "
            "gzips each as <name>.htm.gz into $FHS_DATA/ixbrl/ and writes MANIFEST.tsv"
        ),
        license="SEC filings are public documents; sec-parser-test-data and edgartools MIT, go-edgar states none",
    ),
    "codiesp": Source(
        folder="codiesp",
        required=("test/testX.tsv", "test/text_files", "test/text_files_en"),
        origin="CodiEsp corpus v4 (CLEF eHealth 2020), Zenodo record 3837305",
        how_to_get=(
            "run `fhs data fetch --only codiesp`, or download codiesp.zip from doi.org/10.5281/zenodo.3837305 "
            "and unzip its train/, dev/ and test/ folders into $FHS_DATA/codiesp/"
        ),
        license="CC BY 4.0",
    ),
}


def default_data_dir() -> Path:
    """Where ``fhs data fetch`` puts the data when ``$FHS_DATA`` is unset: the user's data directory.

    ``$XDG_DATA_HOME/fhs/data`` (``~/.local/share/fhs/data``), on Windows
    ``%LOCALAPPDATA%\\fhs\\data``. The Makefile computes the same place.
    """
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "fhs" / "data"
    base = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(base).expanduser() / "fhs" / "data"


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The data directory: ``explicit`` if given, else ``$FHS_DATA``."""
    raw = explicit if explicit is not None else os.environ.get(ENV_VAR)
    if not raw:
        raise InputError(
            f"no data directory: set {ENV_VAR} or pass --data",
            fix=f"e.g. export {ENV_VAR}=../shared/data, or fetch the data with `fhs data fetch`; "
            "see book/data.md for where each dataset comes from",
        )
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise InputError(
            "data directory does not exist",
            path=path,
            fix=f"point {ENV_VAR} at the folder holding fintagging/, ixbrl/, codiesp/, xbrl-terminology/",
        )
    return path


def source_dir(name: str, explicit: str | os.PathLike | None = None) -> Path:
    """The folder of one source, checked for its required files."""
    source = SOURCES[name]
    folder = data_dir(explicit) / source.folder
    missing = [item for item in source.required if not (folder / item).exists()]
    if missing:
        raise InputError(
            f"missing {', '.join(missing)} from {source.origin}",
            path=folder,
            fix=source.how_to_get,
        )
    return folder
