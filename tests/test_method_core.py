"""fhs/method holds what the paper describes; the machinery around it lives in the layers that run it."""

from __future__ import annotations

import ast
from pathlib import Path

import fhs

METHOD = Path(fhs.__file__).parent / "method"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_method_keeps_no_store_no_oracle_model_and_no_run_knobs():
    """Verdict ledger (SQLite), oracle model, run knobs and the relocator sit outside the method."""
    names = {path.stem for path in METHOD.glob("*.py")}
    assert not names & {"ledger", "oracle_model", "knobs", "relocation"}
    for path in METHOD.glob("*.py"):
        assert "sqlite3" not in imported_modules(path), path.name


def test_the_ledger_wraps_the_verifier_from_the_run_layer():
    """The method hands its verifier calls to the run layer's ledger, which asks the model only what it lacks."""
    from fhs.method.config import FHSConfig
    from fhs.method.fhs import ask_verifier, run_fhs_fact
    from fhs.run.ledger import MemoryLedger
    from scripted_llm import OverlapRetriever
    from test_pipeline import DOMAIN, FACT, TAXONOMY
    from test_variants import backend

    class Watched(MemoryLedger):
        def __init__(self) -> None:
            super().__init__()
            self.asks: list = []

        def judge(self, verification, ask):
            self.asks.append(ask)
            return super().judge(verification, ask)

    ledger, config = Watched(), FHSConfig(selector=False)
    first_model, second_model = backend(), backend()
    first = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), first_model, DOMAIN, TAXONOMY, config, ledger=ledger)
    second = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), second_model, DOMAIN, TAXONOMY, config.replace(beta=0.2),
                          ledger=ledger)
    assert ledger.asks == [ask_verifier, ask_verifier]
    assert [r.purpose for r in first_model.requests].count("verifier") == 2 and len(ledger) > 0
    assert [r.purpose for r in second_model.requests].count("verifier") == 0  # every verdict came from the ledger
    assert second["verifier"]["verdicts"][0]["entries"] == first["verifier"]["verdicts"][0]["entries"]


def test_chapter_tables_have_one_home_per_layer():
    """Record computations live once in fhs/run/tables (no frames, no drawing); a chapter's module lays them out
    and defines no function of the same name."""
    tables = METHOD.parent / "run" / "tables"
    chapters = METHOD.parent / "book" / "chapters"

    def functions(path: Path) -> set[str]:
        return {node.name for node in ast.parse(path.read_text(encoding="utf-8")).body
                if isinstance(node, ast.FunctionDef)}

    computed = {name: path.name for path in tables.glob("*.py") for name in functions(path)}
    for path in tables.glob("*.py"):
        assert not {"pandas", "matplotlib", "matplotlib.pyplot"} & imported_modules(path), path.name
        assert not any(module.startswith("fhs.book") for module in imported_modules(path)), path.name
    twice = {f"{path.name}:{name} (also fhs/run/tables/{computed[name]})" for path in chapters.glob("*.py")
             for name in functions(path) if name in computed}
    assert not twice
