"""Regression checks: every number a chapter reports is compared with a recorded value.

The habit comes from Anserini and Pyserini: one YAML file per chapter,
``fhs/book/regressions/<chapter>.yaml``, says what each metric means, what the paper
reports for it (where it reports one: a reference into ``fhs/paper.py``, the one place the
paper's numbers are kept) and, per profile, the value a previous run recorded together
with a tolerance. A chapter ends with::

    report = check(results, chapter="01_readiness_gap", profile=profile)
    report.assert_ok()

which prints one line per metric: expected, actual, the paper's value, the gap to
the paper, and a status:

``OK``       actual equals expected at the metric's precision;
``OK*``      not equal, but within the recorded tolerance (floating point noise; run-to-run
             drift of a served model on the ``paper`` profile);
``FAIL``     outside the tolerance, or a recorded metric the chapter did not produce;
             when an input differs from the recorded one, the row names it;
``NEW``      no value recorded for this profile yet (not a failure: record it), e.g. every
             metric of a dataset the file has never seen (a user's spec file).

Expected values hold for the inputs they were recorded with, so each profile also
records the fingerprints of the chapter's inputs (``fhs.book.fingerprint``: the facts
it used, the taxonomy, the model file). A run that passes different fingerprints
gets a report that lists the changed inputs first, so a FAIL says why.

The actual values are also saved to ``runs/<profile>/results/<chapter>.json`` so
that ``python -m fhs.book.check record <chapter> --profile cpu`` can write them into
the YAML after a deliberate change, and ``python -m fhs.book.check verify`` can redo
the comparison without re-running the chapter.

YAML layout (comments are not kept by ``record``: explain things in ``note`` fields)::

    chapter: 01_readiness_gap
    title: Pipeline check
    command: make notebooks PROFILE={profile} ARGS="--only 01_readiness_gap --force"
    metrics:
      fincl/facts:
        description: located facts in the FinCL subset
        paper: test-facts/fintagging   # optional: a path into fhs.paper.TABLES, never a number
        paper_note: the paper's test split, not the same facts
        precision: 0          # decimals compared for an exact OK
        tolerance: 0          # tolerance for every profile, or per profile:
        # tolerance: {default: 1.0e-09, paper: 0.03}   (llama.cpp is exact; a vLLM server drifts)
    expected:
      cpu:
        fincl/facts: 500                      # a bare value uses the metric's tolerance
        other/metric: {value: 0.31, tolerance: 0.01}
    inputs:                                   # written by `record`, compared by `check`
      cpu:
        fincl/facts: 3f2a9c0d4e5b6a71         # fhs.book.fingerprint digests
        fincl/taxonomy: 0b1c2d3e4f5a6b7c
        model: 9a8b7c6d5e4f3a2b
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fhs.book.fingerprint import InputChange, changed_inputs
from fhs.book.paths import shown_path
from fhs.core.errors import InputError, shown
from fhs.core.files import write_text_atomic
from fhs.core.yamlfile import read_yaml_file
from fhs.paper import lookup

REGRESSIONS_DIR = Path(__file__).resolve().parent / "regressions"
DEFAULT_RESULTS_ROOT = Path("runs")
DEFAULT_PRECISION = 4

OK, OK_TOL, FAIL, NEW = "OK", "OK*", "FAIL", "NEW"
LEGEND = (
    "OK = equal at the recorded precision; OK* = within the recorded tolerance;\n"
    "FAIL = outside it, or not produced; NEW = nothing recorded for this profile yet."
)


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Metric:
    """What one reported number is, and what the paper says about it."""

    name: str
    description: str = ""
    paper: float | None = None  # the number ``paper_reference`` names in fhs/paper.py
    paper_reference: str = ""
    paper_note: str = ""
    precision: int = DEFAULT_PRECISION
    tolerance: float = 0.0  # the default for every profile
    tolerances: Mapping[str, float] = field(default_factory=dict)  # per profile, where it differs

    def tolerance_for(self, profile: str) -> float:
        return self.tolerances.get(profile, self.tolerance)


@dataclass(frozen=True)
class Expected:
    value: float
    tolerance: float


@dataclass(frozen=True)
class Regression:
    """One chapter's regression file, parsed."""

    chapter: str
    path: Path
    title: str
    command: str
    metrics: dict[str, Metric]
    expected: dict[str, dict[str, Expected]]  # profile -> metric -> expected
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)  # profile -> input -> fingerprint

    def expected_for(self, profile: str) -> dict[str, Expected]:
        return self.expected.get(profile, {})

    def inputs_for(self, profile: str) -> dict[str, str]:
        return self.inputs.get(profile, {})


