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


def test_rows_are_estimated_as_the_seed_measured_them():
    """Seed 000's sources: SD latencies are per image (A100 one image per call), and the BERT
    run is BERT-base with a 32,000-token vocabulary at 512 tokens."""
    import dataclasses

    from accelctl.estimate.roofline import estimate
    from accelctl.report.estimated import MEASURED, _as_measured, estimate_row

    (sd,) = _specs("stable_diffusion.wl").values()
    for row, batch in (("gaudi2", 8), ("a100", 1)):
        target = sd.target(row)
        target = dataclasses.replace(target, batch=dataclasses.replace(target.batch, micro=batch, global_size=None))
        per_call = estimate(sd, target).latency_s
        got = estimate_row("000-sd", row, {"batch": 8, "devices": 1}, "latency_s", 1.0)
        assert got.value == pytest.approx(per_call / batch)
    bert = _as_measured(_specs("bert_large_pretrain.wl")["bert_large_phase1_bs32"], MEASURED["000-bert"]["gaudi1_bs32"])
    assert bert.dataset.seq_len == 512
    assert (bert.model.real_shape["layers"], bert.model.real_shape["hidden"], bert.model.real_shape["vocab"]) == (
        12, 768, 32000)
