"""Checkpoint files are read as data (``accelctl.worker.checkpoint.load_data``): what the loop
saves comes back whole, RNG states included, and a file that would construct anything else --
a pickle that runs a command -- is refused before anything of it runs."""

from __future__ import annotations

import os
import pickle
import random

import numpy as np
import pytest
import torch

from accelctl.worker.checkpoint import load_data, rng_states, set_rng_states


def test_what_the_loop_saves_comes_back_rng_states_included(tmp_path):
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    scaler = torch.amp.GradScaler("cpu", enabled=True)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
                "step": 3}, tmp_path / "state.pt")
    random.seed(5)
    np.random.seed(6)
    torch.manual_seed(7)
    saved = rng_states()
    expect = (random.random(), np.random.rand(), torch.rand(1).item())
    torch.save({"rng": saved, "batches_drawn": 12, "measurement": {"step": 3, "losses": [1.5, 1.25]}},
               tmp_path / "rank0.pt")
    state = load_data(tmp_path / "state.pt")
    assert state["step"] == 3 and torch.equal(state["model"]["weight"], model.state_dict()["weight"])
    optimizer.load_state_dict(state["optimizer"])
    mine = load_data(tmp_path / "rank0.pt")
    set_rng_states(mine["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expect
    assert mine["batches_drawn"] == 12 and mine["measurement"]["losses"] == [1.5, 1.25]


class _RunsACommand:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("where", ["rng", "measurement"])
def test_a_checkpoint_that_would_run_code_is_refused_and_nothing_runs(tmp_path, where):
    marker = tmp_path / "PWNED"
    mine = {"rng": rng_states(), "batches_drawn": 0, "measurement": {}}
    mine[where] = {"x": _RunsACommand(str(marker))}
    torch.save(mine, tmp_path / "rank0.pt")
    with pytest.raises(pickle.UnpicklingError):
        load_data(tmp_path / "rank0.pt")
    assert not marker.exists()
