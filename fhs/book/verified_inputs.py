"""Which facts and taxonomy of a run folder may be shown: those today's files hold as the run stamped them.

A run folder may come from someone else (a shared drive, an archive), and the
files it names may have changed since the run. ``run-config.json`` stamps the
SHA-256 of the facts and the taxonomy a run read (``inputs``, see
``fhs/run/digests.py``) and, for ``fhs run --facts``, where they were
(``sources``). A file is read here only to compute its digest, and used only
when the digest is the stamped one: a path that no stamped digest vouches for
(``"sources": {"facts": "/any/path"}``) is never shown, and what could not
be vouched for is said in one note (which input changed, or that nothing
vouches for it) instead of showing edited text under the old verdicts. A run
of a bundled dataset made by a chapter keeps no digests; its data folder is
the reader's own, so it is shown as is.
"""

from __future__ import annotations

from pathlib import Path

from fhs.core.errors import InputError
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.run.digests import facts_digest, taxonomy_digest

_DATASETS_SEEN: dict[tuple[str, str], tuple[list[Fact], Taxonomy]] = {}


def vouched_inputs(config: dict, data, run_dir: Path | None = None) -> tuple[list[Fact], Taxonomy | None, str]:
    """The run's facts and taxonomy as today's files hold them, where the run's stamp vouches for them; a relative
    source is relative to ``run_dir`` (a spec file's run records where its files are that way)."""
    from fhs.data.datasets import DATASETS
    from fhs.run.inputs import load_experiment

    inputs, given = config.get("inputs"), config.get("sources")
    stamped = inputs if isinstance(inputs, dict) else {}
    sources = given if isinstance(given, dict) else {}
    if sources.get("facts"):
        return _own_files(_anchored(sources, run_dir), stamped, data)
    if config.get("dataset") in DATASETS:
        key = (config["dataset"], str(data))
        if key not in _DATASETS_SEEN:  # several runs of one dataset on a page load it once
            experiment = load_experiment(config["dataset"], data=data, progress=False)
            _DATASETS_SEEN[key] = (experiment.facts, experiment.taxonomy)
        facts, taxonomy = _DATASETS_SEEN[key]
        if not stamped:  # a chapter's run keeps no input digests: the data folder is the user's own
            return facts, taxonomy, ""
        same_facts = _vouched(stamped, "facts", facts_digest, facts)
        same_taxonomy = _vouched(stamped, "taxonomy", taxonomy_digest, taxonomy)
        notes = [
            _changed(f"the {part} of dataset {config['dataset']}", part)
            for part, same in (("facts", same_facts), ("taxonomy", same_taxonomy))
            if not same
        ]
        return (facts if same_facts else []), (taxonomy if same_taxonomy else None), "; ".join(notes)
    return [], None, "run-config.json names no dataset or facts file: context not shown"


def _anchored(sources: dict, run_dir: Path | None) -> dict:
    """The sources' relative file paths joined to the run folder (a built-in taxonomy's name stays a name)."""
    from fhs.data.taxonomies import TAXONOMIES

    if run_dir is None:
        return sources
    out = dict(sources)
    for key in ("facts", "taxonomy"):
        value = str(out.get(key) or "")
        if value and value not in TAXONOMIES and not Path(value).is_absolute():
            out[key] = str(Path(run_dir) / value)
    return out


def _vouched(stamped: dict, name: str, digest, value) -> bool:
    return value is not None and stamped.get(name) == digest(value)


def _changed(subject: str, part: str) -> str:
    """The note for an input whose content is not the one the run stamped."""
    shown = {"facts": "context not shown", "taxonomy": "concept labels not shown"}[part]
    return f"{subject} changed since the run (its SHA-256 is not run-config.json's inputs.{part}): {shown}"


def _own_files(sources: dict, stamped: dict, data) -> tuple[list[Fact], Taxonomy | None, str]:
    """An ``fhs run --facts --taxonomy`` run: each file is read only to check it, and used only if it matches."""
    from fhs.data.facts import read_facts
    from fhs.data.taxonomies import TAXONOMIES, load_taxonomy, load_taxonomy_file
    from fhs.data.taxonomies.ids import align_gold

    facts_path, name = Path(str(sources["facts"])), str(sources.get("taxonomy") or "")
    notes: list[str] = []
    loaded = None
    if name in TAXONOMIES or (name and "taxonomy" in stamped and Path(name).is_file()):
        try:
            loaded = load_taxonomy(name, data) if name in TAXONOMIES else load_taxonomy_file(name)
        except (InputError, OSError):
            notes.append("the run's taxonomy cannot be read: concept labels not shown")
    elif name and "taxonomy" not in stamped:
        notes.append(f"nothing vouches for the taxonomy {name} (no inputs.taxonomy digest): concept labels not shown")
    elif name:
        notes.append(f"the run's taxonomy file {name} is gone: concept labels not shown")
    taxonomy = loaded if _vouched(stamped, "taxonomy", taxonomy_digest, loaded) else None
    if loaded is not None and taxonomy is None:
        notes.append(_changed(f"the taxonomy {name}", "taxonomy"))
    if "facts" not in stamped:
        notes.append(
            "run-config.json holds no digest of its facts file (inputs.facts), so nothing vouches "
            f"for {facts_path}: context not shown"
        )
        return [], taxonomy, "; ".join(notes)
    if not facts_path.is_file():
        return [], taxonomy, "; ".join([*notes, f"the run's facts file {facts_path} is gone: context not shown"])
    try:
        facts = read_facts(facts_path)
    except (InputError, OSError):  # never quote a file nothing vouches for
        return [], taxonomy, "; ".join([*notes, f"{facts_path} cannot be read as facts: context not shown"])
    readings = [facts] + ([align_gold(facts, loaded)] if loaded is not None else [])
    match = next((reading for reading in readings if stamped["facts"] == facts_digest(reading)), None)
    if match is None:
        return [], taxonomy, "; ".join([*notes, _changed(f"the facts file {facts_path}", "facts")])
    return match, taxonomy, "; ".join(notes)