@dataclass(frozen=True)
class CheckRow:
    metric: str
    actual: float | None
    expected: float | None
    tolerance: float | None
    paper: float | None
    status: str
    precision: int = DEFAULT_PRECISION
    reason: str = ""  # why a FAIL happened, when an input changed

    @property
    def gap_to_paper(self) -> float | None:
        """Ours minus the paper's value (positive: we are higher)."""
        if self.actual is None or self.paper is None:
            return None
        return self.actual - self.paper


@dataclass
class CheckReport:
    chapter: str
    profile: str
    rows: list[CheckRow] = field(default_factory=list)
    source: Path | None = None
    input_changes: list[InputChange] = field(default_factory=list)
    inputs_recorded: bool = True  # False: nothing recorded to compare the inputs with

    def inputs_line(self) -> str:
        """One line on the inputs: which differ from the recorded ones, or that none do."""
        if self.input_changes:
            return (
                "Inputs differ from the recorded ones, so the numbers are not comparable: "
                + "; ".join(str(change) for change in self.input_changes)
                + "."
            )
        if not self.inputs_recorded:
            return "No input fingerprints recorded for this profile (record them with `record`)."
        return "Inputs match the recorded ones."

    @property
    def failures(self) -> list[CheckRow]:
        return [row for row in self.rows if row.status == FAIL]

    @property
    def ok(self) -> bool:
        return not self.failures

    def counts(self) -> dict[str, int]:
        counts = {status: 0 for status in (OK, OK_TOL, FAIL, NEW)}
        for row in self.rows:
            counts[row.status] += 1
        return counts

    def assert_ok(self) -> None:
        """Raise AssertionError naming every failing metric (a chapter's last cell)."""
        if self.failures:
            lines = [
                f"{row.metric}: expected {_fmt(row.expected, row.precision)} "
                f"± {_fmt(row.tolerance, row.precision)}, got {_fmt(row.actual, row.precision)}"
                + (f" ({row.reason})" if row.reason else "")
                for row in self.failures
            ]
            inputs = f"\n{self.inputs_line()}" if self.input_changes else ""
            raise AssertionError(
                f"{len(self.failures)} regression(s) failed for {self.chapter} "
                f"[{self.profile}]:\n  "
                + "\n  ".join(lines)
                + inputs
                + f"\nIf the change is intended, record it: python -m fhs.book.check record "
                f"{self.chapter} --profile {self.profile}"
            )

    def table(self) -> list[dict[str, str]]:
        """The rows as strings, in display order."""
        out = []
        for row in self.rows:
            gap = row.gap_to_paper
            out.append(
                {
                    "metric": row.metric,
                    "expected": _fmt(row.expected, row.precision),
                    "tol": _fmt(row.tolerance, row.precision) if row.expected is not None else "",
                    "actual": _fmt(row.actual, row.precision),
                    "paper": _fmt(row.paper, row.precision),
                    "gap": "" if gap is None else _fmt(gap, row.precision, signed=True),
                    "status": row.status,
                    **({"why": row.reason} if any(r.reason for r in self.rows) else {}),
                }
            )
        return out

    def __str__(self) -> str:
        rows = self.table()
        header = f"Regression check: {self.chapter} [profile {self.profile}]"
        if not rows:
            return "\n".join([header, "(no metrics)", self.inputs_line(), *self._source_line()])
        columns = list(rows[0])
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
        numeric = {"expected", "tol", "actual", "paper", "gap"}

        def line(values: Mapping[str, str]) -> str:
            cells = [values[c].rjust(widths[c]) if c in numeric else values[c].ljust(widths[c]) for c in columns]
            return "  ".join(cells).rstrip()

        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        body = [header, line({c: c for c in columns}), line({c: "-" * widths[c] for c in columns})]
        body += [line(r) for r in rows]
        body += [f"{counts}. gap = ours - paper.", self.inputs_line(), *self._source_line(), LEGEND]
        return "\n".join(body)

    def __repr__(self) -> str:  # a notebook's plain-text fallback: the table, never the file's absolute path
        return str(self)

    def _source_line(self) -> list[str]:
        if self.source is None:
            return []
        return [f"Recorded values: {shown_path(self.source)}."]

    def _repr_html_(self) -> str:  # a report left as a cell's last value renders as a table
        import html

        rows = self.table()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in (rows[0] if rows else {}))
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r.values()) + "</tr>" for r in rows)
        # the table folds under its tally, so a long check does not fill the page; a failure keeps it open
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n) or "no metrics"
        return (
            f"<details{' open' if self.failures else ''}><summary><b>Regression check: "
            f"{html.escape(self.chapter)} [profile {html.escape(self.profile)}]</b>: {html.escape(counts)}"
            "</summary>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>"
            f"<p>{html.escape(self.inputs_line())}</p>"
            + "".join(f"<p>{html.escape(line)}</p>" for line in self._source_line())
            + f"<p><small>{html.escape(LEGEND).replace(chr(10), ' ')}</small></p>"
        )


