"""The target options are one typed field each (accelctl.workload.options): the schema, the job
builder, the rehearsal and docs/language.md read its row."""

from __future__ import annotations


import pytest

from accelctl.api import load, plan
from accelctl.contract.job import DeviceJob
from accelctl.language import schema
from accelctl.workload.options import OPTIONS, TargetOptions
from accelctl.frozen import replace

GAUDI = """workload w {
  task finetune
  model bert(layers = 2, hidden = 64, heads = 4)
  dataset synthetic { seq_len = 16 }
  target g { device = gaudi2  hpu_graphs = on  threads = 3  dataloader_workers = 2 }
}
"""


def test_every_option_is_a_target_key_of_its_rows_kind():
    assert set(OPTIONS) <= set(schema.TARGET_KEYS) and schema.TARGET_OPTIONS == tuple(OPTIONS)
    for name, row in OPTIONS.items():
        assert schema.option_type(row) is not None and row.doc and row.unset, name


def test_an_option_that_lands_in_the_device_settings_names_a_device_field():
    device_fields = set(DeviceJob.__struct_fields__)
    named = {p.removeprefix("device.") for row in OPTIONS.values() for p in row.lands if p.startswith("device.")}
    assert named and named <= device_fields
    assert all(row.lands or row.read_by for row in OPTIONS.values())


def test_options_land_in_the_job_and_the_rehearsal_keeps_only_the_rows_that_say_so(tmp_path):
    path = tmp_path / "g.wl"
    path.write_text(GAUDI)
    (spec,) = load(path)
    t = spec.target("g")
    assert t.options == TargetOptions(hpu_graphs=True, threads=3, dataloader_workers=2)
    assert t.options.written() == {"hpu_graphs": True, "dataloader_workers": 2, "threads": 3}
    p = plan(spec, "g")
    assert p.job.device.hpu_graphs is True and p.job.device.dataloader_workers == 2
    rehearsed = plan(spec, "g", rehearse=True)
    assert "device options not rehearsed: dataloader_workers, hpu_graphs" in rehearsed.rehearsal.changes
    assert spec.to_dict()["targets"][0]["options"] == t.options.written()


def test_a_row_of_an_unknown_kind_is_refused_by_the_schema():
    bad = replace(OPTIONS["threads"], kind="colour")
    with pytest.raises(ValueError, match="unknown kind 'colour'"):
        schema.option_type(bad)
