"""`fhs run` and `fhs plan` options renamed for a clearer word: the new and old spellings give the same
settings, --help names the old one, and using it says the new one on stderr in one line."""

from __future__ import annotations

import pytest

from fhs.cli.parser import build_parser

RUN = ["run", "--dataset", "fincl", "--method", "fhs", "--out", "o"]
# (new, old, value or None for a switch, the namespace attribute)
RENAMED = [
    ("--normalize", "--normalise", "raw", "normalize"),
    ("--schema-transport", "--structured", "gbnf", "schema_transport"),
    ("--cache-unparsed", "--replay-unparsed", None, "cache_unparsed"),
    ("--cache-any-server", "--replay-from-any-server", None, "cache_any_server"),
]


@pytest.mark.parametrize("new, old, value, dest", RENAMED)
def test_a_renamed_run_option_takes_both_spellings_and_the_old_one_says_the_new(new, old, value, dest, capsys):
    given = [value] if value is not None else []
    by_new = build_parser().parse_args([*RUN, new, *given])
    assert capsys.readouterr().err == ""
    by_old = build_parser().parse_args([*RUN, old, *given])
    err = capsys.readouterr().err
    assert vars(by_new) == vars(by_old) and getattr(by_new, dest) == (value if value is not None else True)
    assert err.count("\n") == 1 and old in err and new in err


def test_plans_sample_is_named_for_what_it_sizes_and_the_old_spelling_still_works(capsys):
    new = build_parser().parse_args(["plan", "--profile", "smoke", "--dry-run-facts", "3"])
    old = build_parser().parse_args(["plan", "--profile", "smoke", "--sample", "3"])
    assert new.dry_run_facts == old.dry_run_facts == 3
    assert "--dry-run-facts" in capsys.readouterr().err
    assert build_parser().parse_args(["plan", "--profile", "smoke"]).dry_run_facts == 20


def test_help_groups_the_run_options_and_names_each_old_spelling(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: argparse would break a name at its hyphen
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for group in ("data and retrieval:", "method:", "FHS knobs:", "model:", "server:", "output and progress:"):
        assert group in shown
    for new, old, _, _ in RENAMED:
        assert f"(old spelling {old} still accepted)" in shown and new in shown
