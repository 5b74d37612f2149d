"""The "estimated" column of ``accelctl report --reference``: every mapped seed row gets an
estimate and its error, and no estimate depends on the seed figure it is compared with."""

from __future__ import annotations

import copy

import pytest

from accelctl.report import reference
from accelctl.report.estimated import ROWS, WORKLOADS, _specs


def _estimated_rows(tables):
    out = {}
    for t in tables:
        for r in t.rows:
            if "estimated" in r:
                out[(t.id, r.get("target") or r.get("label"))] = r
    return out


def test_every_mapped_row_names_a_real_workload_target():
    for table, rows in ROWS.items():
        for row, (file, workload, target) in rows.items():
            assert (WORKLOADS / file).is_file(), (table, row)
            assert target in {t.name for t in _specs(file)[workload].targets}, (table, row)


def test_every_seed_row_with_a_workload_has_an_estimate_and_its_error():
    rows = _estimated_rows(reference.reference_tables())
    mapped = sum(len(r) for r in ROWS.values())
    assert len(rows) >= mapped
    with_value = [r for r in rows.values() if r["estimated"] is not None]
    assert len(with_value) == mapped  # every mapped row is estimated (no device without a datasheet)
    for r in with_value:
        published = r.get("latency_s") or (r["step_time"][0] if r.get("step_time") else r.get("throughput"))
        assert r["estimate_error"] == pytest.approx((r["estimated"] - published) / published)
        assert r["estimate_bound"] in ("compute", "memory bandwidth", "communication", "host overhead")


def test_estimates_do_not_move_when_the_published_figures_do(monkeypatch):
    """Leave-one-out by construction: no factor is fitted to a seed, so changing every
    published figure changes the errors, never the estimates."""
    before = {k: r["estimated"] for k, r in _estimated_rows(reference.reference_tables()).items()}
    ref = copy.deepcopy(reference.load_reference())
    for t in ref["tables"]:
        for row in t["rows"]:
            for key in ("throughput", "latency_s", "step_time_s", "job_time_s"):
                if key in row:
                    row[key] *= 3
    monkeypatch.setattr(reference, "load_reference", lambda: ref)
    after_rows = _estimated_rows(reference.reference_tables())
    assert {k: r["estimated"] for k, r in after_rows.items()} == before
    assert any(r["estimate_error"] is not None for r in after_rows.values())


def test_every_estimated_row_says_why_it_misses():
    """The remaining error is explained per row: what the published figure implies (fraction
    of the peak, or time per token against the weights' read) and what the model lacks."""
    rows = [r for r in _estimated_rows(reference.reference_tables()).values() if r["estimated"] is not None]
    for r in rows:
        why = r["estimate_why"]
        assert ("of the peak" in why or "ms per token" in why or "FP8" in why) and len(why) > 60, r
    decode = [r["estimate_why"] for r in rows if "ms per token" in r["estimate_why"]]
    assert len(decode) == 9 and all("host" in w and "collectives" in w for w in decode)


def test_rows_are_estimated_from_exactly_the_shipped_workload():
    """No patched copies (issue 29): each row's estimate is ``accelctl estimate`` of the shipped
    target the report names, unchanged; seed 000's SD rows divide a call by its images (the
    published unit is seconds per image, the A100 target runs one image per call)."""
    from accelctl.estimate.roofline import estimate
    from accelctl.report.estimated import PER_IMAGE

    tables = {t.id.removeprefix("reference-"): t for t in reference.reference_tables()}
    checked = 0
    for table_id, rows in ROWS.items():
        raw = {r["id"]: r for r in reference.load_reference()["tables"][
            [t["id"] for t in reference.load_reference()["tables"]].index(table_id)]["rows"]}
        for row_id, (file, workload, target) in rows.items():
            spec = _specs(file)[workload]
            e = estimate(spec, spec.target(target))
            shown = [r for r in tables[table_id].rows
                     if r.get("reproduced_by") == f"workloads/{file}: {workload} -> {target}"
                     and raw[row_id]["label"] in (r.get("label"), r.get("target"))]
            assert len(shown) == 1, (table_id, row_id)
            metric = {"throughput": e.throughput, "latency_s": e.latency_s, "step_time_s": e.step_time_s}
            value = shown[0]["estimated"]
            if row_id in PER_IMAGE.get(table_id, ()):
                assert value == pytest.approx(e.latency_s / spec.target(target).batch.micro)
            else:
                assert value in {v for v in metric.values() if v is not None}, (table_id, row_id)
            checked += 1
    assert checked == sum(len(r) for r in ROWS.values())


def test_a_rows_batch_is_its_targets_batch():
    """The target that reproduces a training row runs the row's global batch (no override)."""
    for t in reference.load_reference()["tables"]:
        for row in t["rows"]:
            where = ROWS.get(t["id"], {}).get(row["id"])
            if where is None or "batch" not in row or t["id"] in ("003-bloomz", "000-sd"):
                continue
            target = _specs(where[0])[where[1]].target(where[2])
            assert row["batch"] == target.batch.micro * target.batch.accumulation * target.data_parallel, row["id"]


def test_the_a100_sd_row_is_one_image_per_call_in_the_workload():
    (sd,) = _specs("stable_diffusion.wl").values()
    assert sd.target("a100").batch.micro == 1 and sd.target("gaudi2").batch.micro == 8


def test_rows_whose_error_moved_say_why():
    rows = _estimated_rows(reference.reference_tables())
    moved = [r for r in rows.values() if "since the workload runs the experiment as published" in (r.get("estimate_why") or "")]
    assert len(moved) == 3 and all("no estimate ->" in r["estimate_why"] for r in moved)
