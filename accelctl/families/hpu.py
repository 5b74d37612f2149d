"""Habana Gaudi through SynapseAI's PyTorch bridge: HCCL between ranks, found by
``/dev/accel/accel*`` or ``hl-smi``."""

from __future__ import annotations

from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

FAMILY = DeviceFamily("hpu", "hccl", "Habana SynapseAI's PyTorch bridge (habana_frameworks.torch)",
                      f"{WORKER_DEVICES}:HpuAdapter",
                      Detection(device_files=("/dev/accel/accel*",), tools=("hl-smi",)), probes=("habana",),
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
