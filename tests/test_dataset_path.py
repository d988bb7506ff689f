"""The dataset spec's path from the run layer into the data layer: handed down resolved once, read once.

A crossing is a call from a module of ``fhs.run`` into one of ``fhs.data``; each returns plain data
back up (a climb). Loading an experiment climbs back up at most twice: once with the resolved spec (whose
retrieval settings the run layer checks before anything is read), once with the taxonomy and facts.
"""

from __future__ import annotations

import sys

import pytest

from fhs.core.errors import InputError
from fhs.data.datasets import DATASETS
from fhs.data.datasets.loaded import files_dataset, load_dataset
from fhs.run.inputs import load_experiment, load_experiment_from_files
from tests.test_dataset_spec import write_spec


def climbs(call) -> int:
    """How many calls from fhs.run into fhs.data ``call`` makes (each returns to the run layer once)."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event == "call" and frame.f_globals.get("__name__", "").startswith("fhs.data"):
            caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
            if caller.startswith("fhs.run"):
                count += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count


def test_a_spec_files_experiment_climbs_back_to_the_run_layer_at_most_twice(tmp_path):
    path = write_spec(tmp_path / "inputs")
    assert climbs(lambda: load_experiment(str(path), progress=False)) <= 2


def test_an_adapters_files_climb_back_to_the_run_layer_at_most_twice(tmp_path):
    folder = tmp_path / "inputs"
    write_spec(folder)
    assert climbs(lambda: load_experiment_from_files(folder / "facts.jsonl", folder / "concepts.csv")) <= 2


def test_the_data_layer_gives_back_the_resolved_spec_its_taxonomy_and_facts(tmp_path):
    folder = tmp_path / "inputs"
    write_spec(folder)
    spec = files_dataset(folder / "facts.jsonl", folder / "concepts.csv")
    loaded = load_dataset(spec, progress=False)
    assert loaded.spec is spec and [f.id for f in loaded.facts] == ["a1", "a2", "a3"]
    assert "Revenues" in {c.id for c in loaded.taxonomy.concepts}
    # a built-in taxonomy brings the domain and retrieval settings of the first dataset over it
    builtin = files_dataset(folder / "facts.jsonl", "icd-10-cm")
    assert (builtin.domain, builtin.retrieval, builtin.taxonomy_file) == ("icd-10-cm", DATASETS["codiesp"].retrieval,
                                                                         None)
    assert files_dataset(folder / "facts.jsonl", folder / "concepts.csv", "my.yaml").domain == "my.yaml"


def test_an_empty_facts_file_is_a_one_line_error_naming_it(tmp_path):
    folder = tmp_path / "inputs"
    write_spec(folder)
    (folder / "facts.jsonl").write_text("")
    with pytest.raises(InputError, match="facts.jsonl: no facts"):
        load_dataset(files_dataset(folder / "facts.jsonl", folder / "concepts.csv"), progress=False)
