"""The device mesh of a parallel layout, as plain data: which rank holds which shard.

One layout for every strategy: ``pp × dp × tp`` ranks, tensor parallel innermost (the ranks
of one TP group are neighbours: on one node they share the fastest links), then data
parallel, pipeline outermost -- the order torchtitan's ``ParallelDims`` builds its mesh in.
``rank = (pp_i · dp + dp_i) · tp + tp_i``.  The planner prints it (``accelctl plan``), the
worker builds its ``DeviceMesh`` from it; both read the same arithmetic here.
"""

from __future__ import annotations

from accelctl.frozen import Value


#: mesh dimensions, outermost first
DIMS = ("pp", "dp", "tp")


class Mesh(Value):
    pp: int = 1
    dp: int = 1
    tp: int = 1

    @classmethod
    def of(cls, world: int, tp: int = 1, pp: int = 1) -> "Mesh":
        """The mesh of ``world`` ranks with the given tensor and pipeline sizes (the rest is dp)."""
        if tp < 1 or pp < 1 or world % (tp * pp):
            raise ValueError(f"{world} ranks are not a multiple of tp × pp = {tp} × {pp}")
        return cls(pp=pp, dp=world // (tp * pp), tp=tp)

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.tp

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.pp, self.dp, self.tp

    def coords(self, rank: int) -> dict[str, int]:
        """``{"pp": i, "dp": j, "tp": k}`` of ``rank``."""
        return {"pp": rank // (self.dp * self.tp), "dp": rank // self.tp % self.dp, "tp": rank % self.tp}

    def rank(self, pp: int = 0, dp: int = 0, tp: int = 0) -> int:
        return (pp * self.dp + dp) * self.tp + tp

    def describe(self) -> str:
        """``mesh pp 1 × dp 2 × tp 2 = 4 ranks``, the sizes of every dimension."""
        return "mesh " + " × ".join(f"{d} {n}" for d, n in zip(DIMS, self.shape)) + f" = {self.world} ranks"


def stage_layers(layers: int, pp: int, stage: int) -> range:
    """The transformer layers pipeline ``stage`` of ``pp`` runs: contiguous, the first
    ``layers % pp`` stages one more (the embeddings ride with stage 0, the head with the last)."""
    base, extra = divmod(layers, pp)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (1 if stage < extra else 0))
