"""The stored matmul ceiling (``accelctl.contract.calibration``) and ``accelctl doctor --calibrate``,
which measures it for real (a short run of ``accelctl.worker.calibrate``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.contract import calibration
from accelctl.contract.calibration import Calibration
from accelctl.contract.envnames import CALIBRATION_FILE
from accelctl.hostinfo import cpu_has_native_bf16, cpu_model

ROOT = Path(__file__).resolve().parents[1]


def entry(threads: int, fp32: float, bf16: float | None = None, device: str = "Some CPU") -> Calibration:
    flops = {"float32": fp32} | ({"bfloat16": bf16} if bf16 else {})
    return Calibration(device=device, threads=threads, date="2026-11-23T14:00:00+00:00", flops=flops, method="m")


def test_entries_are_keyed_by_device_and_threads(tmp_path):
    file = tmp_path / "sub" / "calibration.json"
    calibration.store(entry(1, 90e9, 200e9), file)
    calibration.store(entry(2, 170e9), file)
    calibration.store(entry(1, 95e9, 210e9), file)  # replaces threads=1
    assert set(calibration.load_all(file)) == {"Some CPU | threads=1", "Some CPU | threads=2"}
    one = calibration.lookup("Some CPU", 1, file)
    assert one.flops == {"float32": 95e9, "bfloat16": 210e9} and one.date.startswith("2026-11-23")
    assert calibration.lookup("Some CPU", 4, file) is None
    assert calibration.lookup("Other CPU", 1, file) is None
    assert json.loads(file.read_text())["schema"] == calibration.SCHEMA
    assert not [p for p in file.parent.iterdir() if p.name.startswith(".calibration-")]  # no temp left


def test_ceiling_per_dtype_falls_back_to_fp32():
    assert entry(1, 90e9, 200e9).ceiling("bfloat16") == (200e9, "bfloat16")
    assert entry(1, 90e9).ceiling("bfloat16") == (90e9, "float32")  # emulated bf16: against fp32
    assert entry(1, 90e9, 200e9).ceiling("float32") == (90e9, "float32")


def test_missing_or_broken_file_reads_as_not_calibrated(tmp_path):
    assert calibration.load_all(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    for text in ("{not json", "[1, 2]", '{"entries": {"k": {"device": "x"}}}'):
        bad.write_text(text)
        assert calibration.load_all(bad) == {}
        assert calibration.lookup("x", 1, bad) is None


def test_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CALIBRATION_FILE, str(tmp_path / "c.json"))
    assert calibration.path() == tmp_path / "c.json"
    monkeypatch.delenv(CALIBRATION_FILE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert calibration.path() == tmp_path / "cache" / "accelctl" / "calibration.json"


@pytest.mark.slow
def test_doctor_calibrate_measures_and_stores(tmp_path):
    file = tmp_path / "calibration.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), CALIBRATION_FILE: str(file)}
    cmd = [sys.executable, "-m", "accelctl.cli", "doctor", "--calibrate", "--threads", "1", "--seconds", "0.2"]
    cp = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    stored = calibration.lookup(cpu_model(), 1, file)
    assert stored is not None and stored.threads == 1 and stored.torch
    assert stored.flops["float32"] > 1e8 and stored.samples["float32"] >= 3
    assert ("bfloat16" in stored.flops) == cpu_has_native_bf16()  # bf16 only where the CPU has it natively
    assert "threads=1: float32" in cp.stdout and str(file) in cp.stdout and stored.date in cp.stdout


def test_doctor_calibrate_refuses_bad_arguments(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), CALIBRATION_FILE: str(tmp_path / "c.json")}
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "doctor", "--calibrate", "--threads", "0"], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2 and "must be positive" in cp.stderr and "Traceback" not in cp.stderr
    assert not (tmp_path / "c.json").exists()
    for seconds in ("nan", "inf", "0", "-1", "61"):
        cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "doctor", "--calibrate", "--seconds", seconds],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert cp.returncode == 2 and "--seconds in (0, 60]" in cp.stderr and "measuring" not in cp.stdout, seconds


@pytest.mark.parametrize("how", ["folder writable by others", "file writable by others", "file is a FIFO"])
def test_a_calibration_others_could_have_written_is_not_used(tmp_path, how):
    """The stored ceiling changes what estimate and MFU say: from a folder or a file others can
    write it is not read (one warning), and the estimate goes by the datasheet instead."""
    from accelctl import private_files

    file = tmp_path / "cal" / "calibration.json"
    calibration.store(entry(1, 90e9, 200e9), file)
    assert calibration.lookup("Some CPU", 1, file) is not None
    if how == "folder writable by others":
        os.chmod(file.parent, 0o777)
    elif how == "file writable by others":
        os.chmod(file, 0o666)
    else:
        file.unlink()
        os.mkfifo(file)
    private_files.take_warnings()
    private_files._warned.clear()
    assert calibration.lookup("Some CPU", 1, file) is None  # and no wait on the FIFO
    warned = private_files.take_warnings()
    assert len(warned) == 1 and warned[0].code == "W010" and warned[0].severity == "warning"
    if how == "folder writable by others":
        with pytest.raises(private_files.Untrusted):
            calibration.store(entry(2, 90e9), file)


def test_doctor_calibrate_refuses_a_folder_others_can_write_before_measuring(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    env = {**os.environ, "PYTHONPATH": str(ROOT), CALIBRATION_FILE: str(folder / "c.json")}
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "doctor", "--calibrate", "--threads", "1",
                         "--seconds", "0.1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "cannot store a calibration" in cp.stderr and "writable by its group and others" in cp.stderr
    assert "Traceback" not in cp.stderr and not (folder / "c.json").exists()


GOOD_ENTRY = {"device": "Some CPU", "threads": 1, "date": "2026-11-23", "flops": {"float32": 9e10}}


@pytest.mark.parametrize("bad", [
    {"flops": {"float32": "abc", "bfloat16": "x"}}, {"flops": {"float32": [1], "bfloat16": {}}},
    {"flops": {"float32": float("nan")}}, {"flops": {"float32": -1.0}}, {"flops": {"float32": float("inf")}},
    {"flops": []}, {"threads": True}, {"threads": 0}, {"threads": "1"}, {"device": 5}, {"samples": {"float32": 1.5}},
    {"method": None}, {"unknown": 1}, "an entry under another key", "the top level a list"])
def test_a_stored_file_with_values_this_code_never_writes_reads_as_not_calibrated(tmp_path, bad):
    """A private file of the right shape but wrong values (types, ranges, keys) is foreign:
    no calibration, never a crash of plan or estimate and never a NaN or negative ceiling."""
    file = tmp_path / "calibration.json"
    entries = {"Some CPU | threads=1": {**GOOD_ENTRY, **bad} if isinstance(bad, dict) else GOOD_ENTRY}
    doc = {"schema": calibration.SCHEMA, "entries": entries}
    if bad == "an entry under another key":
        doc["entries"] = {"Other CPU | threads=1": GOOD_ENTRY}
    elif bad == "the top level a list":
        doc = [1, 2]
    file.write_text(json.dumps(doc))
    os.chmod(file, 0o600)
    assert calibration.load_all(file) == {}
    file.write_text(json.dumps({"schema": calibration.SCHEMA, "entries": {"Some CPU | threads=1": GOOD_ENTRY}}))
    assert calibration.lookup("Some CPU", 1, file) is not None  # the same file, its values as written: read


def test_plan_and_estimate_go_on_past_a_stored_file_with_bad_values(tmp_path):
    file = tmp_path / "calibration.json"
    bad = {**GOOD_ENTRY, "device": cpu_model(), "flops": {"float32": "abc", "bfloat16": "x"}}
    file.write_text(json.dumps({"schema": calibration.SCHEMA, "entries": {calibration.key(cpu_model(), 1): bad}}))
    os.chmod(file, 0o600)
    wl = tmp_path / "w.wl"
    wl.write_text("workload w {\n  task pretrain { train_steps = 3 }\n  model gpt2(layers = 1, hidden = 32, heads = 2)\n"
                  "  precision bf16\n  target cpu { devices = 1  threads = 1 }\n}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), CALIBRATION_FILE: str(file)}
    for verb in ("plan", "estimate"):
        cp = subprocess.run([sys.executable, "-m", "accelctl.cli", verb, str(wl)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0 and "Traceback" not in cp.stderr, (verb, cp.stderr[-2000:])


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_doctor_calibrate_never_replaces_what_is_not_a_regular_file_of_yours(tmp_path, kind):
    """``ACCELCTL_CALIBRATION_FILE`` naming a FIFO or a link (a device alike: ``/dev/full``) is
    refused before measuring, naming the path, and what is there stays as it was."""
    folder = tmp_path / "cal"
    folder.mkdir(mode=0o700)
    file, aside = folder / "c.json", tmp_path / "aside.txt"
    aside.write_text("keep me\n")
    if kind == "fifo":
        os.mkfifo(file)
    else:
        file.symlink_to(aside)
    assert calibration.store_problem(file) == f"{file} is not a regular file"
    with pytest.raises(OSError):
        calibration.store(entry(1, 9e10), file)
    env = {**os.environ, "PYTHONPATH": str(ROOT), CALIBRATION_FILE: str(file)}
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "doctor", "--calibrate", "--threads", "1",
                         "--seconds", "0.1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1 and f"{file} is not a regular file" in cp.stderr, cp.stdout + cp.stderr
    assert "measuring" not in cp.stdout and "Traceback" not in cp.stderr
    assert (file.is_fifo() if kind == "fifo" else file.is_symlink()) and aside.read_text() == "keep me\n"
