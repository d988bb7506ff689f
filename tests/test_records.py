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
