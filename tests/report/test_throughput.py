"""The one throughput (``accelctl.analysis.throughput``): the median of the measured steps'
rates, named by task the same on every surface, with the same digits."""

from __future__ import annotations

from accelctl.analysis import throughput

RATES = {"samples_per_s": {"median": 8.0, "mean": 9.0, "aggregate": 8.5},
         "tokens_per_s": {"median": 1024.0, "mean": 1100.0, "aggregate": 1050.0}}


def test_the_statistic_is_the_median_and_the_unit_follows_the_task():
    assert throughput.headline({"throughput": RATES}, "pretrain") == (8.0, "sequences/s")
    assert throughput.headline({"throughput": {"samples_per_s": RATES["samples_per_s"]}}, "pretrain") == \
        (8.0, "samples/s")  # images: no tokens counted
    assert throughput.headline({"throughput": RATES}, "infer") == (8.0, "samples/s")
    gen = {"throughput": RATES, "generation": {"tokens_per_s_median": 512.0}}
    assert throughput.headline(gen, "generate") == (512.0, "tokens/s")
    assert throughput.headline({}, "pretrain") == (None, "samples/s")
    assert throughput.headline({"throughput": {"samples_per_s": {"median": True}}}, "infer")[0] is None


def test_the_same_digits_everywhere():
    assert [throughput.text(v, "samples/s") for v in (223.09039, 1923.4, 77.1089, 0.012345)] == \
        ["223.09 samples/s", "1,923.40 samples/s", "77.11 samples/s", "0.01235 samples/s"]
    assert throughput.text(None, "samples/s") == "-"
