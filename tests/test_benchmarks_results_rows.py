"""benchmarks/results_rows.py: a results file filled by several calls keeps every shape, a shape measured again
replaces its row, torch anchors merge by shape, and the machine record comes from a measurement made alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import results_rows  # noqa: E402


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=12))
def test_put_row_keeps_one_row_per_shape_the_latest(shapes):
    meta = {"world": 2, "rows": [], "errors": []}
    for i, s in enumerate(shapes):
        results_rows.put_row(meta, {"shape": s, "i": i})
    assert sorted(r["shape"] for r in meta["rows"]) == sorted(set(shapes))
    for r in meta["rows"]:
        assert r["i"] == max(i for i, s in enumerate(shapes) if s == r["shape"])


def test_open_meta_keeps_rows_of_the_same_world_only(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"world": 2, "rows": [{"shape": "a"}]}))
    assert results_rows.open_meta(p, 2)["rows"] == [{"shape": "a"}]
    assert results_rows.open_meta(p, 4)["rows"] == []
    assert results_rows.open_meta(tmp_path / "none.json", 2) == {"world": 2, "rows": [], "errors": []}


def test_rows_measured_before_the_lease_are_dropped(tmp_path, monkeypatch):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"world": 2, "rows": [{"shape": "a", "date": "2026-11-26T10:53:53Z", "device": "H200"},
                                                  {"shape": "b", "date": "2026-11-26T14:00:01Z"}]}))
    monkeypatch.setenv("CUCO_RESULTS_SINCE", "2026-11-26T13:40:00")
    meta = results_rows.open_meta(p, 2)
    assert [r["shape"] for r in meta["rows"]] == ["b"] and meta["dropped_rows"][0]["device"] == "H200"


def test_a_new_row_clears_that_shapes_old_error():
    meta = {"world": 2, "rows": [], "errors": []}
    results_rows.put_error(meta, "a", "boom")
    results_rows.put_error(meta, "b", "boom")
    results_rows.put_row(meta, {"shape": "a"})
    assert [e["shape"] for e in meta["errors"]] == ["b"]


def test_torch_rows_merge_by_shape_with_device_and_the_comparison(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"device": "GPU", "torch": "2.11", "nccl": "2.28.9", "rows": [
        {"shape": "a", "world": 2, "torch_layer_ms": 2.0, "torch_layer_count_ms": 0.1},
        {"shape": "b", "world": 2, "error": "ShapeError: no"}]}))
    anchors = results_rows.torch_rows(str(p))
    row = {"shape": "a", "best_ms": 1.5}
    results_rows.merge_torch(row, anchors["a"], "torch_layer_ms")
    assert row["torch_layer_ms"] == 2.0 and row["torch_device"] == "GPU" and row["faster_than_torch"] is True
    assert "world" not in row or row["world"] is None
    other = {"shape": "b", "best_ms": 1.0}
    results_rows.merge_torch(other, anchors["b"], "torch_layer_ms")
    assert other["torch_error"] == "ShapeError: no" and "faster_than_torch" not in other
    with pytest.raises(FileNotFoundError, match="run the anchor first"):
        results_rows.torch_rows(str(tmp_path / "missing.json"))
    assert results_rows.torch_rows(None) == {}


def test_machine_comes_from_the_measurement_made_alone_when_named(tmp_path, monkeypatch):
    p = tmp_path / "machine.json"
    p.write_text(json.dumps({"topology": "NV18", "p2p": {"gpus": 4, "one_peer_median_gbps": 350.0}}))
    measured = []
    monkeypatch.setenv("CUCO_P2P_JSON", str(p))
    m = results_rows.machine_or_measured(2, lambda w: measured.append(w) or {})
    assert m["p2p"]["one_peer_median_gbps"] == 350.0 and m["measured_alone"] and not measured
    p.write_text(json.dumps({"topology": "NV18", "p2p": {"gpus": 2}}))
    results_rows.machine_or_measured(4, lambda w: measured.append(w) or {})  # too few GPUs: measured now
    assert measured == [4]


def test_pending_names_the_shapes_a_file_still_needs_in_the_given_order(tmp_path):
    p = tmp_path / "x_w2.json"
    rows = [{"shape": "done", "verified": True, "fastpath_status": "passed", "torch_ms": 1.0},
            {"shape": "unverified", "verified": False, "torch_ms": 1.0},
            {"shape": "fastpath_failed", "verified": True, "fastpath_status": "failed:verify", "torch_ms": 1.0},
            {"shape": "no_anchor", "verified": True},
            {"shape": "stale", "verified": True, "torch_ms": 1.0, "superseded": "ran at an older shape"}]
    p.write_text(json.dumps({"world": 2, "rows": rows}))
    names = ["missing", "done", "unverified", "fastpath_failed", "no_anchor", "stale"]
    assert results_rows.pending(p, 2, names, "torch_ms") == ["missing", "unverified", "fastpath_failed",
                                                              "no_anchor", "stale"]
    assert "no_anchor" not in results_rows.pending(p, 2, names)
    assert results_rows.pending(p, 4, names) == names  # rows of another world size count for nothing
    assert results_rows.pending(tmp_path / "absent.json", 2, ["a"]) == ["a"]


def test_pending_from_the_command_line_keeps_the_separator(tmp_path):
    import subprocess

    p = tmp_path / "g_w2.json"
    p.write_text(json.dumps({"world": 2, "rows": [{"shape": "1,2,3", "verified": True}]}))
    out = subprocess.run([sys.executable, str(Path(results_rows.__file__)), "pending", str(p), "2", "1,2,3;4,5,6"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "4,5,6"


def test_merge_keeps_the_steadier_row_and_lists_the_other():
    meta = {"world": 2, "rows": [{"shape": "a", "date": "1", "best_ms": 1.0, "spread": 0.05},
                                 {"shape": "b", "date": "1", "best_ms": 2.0, "spread": 0.01}], "errors": []}
    other = {"world": 2, "rows": [{"shape": "a", "date": "2", "best_ms": 1.5, "spread": 0.02},
                                  {"shape": "b", "date": "2", "best_ms": 1.0, "spread": 0.40},
                                  {"shape": "c", "date": "2", "best_ms": 3.0, "spread": None}]}
    assert results_rows.merge_rows(meta, other) == ["a", "c"]
    rows = {r["shape"]: r for r in meta["rows"]}
    assert rows["a"]["best_ms"] == 1.5 and rows["a"]["other_measurements"][0]["best_ms"] == 1.0
    assert rows["b"]["best_ms"] == 2.0 and rows["b"]["other_measurements"][0]["spread"] == 0.40  # not the faster
    assert rows["c"]["best_ms"] == 3.0
    before = json.dumps(meta, sort_keys=True)
    assert results_rows.merge_rows(meta, other) == []  # merging the same file again changes nothing
    assert json.dumps(meta, sort_keys=True) == before


def test_merge_refuses_another_world():
    with pytest.raises(ValueError, match="world 4"):
        results_rows.merge_rows({"world": 2, "rows": []}, {"world": 4, "rows": []})


def test_fold_from_the_command_line_lets_the_newer_anchor_row_replace_its_shape(tmp_path):
    import subprocess

    base, new = tmp_path / "torch_w2.json", tmp_path / "torch_w2.call.json"
    base.write_text(json.dumps({"world": 2, "rows": [{"shape": "a", "ms": 1.0}, {"shape": "b", "ms": 2.0}]}))
    new.write_text(json.dumps({"world": 2, "device": "H100", "rows": [{"shape": "b", "ms": 3.0}]}))
    subprocess.run([sys.executable, str(Path(results_rows.__file__)), "fold", str(base), str(new)], check=True,
                   capture_output=True, text=True)
    meta = json.loads(base.read_text())
    assert {r["shape"]: r["ms"] for r in meta["rows"]} == {"a": 1.0, "b": 3.0} and meta["device"] == "H100"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_short_prompt_rows_live_apart_and_count_for_pending_and_merge(tmp_path):
    import kv_transfer

    assert kv_transfer.table_of("s256-kv1024") == "small_rows" and kv_transfer.table_of("s2048-kv512") == "rows"
    p = tmp_path / "kv_transfer_w2.json"
    small = {"shape": "s256-kv1024", "verified": True, "date": "1", "spread": 0.02}
    p.write_text(json.dumps({"world": 2, "rows": [], "small_rows": [small]}))
    assert results_rows.pending(p, 2, ["s256-kv1024", "s2048-kv512"]) == ["s2048-kv512"]
    meta = {"world": 2, "rows": [], "errors": []}
    assert results_rows.merge_rows(meta, {"world": 2, "small_rows": [small]}) == ["s256-kv1024"]
    assert meta["small_rows"] == [small] and meta["rows"] == []  # merged into its own list, not the goal's rows


def test_kv_exposure_says_hidden_exposed_or_below_resolution():
    """best - compute against comm over the repeats' own pairs: a difference too noisy to resolve against a tenth of
    the transfer is not called hidden, whatever its mean."""
    import kv_transfer

    def row(diffs, comm=1.0):
        return {"comm_ms": comm, "per_repeat": [{"best_ms": 50.0 + d, "compute_ms": 50.0} for d in diffs]}

    assert kv_transfer.exposure(row([0.10, 0.12, 0.11, 0.09, 0.10]))["exposure"] == "hidden"
    assert kv_transfer.exposure(row([0.50, 0.52, 0.51, 0.49, 0.50]))["exposure"] == "exposed"
    noisy = kv_transfer.exposure(row([-0.5, 0.6, 0.1, -0.3, 0.2]))
    assert noisy["exposure"] == "below resolution" and noisy["exposed_ci95_ms"] > 0.1
    assert kv_transfer.exposure({"comm_ms": 1.0, "best_ms": 50.0, "compute_ms": 49.0}) == {}  # no repeats kept
    assert kv_transfer.exposure(row([0.1, 0.1], comm=None)) == {}


def test_kv_transfer_path_is_timed_with_at_least_ten_thousand_pages_per_rank():
    """copy_gbps of a goal row: layers added where the shape has fewer pages (S = 2048: 8192 at 32 layers, 10240
    at 40); a short prompt's row keeps its own shape (its goal is a time, not a rate)."""
    import kv_transfer

    from cuco.workloads.kv_transfer import shapes as kv_shapes

    assert kv_transfer.copy_shape("s2048-kv512") == "2048,512,40"
    assert kv_shapes.pages_per_rank(kv_shapes.parse("2048,512,40")) == 10240 >= kv_transfer.COPY_PAGES
    assert kv_transfer.copy_shape("s3072-kv768") == "s3072-kv768"   # 12288 pages at its own 32 layers
    assert kv_transfer.copy_shape("s256-kv1024") == "s256-kv1024"


