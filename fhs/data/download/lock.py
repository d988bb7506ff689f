"""The data lock: every file the loaders read, where its publisher serves it, its size and SHA-256.

The lock is data the project owns (sources and checksums, never the data itself). It is
written once by ``fhs data lock`` from a complete data folder (``build.py``) and read by
``fhs data fetch`` and ``fhs data check``. One JSON file, one line per file, so a change
to a pin is a one-line diff.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fhs.core.errors import InputError

LOCK_FILE = Path(__file__).with_name("data.lock.json")
FORMAT = 1


@dataclass(frozen=True)
class LockedFile:
    """One file under ``$FHS_DATA``.

    ``size`` and ``sha256`` are those of the bytes the publisher serves. Exactly one of
    ``url`` (downloaded on its own), ``member`` (a member of the source's archive) or
    ``table`` (written from the lock's own table, the filings' ``MANIFEST.tsv``) says
    where it comes from. ``gzip``: stored gzip-compressed (``<name>.htm.gz``); the
    checksum is then that of the uncompressed content, which is what the publisher serves.
    """

    path: str
    size: int
    sha256: str
    url: str | None = None
    commit: str | None = None
    member: str | None = None
    table: bool = False
    gzip: bool = False
    elsewhere: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, False)}


@dataclass(frozen=True)
class Archive:
    """A file a publisher serves whole (CodiEsp's zip); its members are the source's files.

    ``prefix``: the folder inside the archive that holds them; ``folder``: where they go
    under ``$FHS_DATA``. ``size``/``sha256`` of the archive itself may be unknown (None):
    every member is verified on its own.
    """

    name: str
    url: str
    prefix: str
    folder: str
    size: int | None = None
    sha256: str | None = None
    note: str = ""

    def member_of(self, locked: LockedFile) -> str:
        return self.prefix + locked.path[len(self.folder):]


@dataclass(frozen=True)
class Table:
    """A tab-separated file the lock carries itself (the filings' ``MANIFEST.tsv``)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def render(self) -> bytes:
        lines = ["\t".join(self.columns), *("\t".join(row) for row in self.rows)]
        return ("\n".join(lines) + "\n").encode("utf-8")


@dataclass(frozen=True)
class LockedSource:
    """One publisher's files, with the license printed before its first download."""

    name: str
    title: str
    license: str
    homepage: str
    elsewhere: str
    files: tuple[LockedFile, ...]
    archive: Archive | None = None
    table: Table | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class Lock:
    sources: tuple[LockedSource, ...]
    path: Path | None = None

    def source(self, name: str) -> LockedSource:
        for source in self.sources:
            if source.name == name:
                return source
        raise InputError(f"unknown data source {name!r}", field="only",
                         fix=f"choose one of {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    def select(self, only: list[str] | None) -> list[LockedSource]:
        """The sources named in ``only`` (all of them when empty), in the lock's order."""
        if not only:
            return list(self.sources)
        wanted = {self.source(name).name for name in only}
        return [s for s in self.sources if s.name in wanted]

    @property
    def files(self) -> list[LockedFile]:
        return [f for s in self.sources for f in s.files]


def _source_from_json(raw: dict, where: Path) -> LockedSource:
    try:
        files = tuple(LockedFile(**item) for item in raw["files"])
        archive = Archive(**raw["archive"]) if raw.get("archive") else None
        table = (Table(tuple(raw["table"]["columns"]), tuple(tuple(r) for r in raw["table"]["rows"]))
                 if raw.get("table") else None)
        return LockedSource(raw["name"], raw["title"], raw["license"], raw["homepage"], raw["elsewhere"],
                            files, archive, table, tuple(raw.get("notes", ())))
    except (KeyError, TypeError) as error:
        raise InputError(f"malformed source {raw.get('name', '?')!r}: {error}", path=where,
                         fix="regenerate it with `fhs data lock`") from None


def load_lock(path: str | Path | None = None) -> Lock:
    """The lock shipped with the package, or the one at ``path``."""
    where = Path(path) if path is not None else LOCK_FILE
    try:
        raw = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no data lock", path=where, fix="write it with `fhs data lock --from DIR`") from None
    except json.JSONDecodeError as error:
        raise InputError(f"not JSON: {error.msg}", path=where, line=error.lineno) from None
    if raw.get("format") != FORMAT:
        raise InputError(f"lock format {raw.get('format')!r}, this fhs reads {FORMAT}", path=where,
                         field="format", fix="upgrade fhs or regenerate the lock")
    return Lock(tuple(_source_from_json(s, where) for s in raw["sources"]), where)


def dump_lock(lock: Lock, about: str) -> str:
    """The lock as JSON text: one line per file and per table row, keys in a fixed order."""
    dumps = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731
    out = ["{", f'  "format": {FORMAT},', f'  "about": {dumps(about)},', '  "sources": [']
    for i, source in enumerate(lock.sources):
        out.append("    {")
        for key in ("name", "title", "license", "homepage", "elsewhere"):
            out.append(f'      "{key}": {dumps(getattr(source, key))},')
        if source.notes:
            out.append(f'      "notes": {dumps(list(source.notes))},')
        if source.archive:
            out.append(f'      "archive": {dumps(asdict(source.archive))},')
        if source.table:
            out.append(f'      "table": {{"columns": {dumps(list(source.table.columns))}, "rows": [')
            out.append(",\n".join(f"        {dumps(list(row))}" for row in source.table.rows))
            out.append("      ]},")
        out.append('      "files": [')
        out.append(",\n".join(f"        {dumps(f.to_json())}" for f in source.files))
        out.append("      ]")
        out.append("    }" + ("," if i < len(lock.sources) - 1 else ""))
    out += ["  ]", "}"]
    return "\n".join(out) + "\n"
