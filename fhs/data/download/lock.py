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

from fhs.core.errors import InputError, shown
from fhs.data.download import lock_values as values
from fhs.data.download.lock_values import Where

LOCK_FILE = Path(__file__).with_name("data.lock.json")
FORMAT = 1
MAX_LOCK_BYTES = 64 << 20  # the shipped lock is well under 1 MB


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
        return self.prefix + locked.path[len(self.folder) :]


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
        raise InputError(f"unknown data source {name!r}", field="only", fix=f"choose one of {', '.join(self.names)}")

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


def _file_from_json(raw, where: Where) -> LockedFile:
    raw = values.mapping(
        raw, where, ("path", "size", "sha256"), ("url", "commit", "member", "table", "gzip", "elsewhere")
    )
    return LockedFile(
        path=values.relative_path(raw["path"], where.at("path")),
        size=values.size(raw["size"], where.at("size")),
        sha256=values.sha256(raw["sha256"], where.at("sha256")),
        url=values.url(raw.get("url"), where.at("url"), optional=True),
        commit=values.text(raw.get("commit"), where.at("commit"), optional=True),
        member=values.text(raw.get("member"), where.at("member"), optional=True),
        table=values.flag(raw.get("table", False), where.at("table")),
        gzip=values.flag(raw.get("gzip", False), where.at("gzip")),
        elsewhere=values.text(raw.get("elsewhere"), where.at("elsewhere"), optional=True),
    )


def _archive_from_json(raw, where: Where) -> Archive:
    raw = values.mapping(raw, where, ("name", "url", "prefix", "folder"), ("size", "sha256", "note"))
    return Archive(
        name=values.file_name(raw["name"], where.at("name")),
        url=values.url(raw["url"], where.at("url")),
        prefix=values.text(raw["prefix"], where.at("prefix")),
        folder=values.relative_path(raw["folder"], where.at("folder"), folder=True),
        size=values.size(raw.get("size"), where.at("size"), optional=True),
        sha256=values.sha256(raw.get("sha256"), where.at("sha256"), optional=True),
        note=values.text(raw.get("note", ""), where.at("note")),
    )


def _table_from_json(raw, where: Where) -> Table:
    raw = values.mapping(raw, where, ("columns", "rows"))
    columns = tuple(
        values.text(c, where.at("columns").at(i))
        for i, c in enumerate(values.items(raw["columns"], where.at("columns")))
    )
    rows = tuple(
        tuple(
            values.text(cell, where.at("rows").at(r).at(c))
            for c, cell in enumerate(values.items(row, where.at("rows").at(r)))
        )
        for r, row in enumerate(values.items(raw["rows"], where.at("rows"), empty=True))
    )
    return Table(columns, rows)


def _source_from_json(raw, where: Where) -> LockedSource:
    raw = values.mapping(
        raw, where, ("name", "title", "license", "homepage", "elsewhere", "files"), ("notes", "archive", "table")
    )
    archive = None if raw.get("archive") is None else _archive_from_json(raw["archive"], where.at("archive"))
    table = None if raw.get("table") is None else _table_from_json(raw["table"], where.at("table"))
    files = tuple(
        _file_from_json(item, where.at("files").at(i))
        for i, item in enumerate(values.items(raw["files"], where.at("files")))
    )
    for i, locked in enumerate(files):
        at = where.at("files").at(i)
        if locked.table and table is None:
            raise at.at("table").error("the file is written from the source's table, and the source has none")
        if not locked.url and not locked.table:
            if archive is None:
                raise at.at("url").error("missing: the file has no URL and its source no archive to take it from")
            if not locked.path.startswith(archive.folder):
                raise at.at("path").error(f"an archive member outside the archive's folder {archive.folder!r}")
    notes = tuple(
        values.text(n, where.at("notes").at(i))
        for i, n in enumerate(values.items(raw.get("notes", []), where.at("notes"), empty=True))
    )
    return LockedSource(
        name=values.text(raw["name"], where.at("name")),
        title=values.text(raw["title"], where.at("title")),
        license=values.text(raw["license"], where.at("license")),
        homepage=values.text(raw["homepage"], where.at("homepage")),
        elsewhere=values.text(raw["elsewhere"], where.at("elsewhere")),
        files=files,
        archive=archive,
        table=table,
        notes=notes,
    )


def _one_place_each(sources: tuple[LockedSource, ...], where: Where) -> None:
    """No two files at one place, no file where another needs a folder, no source named twice."""
    named: dict[str, int] = {}
    placed: dict[str, str] = {}  # path -> the field that locks it
    for s, source in enumerate(sources):
        if source.name in named:
            raise where.at(s).at("name").error(f"source {source.name!r} is also sources[{named[source.name]}]")
        named[source.name] = s
        for i, locked in enumerate(source.files):
            at = where.at(s).at("files").at(i).at("path")
            if locked.path in placed:
                raise at.error(
                    f"{locked.path!r} is locked twice (also {placed[locked.path]}): one place holds one file"
                )
            placed[locked.path] = at.field
    for path, field_name in placed.items():
        parts = path.split("/")
        for n in range(1, len(parts)):
            if "/".join(parts[:n]) in placed:
                raise Where(where.file, field_name).error(
                    f"{path!r} needs {'/'.join(parts[:n])!r} to be a folder, and the lock locks a file there"
                )


def parse_lock(raw, where: Path) -> Lock:
    """A lock from its parsed JSON, every value checked (see ``lock_values.py``), or one InputError."""
    top = Where(Path(where), "")
    raw = values.mapping(raw, top, ("format", "sources"), ("about",))
    if type(raw["format"]) is not int or raw["format"] != FORMAT:
        raise top.at("format").error(
            f"lock format {shown(raw['format'])}, this fhs reads {FORMAT}", fix="upgrade fhs or regenerate the lock"
        )
    values.text(raw.get("about", ""), top.at("about"))
    at = top.at("sources")
    sources = tuple(_source_from_json(s, at.at(i)) for i, s in enumerate(values.items(raw["sources"], at)))
    _one_place_each(sources, at)
    return Lock(sources, Path(where))


def load_lock(path: str | Path | None = None) -> Lock:
    """The lock shipped with the package, or the one at ``path``, checked as untrusted input."""
    where = Path(path) if path is not None else LOCK_FILE
    try:
        with where.open("rb") as handle:
            data = handle.read(MAX_LOCK_BYTES + 1)
    except FileNotFoundError:
        raise InputError(
            "no data lock", path=where, fix="write it with `fhs data lock --from DIR --out FILE`"
        ) from None
    except IsADirectoryError:
        raise InputError("is a folder, not a lock file", path=where, field="lock") from None
    if len(data) > MAX_LOCK_BYTES:
        raise InputError(f"larger than {MAX_LOCK_BYTES:,} bytes, far more than any lock", path=where)
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 text (byte {error.start})", path=where) from None
    except json.JSONDecodeError as error:
        raise InputError(f"not JSON: {error.msg}", path=where, line=error.lineno) from None
    except RecursionError:
        raise InputError("JSON nested too deep to be a lock", path=where) from None
    return parse_lock(raw, where)


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