@settings(deadline=None)
@given(st.sampled_from([256, 2048, 3072, 4096, 32768]), st.integers(1, 256), st.integers(1, 20000))
def test_added_layers_reach_the_pages_asked_for_or_the_most_layers(s, layers, pages):
    from cuco.workload import Shape
    from cuco.workloads.kv_transfer import shapes as kv_shapes

    got = kv_shapes.with_pages(Shape((s, 512, layers)), pages)
    assert got.dims[:2] == (s, 512) and got.dims[2] >= layers
    assert kv_shapes.pages_per_rank(got) >= pages or got.dims[2] == kv_shapes.MAX_LAYERS
    assert got.dims[2] == layers or kv_shapes.pages_per_rank(Shape((s, 512, got.dims[2] - 1))) < pages   # no more


def test_two_lanes_saving_one_file_keep_each_others_rows(tmp_path):
    """Two lanes of one device call read the file at their start and save after each shape: the second to save
    keeps the first's row (on 2026-11-27 a W = 2 KV lane's short-prompt row was overwritten this way)."""
    p = tmp_path / "kv_transfer_w2.json"
    p.write_text(json.dumps({"world": 2, "rows": [{"shape": "old", "date": "2026-11-26T10:00:00Z"}], "errors": []}))
    lane_a, lane_b = results_rows.open_meta(p, 2), results_rows.open_meta(p, 2)
    lane_a["small_rows"] = [{"shape": "s256", "date": "2026-11-27T04:20:00Z"}]
    results_rows.save_meta(p, lane_a)
    results_rows.put_row(lane_b, {"shape": "s2048", "date": "2026-11-27T04:24:00Z"})
    written = results_rows.save_meta(p, lane_b)
    on_disk = json.loads(p.read_text())
    assert on_disk == written
    assert [r["shape"] for r in on_disk["small_rows"]] == ["s256"]
    assert sorted(r["shape"] for r in on_disk["rows"]) == ["old", "s2048"]


