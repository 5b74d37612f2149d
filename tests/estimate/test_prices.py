"""A price for every target: the catalog's on-demand prices, each with its source and date; a
target that names only a device priced as the smallest priced instance that holds its devices,
and saying so; a written ``price`` over any of them; a cost wherever an estimate appears."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accelctl import api
from accelctl.catalog import DEVICES, INSTANCES, holder

WORKLOAD = """\
workload w {
  task finetune { }
  model llama(layers = 2, hidden = 64, heads = 4)
  target one_h100 { device = h100 }
  target two_h100 { device = h100  devices = 2 }
  target h100x8 { device = h100  devices = 8 }
  target gaudi2x8 { device = gaudi2  devices = 8 }
  target p5 { instance = p5.48xlarge }
  target mine { device = h100  devices = 8  price = 20 usd/h }
  target owned { instance = dgx-a100 }
}
"""


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "w.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    (s,) = api.load(path)
    return s


def test_every_catalogued_price_has_its_source_and_every_rented_device_a_price():
    for inst in INSTANCES.values():
        if inst.price_per_hour is not None:
            assert inst.price_source and inst.price_per_hour > 0, inst.name
        assert inst.cloud or inst.price_per_hour is None, f"{inst.name}: a price needs who rents it"
    # every accelerator of the catalog can be priced by the hour, through some instance
    for name, dev in DEVICES.items():
        if not dev.host:
            assert holder(name, 1) is not None, f"no priced instance has a {name}"


def test_a_device_target_is_priced_as_the_smallest_instance_that_holds_it(spec):
    by = {t.name: t for t in spec.targets}
    assert by["one_h100"].price_from == "p5.4xlarge" and by["one_h100"].price_per_hour == INSTANCES[
        "p5.4xlarge"].price_per_hour
    # two H100s fit no one-GPU instance: the 8-GPU one is what is rented
    assert by["two_h100"].price_from == by["h100x8"].price_from == "p5.48xlarge"
    assert by["gaudi2x8"].price_from == "bm-spr-gaudi2" and by["gaudi2x8"].price_per_hour == pytest.approx(10.40)
    assert by["p5"].price_from == "p5.48xlarge"
    # a price in the workload wins over the catalog; an owned server has none
    assert (by["mine"].price_per_hour, by["mine"].price_from) == (20, "")
    assert by["owned"].price_per_hour is None


def test_the_estimate_says_where_each_price_comes_from(spec):
    by = {e.target: e for e in api.estimate_targets(spec, spec.targets)}
    assert "smallest priced instance with 8 h100" in by["h100x8"].price_source
    assert "p5.48xlarge at 55.04 usd/h per node" in by["h100x8"].price_source
    assert by["p5"].price_source.startswith("p5.48xlarge at 55.04 usd/h per node")
    assert "smallest" not in by["p5"].price_source
    assert by["mine"].price_source == "written in the workload"
    assert by["owned"].price_source == "" and by["owned"].throughput_per_dollar is None
    # "Gaudi2 or H100, per dollar?" has an answer
    assert by["gaudi2x8"].throughput_per_dollar and by["h100x8"].throughput_per_dollar


def test_the_text_estimate_prints_the_price_basis(tmp_path):
    path = tmp_path / "w.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "accelctl.cli", "estimate", str(path)],
                         capture_output=True, text=True, timeout=120).stdout
    assert "price of h100x8: as p5.48xlarge at 55.04 usd/h per node" in out, out
    assert "price of mine: written in the workload" in out, out


def test_aws_batch_refuses_an_instance_aws_does_not_rent(tmp_path):
    path = tmp_path / "b.wl"
    path.write_text("""\
workload b {
  task finetune { }
  model llama(layers = 2, hidden = 64, heads = 4)
  engine aws_batch { job_queue = "q"  image = "i" }
  target g { instance = bm-spr-gaudi2  engine = aws_batch  parallel = zero(stage = 1) }
}
""", encoding="utf-8")
    specs, diags = api.validate(path)
    refused = [d for d in diags if d.code.startswith("E")]
    assert refused and "AWS Batch runs AWS instances; bm-spr-gaudi2 is intel's" in refused[0].message, diags
    assert json.dumps(refused[0].to_dict())  # positioned and serialisable like any refusal
