"""A killed run keeps every finished record, and the next run resumes."""

import json

import pytest

from fhs.core.errors import InputError
from fhs.run.records import RecordWriter, read_records, write_json_atomic


def test_resume_drops_a_cut_off_line_and_keeps_finished_records(tmp_path):
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        writer.write({"id": "a", "rank": 1})
        writer.write({"id": "b", "rank": None})
    with path.open("a") as handle:  # what a kill mid-write leaves behind
        handle.write('{"id": "c", "ra')
    assert [r["id"] for r in read_records(path)] == ["a", "b"]
    with RecordWriter(path) as writer:
        assert "a" in writer and "b" in writer and "c" not in writer
        writer.write({"id": "c", "rank": 3})
    assert [r["id"] for r in read_records(path)] == ["a", "b", "c"]


def test_corruption_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(InputError, match=r"records.jsonl:2"):
        read_records(path)


def test_settings_change_is_refused(tmp_path):
    path = tmp_path / "records.jsonl"
    with RecordWriter(path, config={"w_cov": 1.0}) as writer:
        writer.write({"id": "a"})
    with pytest.raises(InputError, match="other settings"):
        RecordWriter(path, config={"w_cov": 0.0})
    RecordWriter(path, config={"w_cov": 1.0}).close()


def test_atomic_json_leaves_no_temporary_file(tmp_path):
    write_json_atomic(tmp_path / "m.json", {"x": 1})
    assert json.loads((tmp_path / "m.json").read_text()) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_records_reach_the_file_at_once_and_are_fsynced_on_close(tmp_path, monkeypatch):
    """Flushed per record (a killed process loses nothing); fsync at most once a second and on close."""
    import os

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "records.jsonl"
    writer = RecordWriter(path, sync_seconds=3600)
    for i in range(50):
        writer.write({"id": f"f{i}"})
        assert len(read_records(path)) == i + 1  # visible to a reader before any fsync
    assert synced == []
    writer.close()
    assert len(synced) == 1
    with RecordWriter(path, sync_seconds=0) as writer:
        writer.write({"id": "g"})
    assert len(synced) == 3  # every record when asked to, plus the close


def big_record(i: int) -> dict:
    """A record the size of an FHS record at the paper's settings (rankings of long ids, model calls)."""
    ranking = [f"us-gaap:SomeRatherLongConceptName{j:04d}Fact{i}" for j in range(1000)]  # about 48 KB of JSON
    return {"id": f"f{i:05d}", "context_id": f"c{i % 40}", "modality": "table" if i % 2 else "text",
            "gold": ["us-gaap:Revenues"], "rank": (i % 9) or None, "ranking": ranking,
            "selected": ranking[0], "correct": i % 9 == 1,
            "llm_calls": [{"purpose": "hypothesis", "parsed": True, "cached": False, "tokens_in": 900,
                           "tokens_out": 80, "seconds": 0.5}] * 3}


def test_the_writer_and_the_metrics_hold_no_record_payload(tmp_path):
    """Memory grows by a summary a fact, not by the record: a ceiling far below the records' size."""
    import tracemalloc

    from fhs.run.evaluate import metrics
    from fhs.run.health import stage_health
    from fhs.run.records import records_at
    from fhs.run.summary import call_totals

    n = 400
    path = tmp_path / "records.jsonl"
    ids = [f"f{i:05d}" for i in range(n)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with RecordWriter(path) as writer:
            for i in range(n):
                writer.write(big_record(i))
            summaries = writer.summaries(ids)
            result = {**metrics(summaries), **call_totals(summaries), "stages": stage_health(summaries)}
        written = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        with RecordWriter(path) as writer:  # resuming reads every record, one at a time
            again = writer.summaries(ids)
            streamed = sum(len(r["ranking"]) for r in records_at(path, again, fields=["ranking"]))
        resumed = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert size > n * 40_000
    # stated generously: 8 KB a fact (summaries are about 1 KB); keeping the records would take 100 KB+ a fact
    assert written < n * 8_000 and resumed < n * 8_000, (written, resumed, size)
    assert result["n_facts"] == n and result["llm_calls"] == 3 * n and result["stages"]["hypothesis"]["calls"] == 3 * n
    assert result["recall@1"] == pytest.approx(sum((i % 9) == 1 for i in range(n)) / n)
    assert streamed == 1000 * n and [s["id"] for s in again] == ids


def test_records_are_read_back_by_offset_in_fact_order_after_a_torn_line(tmp_path):
    from fhs.run.records import iter_records, records_at

    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        for fid in ("b", "a"):
            writer.write({"id": fid, "rank": 1, "note": "é" * 3})
    with path.open("ab") as handle:
        handle.write(b'{"id": "c", "ra')
    with RecordWriter(path) as writer:
        writer.write({"id": "c", "rank": 2})
        writer.write({"id": "a", "rank": 5})  # a retried fact: the later record is the fact's
        chosen = writer.summaries(["a", "b", "c"])
    assert [r["rank"] for r in records_at(path, chosen)] == [5, 1, 2]
    assert [r for r in records_at(path, chosen, fields=["id"])] == [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    assert [r["id"] for r in iter_records(path)] == ["b", "a", "c", "a"]


def test_packed_summaries_keep_the_newest_of_a_fact_and_read_back_in_any_order():
    from fhs.run.records import PackedSummaries, Summaries, _pack

    store = PackedSummaries()
    assert not store and "a" not in store
    store["a"] = _pack({"id": "a", "rank": 3})
    store["b"] = _pack({"id": "b", "failed": True})
    store["b"] = _pack({"id": "b", "rank": 1})  # the failed fact retried: the newest record wins
    assert len(store) == 2 and "b" in store
    read = Summaries(store, [store.slot("b"), store.slot("a")])
    assert list(read) == [{"id": "b", "rank": 1}, {"id": "a", "rank": 3}]
    assert read[1:] == [{"id": "a", "rank": 3}] and len(read[:0]) == 0
    assert read == Summaries([store["b"], store["a"]])  # the same as a list of packed summaries
