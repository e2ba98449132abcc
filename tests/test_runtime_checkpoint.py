"""The files a streaming flow has planned, read from its checkpoint (runtime/checkpoint.py): a
compacted list plus the plans after it must say exactly what reading every plan says."""

from __future__ import annotations

import json

import pytest

from cdc_lakehouse.runtime.checkpoint import COMPACT_EVERY, SEEN, ConcurrentPlan, FlowCheckpoint

LANDING, OTHER = "files:/landing/a", "files:/landing/b"


def _plan(checkpoint: FlowCheckpoint, batch: int) -> None:
    """Files of LANDING with identities, the first one read again (grown) every fourth batch;
    files of OTHER without (as plans written before identities were kept)."""
    files = [f"/landing/a/{batch}.jsonl"] + (["/landing/a/0.jsonl"] if batch % 4 == 3 else [])
    identities = {f: [batch, batch, f"h{batch}"] for f in files}
    offsets = {LANDING: {"files": files, "identities": identities, "listing": {}}, "definition": "d"}
    if batch % 3 == 0:
        offsets[OTHER] = {"files": [f"/landing/b/{batch}-{i}.jsonl" for i in range(2)], "listing": {}}
    checkpoint.write_offsets(batch, offsets)


def _every_plan(checkpoint: FlowCheckpoint, before: int) -> dict[str, dict]:
    """Path -> identity when last planned, per source."""
    seen: dict[str, dict] = {}
    for batch in range(before):
        for source, offset in checkpoint.offsets(batch).items():
            if isinstance(offset, dict) and "files" in offset:
                known = offset.get("identities", {})
                seen.setdefault(source, {}).update({f: known.get(f) for f in offset["files"]})
    return seen


def test_the_compacted_list_says_what_every_plan_says(tmp_path):
    checkpoint = FlowCheckpoint(tmp_path, "bronze.readings")
    for batch in range(3 * COMPACT_EVERY + 2):
        assert checkpoint.files_seen(batch) == _every_plan(checkpoint, batch)
        _plan(checkpoint, batch)

    compacted = json.loads((checkpoint.dir / SEEN).read_text())
    assert compacted["through_batch"] >= 2 * COMPACT_EVERY
    assert checkpoint.files_seen(3 * COMPACT_EVERY + 2)[LANDING]["/landing/a/0.jsonl"][0] == 31  # the last read wins
    # Asked for a batch the compaction has passed, it reads every plan instead.
    assert checkpoint.files_seen(5) == _every_plan(checkpoint, 5)
    checkpoint.reset()
    assert checkpoint.files_seen(0) == {}


def test_a_batch_planned_by_a_racing_update_is_not_planned_again(tmp_path):
    """Two updates on one lake past its lock (issue 41 case 2) both open batch 0 of a flow:
    the first plan stands, the second update stops before it reads or writes anything."""
    first, second = FlowCheckpoint(tmp_path, "bronze.readings"), FlowCheckpoint(tmp_path, "bronze.readings")
    first.write_offsets(0, {"definition": "d", "plan": "first"}, new=True)
    with pytest.raises(ConcurrentPlan, match="another update planned batch 0 of flow bronze.readings"):
        second.write_offsets(0, {"definition": "d", "plan": "second"}, new=True)
    assert second.offsets(0)["plan"] == "first"
    second.write_offsets(0, {"definition": "d", "plan": "replayed"})  # a re-run of a planned batch rewrites it
    assert first.offsets(0)["plan"] == "replayed" and not list(first.offsets_dir.glob(".*"))
