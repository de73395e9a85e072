"""The tensor lists bundled with the real recordings (written by
snapdiff.torch.Recorder on the device) follow schemas/tensors.schema.json,
and snapdiff.torch writes the document the schema describes."""
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "tensors.schema.json").read_text())


def check(doc):
    props = SCHEMA["properties"]
    for k in SCHEMA["required"]:
        assert k in doc, k
    for k in doc:
        assert k in props, k
    assert doc["format"] == props["format"]["const"]
    assert doc["version"] == props["version"]["const"]
    tprops = props["tensors"]["items"]["properties"]
    kinds = set(tprops["kind"]["enum"])
    for t in doc["tensors"]:
        assert t["kind"] in kinds, t
        assert isinstance(t["name"], str) and t["name"]
        for k in t:
            assert k in tprops, k
    last = 0
    for m in doc["moments"]:
        assert m["time_us"] >= last
        last = m["time_us"]
        for row in m["storages"]:
            assert len(row) == 3 and 0 <= row[0] < len(doc["tensors"]) and row[1] > 0 and row[2] > 0


def test_bundled_lists_follow_the_schema():
    lists = sorted((ROOT / "tests" / "data" / "real").glob("*.tensors.json.gz"))
    assert len(lists) >= 5
    for p in lists:
        doc = json.load(gzip.open(p))
        check(doc)
        kinds = {t["kind"] for t in doc["tensors"]}
        assert "parameter" in kinds, p.name


def test_recorder_document_follows_the_schema(tmp_path, monkeypatch):
    # No model or optimizer (the stand-in torch has none): the document
    # still has every required field, and both files are written whole.
    monkeypatch.syspath_prepend(str(ROOT / "python"))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "python" / "standin"))
    snap = ROOT / "tests" / "data" / "real" / "small_bf16.pickle"
    monkeypatch.setenv("STANDIN_TORCH_SNAPSHOT", str(snap))
    for m in [m for m in sys.modules if m == "torch" or m.startswith("torch.") or m.startswith("snapdiff")]:
        monkeypatch.delitem(sys.modules, m)
    import snapdiff.torch as sdt
    path = tmp_path / "run.pickle"
    with sdt.record(path, discover=True) as rec:
        rec.note("mid")
    doc = json.loads((tmp_path / "run.pickle.tensors.json").read_text())
    check(doc)
    assert [m["what"] for m in doc["moments"]] == ["start", "mid", "dump"]
    assert path.read_bytes()[:1] == b"\x80"  # the snapshot's pickle
    assert not list(tmp_path.glob("*.partial"))
