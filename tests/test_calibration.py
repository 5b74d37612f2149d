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
