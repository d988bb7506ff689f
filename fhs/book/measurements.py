"""Measured builds as data: one JSON record per run, and the book page generated from them.

``python -m dev.cold_book`` writes a record of every cold build it times (``--tests``: of the test
suite) into ``book/records/``, and ``python -m dev.suite_time`` one of the suite's time per tier.
This module checks the records and renders the tables of ``book/measurements.md`` from them
(``book/_generated/measurements.md``, which the committed page includes; the build writes it, the
tree never holds it), so the figures a reader sees are the ones measured and no page quotes a time,
a date or a commit by hand (the habit of Anserini's generated regression pages).

    python -m fhs.book.measurements            # in the checkout: write the page's tables from book/records/*.json
    python -m fhs.book.measurements --check    # exit 1 if the tables are not what the records give

``make html`` runs it from the checkout's root (the paths below are relative to the current folder);
``python -m dev.measurements`` is the same from anywhere.

A record (standard library only: ``cold_book`` runs before any environment exists)::

    {"kind": "cold-book" | "tests" | "suite", "date": "YYYY-MM-DD", "commit": "<short hash>", "profile": "cpu",
     "command": "python -m dev.cold_book", "machine": {"cpu": "...", "cores": 2, ...},
     "conditions": {"cpuid_mask": null | "x86-64-v3", "slowdown": null | 1.6, "note": "..."},
     "started": "YYYY-MM-DDTHH:MM:SS" (optional: orders the records of one day),
     "steps": [{"step": "install", "seconds": 115.3},
               {"step": "01_readiness_gap", "seconds": 120.0, "checks": {"OK": 48}, "model_calls": 0,
                "prompt_tokens": 0, "reply_tokens": 0, "model_seconds": 0.0}, ...],
     "totals": {"seconds": 2067.7, "checks": {"OK": 438}, "model_calls": 199, "model_seconds": 1088.1,
                "tests": {"passed": 1233, "skipped": 1}},
     "source": "how the record was made (a reconstruction from earlier prose says so)"}
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RECORDS = Path("book") / "records"
PAGE = Path("book") / "_generated" / "measurements.md"  # included by book/measurements.md
KINDS = ("cold-book", "tests", "suite")
REQUIRED = {
    "kind": str,
    "date": str,
    "commit": str,
    "profile": str,
    "command": str,
    "machine": dict,
    "conditions": dict,
    "steps": list,
    "totals": dict,
}
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
STEP_LABELS = {
    "install": "install (with the one-time llama.cpp compile)",
    "provenance": "provenance page",
    "html": "HTML (earlier builds: with the provenance page)",
    "pytest": "pytest",
    "book": "make book (chapters not timed apart)",
}


class RecordError(ValueError):
    """A record that does not hold what the page needs: the message names the file and the field."""


def check_record(record: Any, path: Path) -> dict[str, Any]:
    """``record`` if it has every field the page reads, else :class:`RecordError` naming the file and field."""

    def fail(field: str, expected: str) -> RecordError:
        return RecordError(f"{path}: field {field!r}: expected {expected}")

    if not isinstance(record, dict):
        raise fail("(top level)", "a JSON object")
    for field, kind in REQUIRED.items():
        if not isinstance(record.get(field), kind):
            raise fail(field, f"a {kind.__name__}")
    if record["kind"] not in KINDS:
        raise fail("kind", f"one of {', '.join(KINDS)}")
    if not DATE.fullmatch(record["date"]):
        raise fail("date", "YYYY-MM-DD")
    for i, step in enumerate(record["steps"]):
        if (
            not isinstance(step, dict)
            or not isinstance(step.get("step"), str)
            or not isinstance(step.get("seconds"), (int, float))
        ):
            raise fail(f"steps[{i}]", 'an object with "step" (text) and "seconds" (a number)')
    if not isinstance(record["totals"].get("seconds"), (int, float)):
        raise fail("totals.seconds", "a number")
    return record


def load_records(folder: Path = RECORDS) -> list[dict[str, Any]]:
    """Every ``*.json`` record in ``folder``, checked, oldest first (by date, start time, file name)."""
    loaded = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise RecordError(f"{path}: not valid JSON: {error}") from None
        loaded.append((check_record(record, path), path.name))
    return [
        record for record, _ in sorted(loaded, key=lambda item: (item[0]["date"], item[0].get("started", ""), item[1]))
    ]


def record_name(record: Mapping[str, Any]) -> str:
    """The file name a record is saved under: date, commit, kind and the conditions that set it apart."""
    conditions = record.get("conditions") or {}
    parts = [record["date"], record["commit"], record["kind"]]
    if conditions.get("cpuid_mask"):
        parts.append("masked")
    if conditions.get("slowdown"):
        parts.append(f"slow{conditions['slowdown']:g}")
    return "-".join(parts) + ".json"


def write_record(record: Mapping[str, Any], folder: Path = RECORDS) -> Path:
    """Save ``record`` (checked first) as ``folder/<record_name>``."""
    path = folder / record_name(record)
    check_record(dict(record), path)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- the page


def minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds / 60:.1f}"


def checks_text(checks: Mapping[str, int] | None) -> str:
    """``{"OK": 438}`` as "438 OK" (as a chapter's closing check prints it)."""
    return ", ".join(f"{n} {status}" for status, n in (checks or {}).items() if n)


def conditions_text(record: Mapping[str, Any]) -> str:
    conditions = record["conditions"]
    said = []
    if conditions.get("cpuid_mask"):
        said.append(f"CPUID masked to {conditions['cpuid_mask']}")
    if conditions.get("slowdown"):
        said.append(f"{conditions['slowdown']:g} times slower (dev/slow_cpu.py)")
    if conditions.get("load_average") is not None:
        said.append(f"load average {conditions['load_average']:g} at the start")
    if conditions.get("note"):
        said.append(conditions["note"])
    return "; ".join(said) or ("this checkout" if record["kind"] == "suite" else "fresh clone, empty HOME")


def machine_text(machine: Mapping[str, Any]) -> str:
    cores = f", {machine['cores']} cores" if machine.get("cores") else ""
    return f"{machine.get('cpu', 'unknown CPU')}{cores}"


def step_seconds(record: Mapping[str, Any], step: str) -> float | None:
    return next((s["seconds"] for s in record["steps"] if s["step"] == step), None)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def builds_table(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The reproduction log: one row per cold build."""
    rows = []
    for r in records:
        t = r["totals"]
        rows.append(
            [
                r["date"],
                f"`{r['commit']}`",
                r["profile"],
                machine_text(r["machine"]),
                conditions_text(r),
                minutes(step_seconds(r, "install")),
                minutes(t["seconds"]),
                checks_text(t.get("checks")),
                t.get("model_calls", ""),
                minutes(t.get("model_seconds")),
                tokens_text(t),
            ]
        )
    head = [
        "date",
        "commit",
        "profile",
        "machine",
        "conditions",
        "install min",
        "total min",
        "closing checks",
        "model calls",
        "model min",
        "prompt / reply tokens",
    ]
    return _table(head, rows, [False] * 5 + [True, True, False, True, True, True])


def tokens_text(totals: Mapping[str, Any]) -> str:
    if totals.get("prompt_tokens") is None:
        return ""
    return f"{totals['prompt_tokens']:,} / {totals.get('reply_tokens', 0):,}"


def step_order(step: str) -> tuple[int, str]:
    """Install first, the chapters by number, then the provenance page and the HTML."""
    tail = ("provenance", "html")
    if step == "install":
        return (0, step)
    return (2 + tail.index(step), step) if step in tail else (1, step)


def steps_table(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The time table: minutes per step, one column per build that timed its chapters apart."""
    chosen = [r for r in records if len(r["steps"]) > 3]
    if not chosen:
        return []
    steps = sorted(dict.fromkeys(s["step"] for r in chosen for s in r["steps"]), key=step_order)
    rows = [
        [STEP_LABELS.get(step, step.replace("_", " "))] + [minutes(step_seconds(r, step)) for r in chosen]
        for step in steps
    ]
    rows.append(["**total**"] + [f"**{minutes(r['totals']['seconds'])}**" for r in chosen])
    rows.append(["closing checks"] + [checks_text(r["totals"].get("checks")) for r in chosen])
    head = ["step (minutes)"] + [
        f"{r['date']} `{r['commit']}`" + (" (slowed)" if r["conditions"].get("slowdown") else "") for r in chosen
    ]
    return _table(head, rows, [False] + [True] * len(chosen))


def tests_table(records: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = []
    for r in records:
        tests = r["totals"].get("tests") or {}
        rows.append(
            [
                r["date"],
                f"`{r['commit']}`",
                machine_text(r["machine"]),
                conditions_text(r),
                minutes(step_seconds(r, "install")),
                minutes(step_seconds(r, "pytest")),
                minutes(r["totals"]["seconds"]),
                ", ".join(f"{n:,} {k}" for k, n in tests.items()),
            ]
        )
    head = ["date", "commit", "machine", "conditions", "install min", "pytest min", "total min", "tests"]
    return _table(head, rows, [False] * 4 + [True] * 3 + [False])


def suite_table(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per run of ``dev.suite_time``: minutes and pytest's counts per tier."""
    tiers = list(dict.fromkeys(s["step"] for r in records for s in r["steps"]))
    rows = []
    for r in records:
        cells = []
        for tier in tiers:
            step = next((s for s in r["steps"] if s["step"] == tier), None)
            counts = ", ".join(f"{n:,} {k}" for k, n in (step or {}).get("tests", {}).items())
            spread = f", {step['workers']} workers" if step and step.get("workers", 1) > 1 else ""
            cells.append("" if step is None else f"{minutes(step['seconds'])} ({counts}{spread})")
        rows.append(
            [
                r["date"],
                f"`{r['commit']}`",
                machine_text(r["machine"]),
                conditions_text(r),
                *cells,
                minutes(r["totals"]["seconds"]),
            ]
        )
    head = ["date", "commit", "machine", "conditions", *[f"{tier} min (tests)" for tier in tiers], "total min"]
    return _table(head, rows, [False] * (4 + len(tiers)) + [True])


def render(records: Sequence[Mapping[str, Any]]) -> str:
    builds = [r for r in records if r["kind"] == "cold-book"]
    tests = [r for r in records if r["kind"] == "tests"]
    suites = [r for r in records if r["kind"] == "suite"]
    lines = [
        "<!-- Generated by `python -m dev.measurements` from book/records/*.json: do not edit. -->",
        "",
        "## Cold builds of the book (reproduction log)",
        "",
        *builds_table(builds),
        "",
    ]
    table = steps_table(builds)
    if table:
        lines += [
            "## Time per step",
            "",
            "Minutes per step of each build that timed its chapters apart (chapters by number).",
            "",
            *table,
            "",
        ]
    if tests:
        lines += [
            "## The test suite",
            "",
            "`python -m dev.cold_book --tests`: `make test` in a fresh clone with an empty HOME, as `.ci/run` runs it.",
            "",
            *tests_table(tests),
            "",
        ]
    if suites:
        lines += [
            "## The test suite per tier",
            "",
            "`python -m dev.suite_time`: each tier of `make test` (the markers of `pyproject.toml`) timed "
            "apart in a checkout whose environment is installed; `fast` is `-m 'not model and not data'`. "
            "A tier over several pytest-xdist workers says how many; the model tier runs in one process.",
            "",
            *suite_table(suites),
            "",
        ]
    sources = sorted({r["source"] for r in records if r.get("source")})
    if sources:
        lines += ["## Where the records come from", "", *[f"- {s}" for s in sources], ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fhs.book.measurements", description=__doc__.split("\n")[0])
    parser.add_argument("--records", default=str(RECORDS), help="the folder of JSON records (default book/records)")
    parser.add_argument(
        "--page", default=str(PAGE), help="the tables written (default book/_generated/measurements.md)"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    try:
        text = render(load_records(Path(args.records)))
    except RecordError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    page = Path(args.page)
    if args.check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print(f"{page} is not what {args.records} gives: run python -m fhs.book.measurements", file=sys.stderr)
            return 1
        return 0
    if not page.is_file() or page.read_text(encoding="utf-8") != text:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