# ----------------------------------------------------------------------------- reading


def regression_path(chapter: str, directory: Path | None = None) -> Path:
    return (directory or REGRESSIONS_DIR) / f"{chapter}.yaml"


def _number(value: Any, *, path: Path, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected a number, got {shown(value)}", path=path, field=field_name)
    return float(value)


def load_regression(chapter: str, directory: Path | None = None) -> Regression:
    """Parse ``<directory>/<chapter>.yaml``; every malformed field is named in the error."""
    path = regression_path(chapter, directory)
    if not path.is_file():
        raise InputError(
            "no regression file for this chapter",
            path=path,
            fix=f"create it, or record one: python -m fhs.book.check record {chapter}",
        )
    raw = read_yaml_file(path) or {}
    if not isinstance(raw, dict):
        raise InputError("expected a mapping at the top level", path=path)

    metrics: dict[str, Metric] = {}
    for name, spec in (raw.get("metrics") or {}).items():
        spec = spec or {}
        if not isinstance(spec, dict):
            raise InputError(
                "a metric is a mapping (description, paper, precision, tolerance)", path=path, field=f"metrics.{name}"
            )
        known = {"description", "paper", "paper_note", "precision", "tolerance"}
        unknown = set(spec) - known
        if unknown:
            raise InputError(
                f"unknown key(s) {sorted(unknown)}", path=path, field=f"metrics.{name}", fix=f"use only {sorted(known)}"
            )
        paper = spec.get("paper")
        default, per_profile = _tolerances(
            spec.get("tolerance", 0.0), path=path, field_name=f"metrics.{name}.tolerance"
        )
        metrics[str(name)] = Metric(
            name=str(name),
            description=str(spec.get("description", "")),
            paper=_paper_value(paper, path=path, field_name=f"metrics.{name}.paper"),
            paper_reference="" if paper is None else str(paper),
            paper_note=str(spec.get("paper_note", "")),
            precision=int(spec.get("precision", DEFAULT_PRECISION)),
            tolerance=default,
            tolerances=per_profile,
        )

    expected: dict[str, dict[str, Expected]] = {}
    for profile, values in (raw.get("expected") or {}).items():
        found: dict[str, Expected] = {}
        for name, entry in (values or {}).items():
            where = f"expected.{profile}.{name}"
            metric = metrics.get(str(name))
            if metric is None:
                raise InputError(
                    "expected value for a metric that is not defined",
                    path=path,
                    field=where,
                    fix="add it under metrics: first",
                )
            if isinstance(entry, dict):
                if "value" not in entry:
                    raise InputError("missing 'value'", path=path, field=where)
                value = _number(entry["value"], path=path, field_name=f"{where}.value")
                tolerance = _number(
                    entry.get("tolerance", metric.tolerance_for(str(profile))),
                    path=path,
                    field_name=f"{where}.tolerance",
                )
            else:
                value = _number(entry, path=path, field_name=where)
                tolerance = metric.tolerance_for(str(profile))
            found[str(name)] = Expected(value, tolerance)
        expected[str(profile)] = found

    return Regression(
        chapter=str(raw.get("chapter", chapter)),
        path=path,
        title=str(raw.get("title", chapter)),
        command=str(raw.get("command", "")),
        metrics=metrics,
        expected=expected,
        inputs=_inputs(raw.get("inputs"), path=path),
    )


def _paper_value(reference: Any, *, path: Path, field_name: str) -> float | None:
    """The number a metric's ``paper:`` reference names in ``fhs/paper.py`` (None for null).

    A number typed into the file is refused, so the paper's figures keep one home.
    """
    if reference is None:
        return None
    if isinstance(reference, (bool, int, float)):
        raise InputError(
            f"the paper's value is written as the number {reference!r}",
            path=path,
            field=field_name,
            fix="add the number to fhs/paper.py (saying where in the paper "
            "it comes from) and name it here, e.g. fintagging/direct/recall@1",
        )
    if not isinstance(reference, str):
        raise InputError(
            f"expected a reference into fhs/paper.py, got {reference!r}",
            path=path,
            field=field_name,
            fix="write a path such as fintagging/direct/recall@1",
        )
    try:
        return lookup(reference)
    except LookupError as error:
        raise InputError(
            f"paper reference {reference!r} names no number in fhs/paper.py: {error.args[0]}",
            path=path,
            field=field_name,
        ) from None


def _tolerances(raw: Any, *, path: Path, field_name: str) -> tuple[float, dict[str, float]]:
    """A metric's ``tolerance``: one number, or ``{default: x, <profile>: y, ...}``."""
    if not isinstance(raw, dict):
        return _number(raw, path=path, field_name=field_name), {}
    if "default" not in raw:
        raise InputError(
            "a per-profile tolerance needs a 'default' entry",
            path=path,
            field=field_name,
            fix="e.g. tolerance: {default: 1.0e-09, paper: 0.03}",
        )
    values = {str(k): _number(v, path=path, field_name=f"{field_name}.{k}") for k, v in raw.items()}
    return values.pop("default"), values


def _inputs(raw: Any, *, path: Path) -> dict[str, dict[str, str]]:
    """``inputs: {profile: {input name: fingerprint}}``; fingerprints are strings."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError("expected a mapping of profile -> input -> fingerprint", path=path, field="inputs")
    out: dict[str, dict[str, str]] = {}
    for profile, values in raw.items():
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise InputError(
                "expected input name -> fingerprint (a string)",
                path=path,
                field=f"inputs.{profile}",
                fix="re-record: python -m fhs.book.check record ...",
            )
        out[str(profile)] = {str(k): v for k, v in values.items()}
    return out


def flatten(results: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """``{"fincl": {"R@10": 0.3}}`` -> ``{"fincl/R@10": 0.3}``; values become floats."""
    flat: dict[str, float] = {}
    for key, value in results.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, name))
        elif isinstance(value, bool) or value is None:
            raise InputError(f"result {name!r} is {value!r}, not a number", field=name)
        else:
            try:
                flat[name] = float(value)
            except (TypeError, ValueError):
                raise InputError(f"result {name!r} is {value!r}, not a number", field=name) from None
    return flat


# ----------------------------------------------------------------------------- comparing


def status_of(actual: float | None, expected: Expected | None, precision: int) -> str:
    """The Anserini verdict for one number."""
    if expected is None:
        return NEW
    if actual is None or math.isnan(actual):
        return FAIL
    if round(actual, precision) == round(expected.value, precision):
        return OK
    # a hair of slack so that a tolerance written as 0.001 accepts a gap printed as 0.001
    if abs(actual - expected.value) <= expected.tolerance + 1e-12:
        return OK_TOL
    return FAIL


def compare(
    results: Mapping[str, Any],
    regression: Regression,
    profile: str,
    inputs: Mapping[str, str] | None = None,
    left_out: Collection[str] = (),
) -> CheckReport:
    """Compare without printing or saving anything (the pure part of :func:`check`).

    ``inputs`` are the run's input fingerprints; those that differ from the
    recorded ones are listed on the report and named on every failing row they feed.
    A dataset the regression file has never seen (a user's spec) gets its metrics'
    definitions from another dataset's (:func:`with_new_datasets`) and reports them
    ``NEW``; the recorded metrics of a dataset this run did not include are left out, and so are those under a
    ``left_out`` prefix (``fincl/parallel``: a row the chapter's parameters did not ask for).
    """
    actual = dataset_keys(flatten(results))
    skipped = tuple(f"{prefix}/" for prefix in dataset_keys(dict.fromkeys(left_out)))
    inputs = None if inputs is None else dataset_keys(inputs)
    metrics = with_new_datasets(actual, regression)
    recorded = regression.expected_for(profile)
    absent = _datasets_not_run(actual, regression, profile, inputs)
    recorded_inputs = {
        name: value for name, value in regression.inputs_for(profile).items() if _prefix(name) not in absent
    }
    changes = changed_inputs(recorded_inputs, inputs) if inputs is not None else []
    report = CheckReport(
        chapter=regression.chapter,
        profile=profile,
        source=regression.path,
        input_changes=changes,
        inputs_recorded=bool(recorded_inputs) or inputs is None,
    )
    for name, metric in metrics.items():
        if name not in actual and (name not in recorded or _prefix(name) in absent or name.startswith(skipped)):
            continue  # defined for another profile only, or a dataset or row this run did not include
        expected = recorded.get(name)
        status = status_of(actual.get(name), expected, metric.precision)
        causes = [change.name for change in changes if change.explains(name)]
        report.rows.append(
            CheckRow(
                metric=name,
                actual=actual.get(name),
                expected=None if expected is None else expected.value,
                tolerance=None if expected is None else expected.tolerance,
                paper=metric.paper,
                status=status,
                precision=metric.precision,
                reason="input changed: " + ", ".join(causes) if status == FAIL and causes else "",
            )
        )
    return report


def _prefix(name: str) -> str:
    return name.split("/", 1)[0]


def dataset_keys(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Keys that start with a dataset spec file's path (a chapter's ``datasets`` entry) renamed to start
    with the spec's ``name``, so a dataset's values are recorded under its name wherever its file lies."""
    from fhs.data.datasets import is_spec_file, resolve_dataset

    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split("/")
        for cut in range(1, len(parts)):
            head = "/".join(parts[:cut])
            if is_spec_file(head) and Path(head).is_file():
                key = "/".join([resolve_dataset(head).name, *parts[cut:]])
                break
        out[key] = value
    return out


def _dataset_names(regression: Regression, *input_maps: Mapping[str, str] | None) -> set[str]:
    """Prefixes that name datasets: the built-ins and every dataset whose facts an input fingerprint names."""
    from fhs.data.datasets import DATASETS

    names = set(DATASETS)
    for inputs in (*regression.inputs.values(), *input_maps):
        names |= {name.rsplit("/", 1)[0] for name in (inputs or {}) if name.endswith("/facts")}
    return names


def _datasets_not_run(
    actual: Mapping[str, float], regression: Regression, profile: str, inputs: Mapping[str, str] | None
) -> set[str]:
    """Datasets with recorded values for ``profile`` that this run produced no value for."""
    ran = {_prefix(name) for name in actual}
    datasets = _dataset_names(regression, inputs)
    return {
        _prefix(name)
        for name in regression.expected_for(profile)
        if _prefix(name) in datasets and _prefix(name) not in ran
    }


def with_new_datasets(actual: Mapping[str, float], regression: Regression) -> dict[str, Metric]:
    """The regression's metrics, plus a definition for each result of a dataset it has never seen.

    A result ``<new>/<rest>`` takes the definition of ``<known>/<rest>`` (the first
    dataset that defines it) with its description renamed and no paper value (the
    paper did not run on it); any other undefined result is an error.
    """
    metrics = dict(regression.metrics)
    known = {_prefix(name) for name in regression.metrics if "/" in name}
    undefined = []
    for name in sorted(set(actual) - set(metrics)):
        head, _, rest = name.partition("/")
        template = (
            next(
                (metrics[f"{dataset}/{rest}"] for dataset in sorted(known) if rest and f"{dataset}/{rest}" in metrics),
                None,
            )
            if head not in known
            else None
        )
        if template is None:
            undefined.append(name)
            continue
        source = _prefix(template.name)
        description = template.description.replace(f"{source}:", f"{head}:", 1)
        metrics[name] = Metric(
            name=name,
            description=description,
            precision=template.precision,
            tolerance=template.tolerance,
            tolerances=template.tolerances,
        )
    if undefined:
        raise InputError(
            f"results name metric(s) {undefined} that are not defined",
            path=regression.path,
            field="metrics",
            fix="define them (description, paper, precision) before checking",
        )
    return metrics


def results_path(chapter: str, profile: str, root: str | os.PathLike | None = None) -> Path:
    return Path(root or DEFAULT_RESULTS_ROOT) / profile / "results" / f"{chapter}.json"


def inputs_path(chapter: str, profile: str, root: str | os.PathLike | None = None) -> Path:
    return Path(root or DEFAULT_RESULTS_ROOT) / profile / "results" / f"{chapter}.inputs.json"


def save_results(
    results: Mapping[str, Any],
    chapter: str,
    profile: str,
    root: str | os.PathLike | None = None,
    inputs: Mapping[str, str] | None = None,
) -> Path:
    """Write the flat results (and the input fingerprints) atomically; ``record`` and ``verify`` read them back."""
    path = results_path(chapter, profile, root)
    write_text_atomic(path, json.dumps(dataset_keys(flatten(results)), indent=2, sort_keys=True) + "\n")
    if inputs is not None:
        write_text_atomic(
            inputs_path(chapter, profile, root), json.dumps(dataset_keys(inputs), indent=2, sort_keys=True) + "\n"
        )
    return path


def check(
    results: Mapping[str, Any],
    chapter: str,
    profile: str,
    *,
    inputs: Mapping[str, str] | None = None,
    directory: Path | None = None,
    results_root: str | os.PathLike | None = None,
    save: bool = True,
    quiet: bool = False,
    left_out: Collection[str] = (),
) -> CheckReport:
    """Compare a chapter's results with its recorded values, print the table, return it.

    ``results`` maps metric names to numbers (nested mappings are joined with ``/``);
    ``inputs`` maps input names to fingerprints (``fhs.book.fingerprint``); ``left_out`` names the metric
    prefixes the chapter was asked not to run (:func:`compare`).
    With ``save`` both are also written under ``runs/<profile>/results/`` for
    ``python -m fhs.book.check record``.
    """
    regression = load_regression(chapter, directory)
    report = compare(results, regression, profile, inputs, left_out)
    if save:
        save_results(results, chapter, profile, results_root, inputs)
    if not quiet:
        print(report)
    return report


# ----------------------------------------------------------------------------- recording


def record(
    chapter: str,
    profile: str,
    results: Mapping[str, Any],
    *,
    directory: Path | None = None,
    tolerance: float | None = None,
    inputs: Mapping[str, str] | None = None,
) -> Path:
    """Write ``results`` as the expected values of ``profile`` into the chapter's YAML.

    Values are written unrounded (exactly as computed). Metric definitions and
    other profiles are left as they are; a dataset the file has never seen gets its
    definitions from another dataset's (:func:`with_new_datasets`), and any other
    metric the file does not define is an error (define it first, so every recorded
    number says what it is). The datasets the results include replace their recorded
    values and fingerprints; the others keep theirs. ``paper:`` references are written back as
    references, never as the numbers they name. ``tolerance`` overrides the
    metric's tolerance for every value recorded now; ``inputs`` are the run's fingerprints.
    """
    regression = load_regression(chapter, directory)  # validates the file first
    flat = dataset_keys(flatten(results))
    try:
        metrics = with_new_datasets(flat, regression)
    except InputError as error:
        raise InputError(
            f"cannot record undefined metric(s): {error.problem}",
            path=regression.path,
            field="metrics",
            fix="add a definition under metrics: first",
        ) from None
    raw = read_yaml_file(regression.path) or {}
    raw["metrics"] = raw.get("metrics") or {}
    for name, metric in metrics.items():  # a new dataset's definitions, taken from another dataset's
        if name not in regression.metrics:
            raw["metrics"][name] = {
                "description": metric.description,
                "precision": metric.precision,
                "tolerance": (
                    {"default": metric.tolerance, **metric.tolerances} if metric.tolerances else metric.tolerance
                ),
            }
    expected = raw.setdefault("expected", {}) or {}
    raw["expected"] = expected
    # datasets this run did not include keep their recorded values
    ran = {_prefix(name) for name in flat}
    datasets = _dataset_names(regression, inputs)
    block: dict[str, Any] = {
        name: value
        for name, value in (expected.get(profile) or {}).items()
        if _prefix(name) in datasets and _prefix(name) not in ran
    }
    for name in metrics:  # keep the definition order
        if name not in flat:
            continue
        metric = metrics[name]
        value: float | int = flat[name]  # unrounded: OK compares after rounding both sides
        if metric.precision == 0 and value == int(value):
            value = int(value)
        if tolerance is None or tolerance == metric.tolerance_for(profile):
            block[name] = value
        else:
            block[name] = {"value": value, "tolerance": tolerance}
    expected[profile] = {name: block[name] for name in metrics if name in block}
    if inputs is not None:
        given = dataset_keys(inputs)
        kept = {
            name: value
            for name, value in ((raw.get("inputs") or {}).get(profile) or {}).items()
            if _prefix(name) in datasets and _prefix(name) not in ran and name not in given
        }
        raw["inputs"] = {**(raw.get("inputs") or {}), profile: dict(sorted({**kept, **given}.items()))}
    return write_text_atomic(regression.path, yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100))


def _read_saved(chapter: str, profile: str, root: str | None) -> dict[str, float]:
    path = results_path(chapter, profile, root)
    if not path.is_file():
        raise InputError(
            "no saved results for this chapter and profile",
            path=path,
            fix=f"run the chapter first: make notebooks PROFILE={profile}",
        )
    return json.loads(path.read_text(encoding="utf-8"))


def _read_saved_inputs(chapter: str, profile: str, root: str | None) -> dict[str, str] | None:
    path = inputs_path(chapter, profile, root)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _fmt(value: float | None, precision: int, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    spec = f"{'+' if signed else ''}.{max(precision, 0)}f"
    return format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fhs.book.check",
        description="Compare a chapter's saved results with fhs/book/regressions/<chapter>.yaml, "
        "or record them as the new expected values.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("verify", "print the comparison; exit 1 on FAIL"),
        ("record", "write the saved results into the YAML as expected values"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("chapter", help="chapter stem, e.g. 01_readiness_gap")
        cmd.add_argument("--profile", default="cpu", help="profile whose results to use (default cpu)")
        cmd.add_argument(
            "--results-root", default=None, help=f"folder holding <profile>/results/ (default {DEFAULT_RESULTS_ROOT})"
        )
        if name == "record":
            cmd.add_argument(
                "--tolerance",
                type=float,
                default=None,
                help="tolerance to store with every value (default: the metric's own)",
            )
    args = parser.parse_args(argv)
    try:
        results = _read_saved(args.chapter, args.profile, args.results_root)
        inputs = _read_saved_inputs(args.chapter, args.profile, args.results_root)
        if args.command == "record":
            path = record(args.chapter, args.profile, results, tolerance=args.tolerance, inputs=inputs)
            what = f"{len(inputs)} input fingerprint(s)" if inputs else "no input fingerprints (the chapter saved none)"
            print(f"recorded {len(results)} value(s) and {what} for profile {args.profile} in {path}")
            return 0
        report = check(results, args.chapter, args.profile, inputs=inputs, save=False)
        return 0 if report.ok else 1
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
