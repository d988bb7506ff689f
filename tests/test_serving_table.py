"""The serving recipe by GPU class: dev/serving_table.py renders book/reproducing.md's block from the
recorded plans in book/records/plans/, and the records agree with fhs plan's server model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dev import serving_table
from fhs.plan.server import Server, model_time

ROOT = Path(__file__).resolve().parent.parent


def test_the_page_block_is_what_the_records_give():
    assert serving_table.main(["--check"]) == 0, "book/reproducing.md is stale: run python -m dev.serving_table"


def test_every_record_is_what_the_server_model_gives_on_its_plan():
    for record, cls in zip(serving_table.load_records(), serving_table.CLASSES):
        plan = record["plan"]
        assert record["class"] == cls.key and record["command"] == cls.plan_command()
        server = model_time(Server(cls.gpu, cls.precision, cls.tensor_parallel), plan["purposes"], plan["total"],
                            record["server"]["prefix_share"])
        assert server == record["server"], cls.key
        assert record["starts"] == (server["kv_tokens"] >= record["max_model_len"])
        assert plan["profile"] == "paper" and plan["left_out"] == []


def test_the_page_gives_one_command_per_class_with_the_records_figures():
    text = (ROOT / "book" / "reproducing.md").read_text(encoding="utf-8")
    block = text[text.index(serving_table.BEGIN):text.index(serving_table.END)]
    commands = re.findall(r"```bash\n(vllm serve .*?)\n```", block, flags=re.S)
    records = serving_table.load_records()
    recipes = [r for r in records if r["recipe"]]
    assert len(commands) == len(recipes) >= 4
    for command, record in zip(commands, recipes):
        server = record["server"]
        assert record["starts"] and command == record["serve_command"]
        assert f"--max-num-seqs {server['max_num_seqs']} " in command.replace("\\\n", "")
        assert ("-FP8 --kv-cache-dtype fp8" in command) == (server["precision"] == "fp8")
        assert (f"--tensor-parallel-size {server['tensor_parallel']}" in command) == (server["tensor_parallel"] > 1)
        row = next(line for line in block.splitlines() if line.startswith(f"| {record['label']} |"))
        assert f"| {server['kv_tokens']:,} | {server['selector_prompts_held']:,} | {server['max_num_seqs']} |" in row
        low, high = server["range_days"]
        assert f"| {low:.1f}–{high:.1f} (floor {server['floor_days']:.1f}) |" in row
        assert server["floor_days"] <= low <= high


def test_records_need_a_plan_with_a_server():
    plan = {"profile": "paper", "purposes": {}, "total": {"requests": 0, "prompt_tokens": 0, "output_tokens": 0}}
    with pytest.raises(ValueError, match="--gpu"):
        serving_table.records_from_plan(plan, "abc1234", "2026-01-01")
    shapes = {"selector": {"requests": 10, "prompt_tokens": 146_000, "output_tokens": 580,
                           "mean_prompt_tokens": 14_600, "mean_output_tokens": 58}}
    total = {"requests": 10, "prompt_tokens": 146_000, "output_tokens": 580}
    plan = {**plan, "purposes": shapes, "total": total, "rows": [1], "server": {"prefix_share": 0.25}}
    records = serving_table.records_from_plan(plan, "abc1234", "2026-01-01")
    assert list(records) == [cls.key for cls in serving_table.CLASSES]
    assert "rows" not in records["h100-fp8"]["plan"]
    assert records["h100-fp8"]["starts"] and records["h100-bf16"]["starts"]  # 35k tokens: one context, barely
    assert records["h100-bf16"]["server"]["kv_tokens"] < 2 * serving_table.MAX_MODEL_LEN


def test_the_readme_points_to_the_recipe_and_types_no_figure_of_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "book/reproducing.md" in readme and "--max-num-seqs" not in readme
    assert len(readme.splitlines()) <= 120


def test_no_recorded_plan_prints_a_floor_above_a_modelled_value():
    for record in serving_table.load_records():
        server = record["server"]
        assert server["floor_days"] <= server["days"] == server["range_days"][0] <= server["range_days"][1]
        assert server["floor_days"] <= server["prefill_days"] + server["decode_days"] + 0.01
