"""Habana Gaudi through SynapseAI's PyTorch bridge: HCCL between ranks, found by
``/dev/accel/accel*`` or ``hl-smi``."""

from __future__ import annotations

from accelctl.families.hardware import GB, TFLOPS, Datasheet, Device, Figure, Instance, sheet
from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

# not deepspeed_inference: DeepSpeed-inference on Gaudi is optimum-habana's run_generation.py
# --use_deepspeed (backend gaudi, seed 003); a target gaudi refuses stays refused
FAMILY = DeviceFamily("hpu", "hccl", "Habana SynapseAI's PyTorch bridge (habana_frameworks.torch)",
                      f"{WORKER_DEVICES}:HpuAdapter",
                      Detection(device_files=("/dev/accel/accel*",), tools=("hl-smi",)), probes=("habana",), backends=("gaudi", "deepspeed"),
                      sdk="synapseai", sdk_title="SynapseAI", options=("hpu_graphs", "lazy_mode"),
                      parallelisms=("fsdp", "tensor", "pipeline"), k8s_resource="habana.ai/gaudi",
                      batch_device_files=("/dev/accel/accel{i}", "/dev/accel/accel_controlD{i}"),
                      deepspeed_accelerator="hpu")

#: ``accelctl doctor``'s probes of this stack, each printing one JSON object in a child interpreter
PROBES = {
    "habana": (
        "import json\nimport habana_frameworks.torch.hpu as hpu\n"
        "print(json.dumps({'available': hpu.is_available(), 'devices': hpu.device_count()}))"
    ),
}


# --------------------------------------------------------------------------- hardware
#: its devices (``accelctl.catalog.DEVICES``)
DEVICES: tuple[Device, ...] = (
    Device("gaudi", "habana", "hpu", 32 * GB, {}, interconnect="RoCE 10x100 GbE on chip", lazy_graphs=True,
           note="Gaudi1 HL-205 (dl1.24xlarge)"),
    Device("gaudi2", "habana", "hpu", 96 * GB, {"bf16": 432 * TFLOPS, "fp8": 865 * TFLOPS}, fp8=True,
           interconnect="RoCE 24x100 GbE on chip", lazy_graphs=True),
    Device("gaudi3", "habana", "hpu", 128 * GB, {"bf16": 1835 * TFLOPS, "fp8": 1835 * TFLOPS}, fp8=True,
           interconnect="RoCE 24x200 GbE on chip", lazy_graphs=True),
)

#: Intel Tiber AI Cloud's own documentation (github.com/intel/gaudi-reference-cloud, docs/source/_static/files)
_TIBER = "Intel Tiber AI Cloud price list"

#: instances that rent them, with on-demand prices
INSTANCES: tuple[Instance, ...] = (
    Instance("dl1.24xlarge", "gaudi", 8, 96, 13.11, "seed 003 (~$13/h), AWS on-demand us-east-1 (13.10904)",
             "4x100 Gbps EFA", "", "aws", memory_gib=768),
    Instance("gaudi2-hls", "gaudi2", 8, 160, None, "on-premises HLS-Gaudi2 server"),
    Instance("bm-spr-gaudi2", "gaudi2", 8, 160, 10.40, _TIBER + " (df_ai_hl_225_specs: 8x Gaudi2, on demand)", "",
             "2025-02-28", "intel"),
    Instance("bm-gnr-gaudi3-smc", "gaudi3", 8, 0, 19.92, _TIBER + " (df_ai_hl_325_specs: 8x Gaudi 3, on demand)", "",
             "2025-02-28", "intel"),
)

_HB_G1 = "Habana Gaudi HL-205 mezzanine card product brief (habana.ai, HL-205 data sheet)"
_HB_G2 = "Habana Gaudi2 white paper, ver 1.1 (habana.ai/wp-content/uploads/2022/05/Gaudi2-Whitepaper.pdf)"
_HB_G3 = "Intel Gaudi 3 AI accelerator white paper (intel.com/content/www/us/en/content-details/817486)"

#: Gaudi's fp32 matrix rate: Habana publishes none (the Gaudi2 and Gaudi 3 white papers give
#: the MME's bf16 and fp8 peaks only), so an fp32 estimate on Gaudi rests on this stated ratio
#: to the bf16 peak; it is an estimate's figure only (``Device.peak_flops``, which MFU reads,
#: stays without it)
GAUDI_FP32_OF_BF16 = 0.25
_HB_FP32 = ("ASSUMPTION: Habana publishes no fp32 peak; taken as 1/4 of the bf16 MME peak ({bf16:g} TFLOPS), "
            "between the TPC vector units' 1/2 (docs.habana.ai TPC User Guide: 64 float vs 128 INT16 ops per "
            "cycle) and the 1/16 of NVIDIA's non-tensor-core fp32 (A100 datasheet: 19.5 vs 312 TFLOPS)")


def _gaudi_fp32(bf16: float, date: str) -> dict[str, Figure]:
    return {"fp32": Figure(bf16 * GAUDI_FP32_OF_BF16, _HB_FP32.format(bf16=bf16 / TFLOPS), date)}


_DEV = {d.name: d for d in DEVICES}

#: what estimates read besides the peaks (``accelctl.catalog.DATASHEETS``)
DATASHEETS: tuple[Datasheet, ...] = (
    # Gaudi1: 32 GB HBM2 at 1 TB/s; 10 x 100 GbE RoCE on chip, 7 of them full-mesh inside
    # the node (seed 001: 700 Gbps) = 87.5 GB/s per direction
    Datasheet("gaudi", {"bf16": Figure(108e12, "ASSUMPTION: Habana publishes no Gaudi1 matrix peak; "
                                               "taken as 1/4 of Gaudi2's 432 TFLOPS", "2022-05")}
              | _gaudi_fp32(108e12, "2022-05"),
              Figure(1000e9, _HB_G1, "2021-10"), Figure(87.5e9, "seed 001 (700 Gbps full mesh)", "2022-01")),
    # Gaudi2: 96 GB HBM2E at 2.45 TB/s; 24 x 100 GbE, 21 inside the node = 262.5 GB/s
    sheet(_DEV["gaudi2"], _HB_G2, "2022-05", 2450e9, 262.5e9, flops_source=_HB_G3 + " (Gaudi2 column)",
          assumed=_gaudi_fp32(432e12, "2024-04")),
    sheet(_DEV["gaudi3"], _HB_G3, "2024-04", 3700e9, 525e9, assumed=_gaudi_fp32(1835e12, "2024-04")),
)

#: network between nodes of its instances, bytes/s per node per direction (``accelctl.catalog.SCALE_OUT``)
SCALE_OUT: dict[str, Figure] = {
    "dl1.24xlarge": Figure(400e9 / 8, "AWS DL1 instance page: 400 Gbps EFA (seed 001)", "2021-10"),
}