@settings(deadline=None)   # up to ten locked file writes per example: slower than 200 ms on a loaded 2-core machine
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 59), st.booleans()), max_size=10))
def test_saves_keep_the_latest_row_of_every_shape_whoever_saved_it(tmp_path_factory, saves):
    p = tmp_path_factory.mktemp("rows") / "x.json"
    stale = results_rows.open_meta(p, 2)  # both writers read the file before any save
    writers = [dict(stale, rows=[]), dict(stale, rows=[])]
    latest: dict[str, int] = {}
    for shape, minute, second_writer in saves:
        meta = writers[second_writer]
        results_rows.put_row(meta, {"shape": shape, "date": f"2026-11-27T04:{minute:02d}:00Z", "m": minute})
        results_rows.save_meta(p, meta)
        latest[shape] = max(latest.get(shape, -1), minute)
    rows = json.loads(p.read_text())["rows"] if saves else []
    assert {r["shape"]: r["m"] for r in rows} == latest


def test_the_title_names_the_newest_rows_machine():
    """Rows of other shapes kept from an earlier device call may come from another machine: the file's title names
    the device of the most recently measured row, not of the first one."""
    rows = [{"shape": "a", "device": "H100", "date": "2026-11-27T07:00:00+00:00"},
            {"shape": "b", "device": "H200", "date": "2026-11-28T12:50:00+00:00"},
            {"shape": "c", "date": "2026-11-29T00:00:00+00:00"},  # names no device
            {"shape": "d", "device": "H100", "date": None}]
    assert results_rows.newest_row(rows)["shape"] == "b"
    assert results_rows.newest_row([{"shape": "c"}]) == {}
