"""A tracker setting the trackers refuse is the user's error: exit 2 with the setting named, before
any run starts or any table is printed -- never a traceback, never exit 70 "a bug in accelctl"
(issue 27: an empty ``WANDB_SILENT=`` made ``report --wandb`` exit 70; an MLflow ``file:`` store
is refused by MLflow 3)."""

from __future__ import annotations

import sys

import pytest
from tiny_workload import write_workload

from accelctl.cli import main

@pytest.fixture
def wl(tmp_path):
    return write_workload(tmp_path, "tiny_set", steps=2)


def _refused(capsys, argv: list[str], named: str) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, err)
    assert named in err and "Traceback" not in err and "bug in accelctl" not in err, err
    assert out == ""  # nothing printed before the refusal
    return err


def test_an_empty_wandb_variable_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_SILENT", "")
    _refused(capsys, ["report", "--runs-dir", str(tmp_path), "--wandb", "p", "--wandb-dir", str(tmp_path)],
             "WANDB_SILENT=")


def test_wandb_online_is_refused_offline_only(wl, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "online")
    _refused(capsys, ["run", str(wl), "--headless", "--runs-dir", str(tmp_path / "runs"), "--wandb"], "WANDB_MODE")
    assert not (tmp_path / "runs").exists()  # no run started


def test_an_mlflow_file_store_and_an_unknown_scheme_are_named(wl, tmp_path, monkeypatch, capsys):
    err = _refused(capsys, ["run", str(wl), "--headless", "--runs-dir", str(tmp_path / "runs"),
                            f"--mlflow=file://{tmp_path}/fs"], "--mlflow file://")
    assert "sqlite:///" in err  # what to give instead
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "foo://bar")
    _refused(capsys, ["report", "--runs-dir", str(tmp_path), "--mlflow"], "MLFLOW_TRACKING_URI=foo://bar")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flag, module", [("--wandb", "wandb"), ("--mlflow", "mlflow"),
                                          ("--tensorboard", "tensorboard")])
def test_a_tracker_this_python_lacks_is_named(flag, module, wl, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, module, None)  # importlib cannot find it: as if not installed
    err = _refused(capsys, ["run", str(wl), "--headless", "--runs-dir", str(tmp_path / "runs"), flag],
                   f"{flag}: needs {module}")
    assert "pip install" in err
