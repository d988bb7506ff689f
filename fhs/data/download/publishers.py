"""Where each source's files come from: repositories at pinned commits, and one Zenodo archive.

``build.py`` reads this table and a complete data folder and writes the lock. The commits
were checked against the repositories' histories: every pinned blob is byte-identical to
the file in the data folder (the filings' own commits are those ``MANIFEST.tsv`` records).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

RAW = "https://raw.githubusercontent.com"


def raw_url(repo: str, commit: str, path: str) -> str:
    """GitHub's raw URL of ``path`` at ``commit``: the exact bytes, whatever the branch has become."""
    return f"{RAW}/{repo}/{commit}/{quote(path)}"


@dataclass(frozen=True)
class RepoFile:
    """One file of a repository at a commit, and its place under ``$FHS_DATA``."""

    path: str
    repo: str
    commit: str
    repo_path: str


@dataclass(frozen=True)
class Publisher:
    name: str  # the folder under $FHS_DATA, as in fhs/data/datadir.py
    homepage: str
    elsewhere: str
    files: tuple[RepoFile, ...] = ()
    notes: tuple[str, ...] = ()


FINTAGGING = Publisher(
    name="fintagging",
    homepage="https://github.com/The-FinAI/FinTagging",
    elsewhere=(
        "github.com/The-FinAI/FinTagging at its newest commit (taxonomy/ and subdata/), "
        "or the benchmark's other copies its README links"
    ),
    files=(
        RepoFile(
            "fintagging/us_gaap_2024_BM25.jsonl",
            "The-FinAI/FinTagging",
            "c24359b574d0445477222b146cc00ebae42fb332",
            "taxonomy/us_gaap_2024_BM25.jsonl",
        ),
        RepoFile(
            "fintagging/FinCL-eval-subset.csv",
            "The-FinAI/FinTagging",
            "120df9464a2fa2d5e25489ddaf122e24066f017b",
            "subdata/FinCL-eval-subset.csv",
        ),
    ),
)

XBRL_TERMINOLOGY = Publisher(
    name="xbrl-terminology",
    homepage="https://github.com/KirkHan0920/XBRL-Agent",
    elsewhere="github.com/KirkHan0920/XBRL-Agent at its newest commit (Datasets/)",
    files=(
        RepoFile(
            "xbrl-terminology/XBRL_Terminology.xlsx",
            "KirkHan0920/XBRL-Agent",
            "a338f9475fe3f3282d2aa01ddf29cbb82419e52a",
            "Datasets/XBRL Terminology.xlsx",
        ),
    ),
    notes=("the repository names the file 'XBRL Terminology.xlsx' (with a space); it is stored with an underscore",),
)

# The filings' repositories, paths and commits are MANIFEST.tsv's columns (build.py reads them).
IXBRL = Publisher(
    name="ixbrl",
    homepage="https://www.sec.gov/edgar/search/",
    elsewhere="SEC EDGAR (www.sec.gov/edgar/search/): every filing is public; look it up by the company's CIK and form",
    notes=(
        "each filing is served uncompressed and stored gzip-compressed as <name>.htm.gz; size and sha256 are "
        "those of the uncompressed filing (MANIFEST.tsv's bytes and sha256 columns)",
        "MANIFEST.tsv is written from the table below; no publisher serves it",
    ),
)
SOURCE_COLUMNS = ("file", "source_repo", "source_path", "commit", "cik", "form")


def edgar_page(cik: str, form: str) -> str:
    """EDGAR's list of a company's filings of one form: where a filing is when its repository lost it."""
    return f"https://www.sec.gov/cgi-bin/browse-edgar?action=getcompany&CIK={cik}&type={quote(form)}"


CODIESP = Publisher(
    name="codiesp",
    homepage="https://doi.org/10.5281/zenodo.3837305",
    elsewhere="doi.org/10.5281/zenodo.3837305 (the record's newest version) or temu.bsc.es/codiesp",
    notes=(
        "Zenodo serves the corpus as one zip; fhs data fetch extracts the train/, dev/ and test/ files listed "
        "here (not the unannotated background/ set) and verifies each",
    ),
)
CODIESP_ARCHIVE: dict[str, Any] = dict(
    name="codiesp.zip",
    url="https://zenodo.org/records/3837305/files/codiesp.zip?download=1",
    prefix="final_dataset_v4_to_publish/",
    folder="codiesp/",
    note=(
        "the archive's own checksum is not pinned (it was not at hand when the lock was written); "
        "every extracted file is"
    ),
)
CODIESP_SPLITS = ("train", "dev", "test")

PUBLISHERS = (FINTAGGING, XBRL_TERMINOLOGY, IXBRL, CODIESP)
