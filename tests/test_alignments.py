"""The on-disk store of sentence alignments gives back exactly what the aligner computes."""

from __future__ import annotations

from fhs.data.relocate import alignments as store_module
from fhs.data.relocate.align import AlignConfig
from fhs.data.relocate.alignments import AlignmentStore, alignment_key
from fhs.data.relocate.contract import AlignedDocument

SPANISH = "Paciente de 45 años con dolor torácico. Se realizó un electrocardiograma normal.\n\nAlta a domicilio."
ENGLISH = "45-year-old patient with chest pain.\nA normal electrocardiogram was performed.\n1.\nDischarged home."


def test_a_stored_alignment_is_the_computed_one_and_the_aligner_is_not_asked_again(tmp_path, monkeypatch):
    path = tmp_path / "alignments.json"
    computed = AlignedDocument.build("d1", SPANISH, ENGLISH, AlignConfig(), AlignmentStore(path))
    assert not path.exists()  # nothing is written before save
    first = AlignmentStore(path)
    AlignedDocument.build("d1", SPANISH, ENGLISH, AlignConfig(), first)
    first.save()
    assert computed.alignment is not None and path.is_file()

    import fhs.data.relocate.contract as tasks
    monkeypatch.setattr(tasks, "align_document", lambda *a, **k: (_ for _ in ()).throw(AssertionError("realigned")))
    read = AlignedDocument.build("d1", SPANISH, ENGLISH, AlignConfig(), AlignmentStore(path))
    assert read == computed


def test_the_key_changes_with_the_texts_the_settings_and_the_aligner(monkeypatch):
    key = alignment_key(SPANISH, ENGLISH, AlignConfig())
    assert key != alignment_key(SPANISH + " Fin.", ENGLISH, AlignConfig())
    assert key != alignment_key(SPANISH, ENGLISH, AlignConfig(skip_penalty=3.0))
    monkeypatch.setattr(store_module, "aligner_digest", lambda: "another aligner")
    assert key != alignment_key(SPANISH, ENGLISH, AlignConfig())


def test_an_unaligned_document_is_stored_as_none_and_a_damaged_file_counts_as_empty(tmp_path):
    path = tmp_path / "alignments.json"
    store = AlignmentStore(path)
    store.put("k", None)
    store.save()
    assert AlignmentStore(path).get("k") == (True, None)
    path.write_text("{not json")
    assert AlignmentStore(path).get("k") == (False, None)
