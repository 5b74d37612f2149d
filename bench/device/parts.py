"""What the device check runs: one ``accelctl run`` per part, and the seed figure beside it.

Seed figures are quoted from the seeds' summary (shared/context/SEEDS.md), never measured here:
  002: ViT-Huge, bf16, DDP over 8 x H100 (p5.48xlarge), 0.199 s per step; Transformer
       Engine's FP8 a further +20 % on H100 (over TE blocks in bf16).
  003: BLOOMZ-7B, 1 device, greedy 100 new tokens, batch 1: A100 80GB 2.119 s per generation.
BERT-Large on one GPU has no seed figure (seed 001 measured it on Gaudi1 with ZeRO-1); its two
parts are compared with each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "workloads" / "device"
#: the target run on a GPU whose name holds the key (every device workload has both)
TARGETS = {"H200": "h200", "H100": "h100"}
TARGET = "h100"


def target_for(device_name: str) -> str:
    """The device workloads' target for the GPU named ``device_name`` (nvidia-smi's name); h100
    when it is neither (a CPU smoke, a dry run)."""
    return next((t for key, t in TARGETS.items() if key in device_name.upper()), TARGET)


@dataclass(frozen=True)
class Seed:
    """A published figure to set beside a measured one."""

    value: float
    unit: str
    #: what it measured, where (the seed's words, shortened)
    what: str
    #: how the figure compares: "time" (seconds, lower is better) or "speedup" (x over ``against``)
    kind: str = "time"


@dataclass(frozen=True)
class Part:
    name: str
    file: str
    #: seconds this part may run (the wall budget may cut it shorter)
    timeout_s: float
    #: "step" (training step time) or "latency" (one generate call)
    measure: str
    seed: Seed | None = None
    #: the part whose measured step this one is compared against (speed-up = its / ours)
    against: str = ""
    what: str = ""

    @property
    def path(self) -> Path:
        return WORKLOADS / self.file


#: in running order: the cheap parts first, so a budget cut falls on the compiled ones
PARTS: tuple[Part, ...] = (
    Part("vit_bf16", "vit_h14_bf16.wl", 75, "step",
         Seed(0.199, "s/step", "seed 002: ViT-Huge bf16, DDP 8 x H100 (p5.48xlarge)"),
         what="ViT-H/14 bf16 step, micro-batch 64, eager"),
    Part("bloomz_7b1", "bloomz_7b1.wl", 100, "latency",
         Seed(2.119, "s", "seed 003: BLOOMZ-7B, 1 x A100 80GB, greedy 100 tokens"),
         what="BLOOMZ-7B1 fp16 greedy 100 new tokens, batch 1"),
    Part("bert_ddp", "bert_large_ddp.wl", 70, "step",
         what="BERT-Large MLM step, micro-batch 32, bf16, DDP (nccl) world size 1"),
    Part("bert_zero2", "bert_large_zero2.wl", 100, "step", against="bert_ddp",
         what="BERT-Large MLM step, micro-batch 32, bf16, DeepSpeed ZeRO-2 world size 1"),
    Part("vit_compiled", "vit_h14_compiled.wl", 200, "step", against="vit_bf16",
         what="ViT-H/14 bf16 step, torch.compile"),
    Part("vit_fp8", "vit_h14_fp8.wl", 260, "step", against="vit_compiled",
         seed=Seed(1.20, "x", "seed 002: TE FP8 over TE bf16 on H100 (+20 %)", kind="speedup"),
         what="ViT-H/14 FP8 (torchao float8), torch.compile"),
)

BY_NAME = {p.name: p for p in PARTS}
