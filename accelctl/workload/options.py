"""The target options (``hpu_graphs = on``, ``threads = 4`` ...): one typed field each, whose
``key(...)`` row says everything accelctl knows of it — the values it takes (the schema makes
its checker from them), what it means and what an unwritten one does (docs/language.md's
target table), where it lands in the job (``lands``: fields of ``accelctl.contract.job.WorkerJob``;
the job builder puts a ``device.*`` one in the device settings) or, where no job carries it,
what reads it (``read_by``), and whether a rehearsal on this CPU keeps it.  Which device families
take one is the family's row (``DeviceFamily.options``).  A new option is one field here.

Pure data (the frozen value base only): the plan contract and the worker read these types."""

from __future__ import annotations

from typing import Any

from accelctl.frozen import Value

#: what values an option takes: on/off, a whole number in [lo, hi], one of ``choices``, or a
#: Transformer Engine release (``accelctl.language.te_versions``)
KINDS = ("boolean", "integer", "choice", "te_version")


class OptionKey(Value):
    """What one target option is: the values it takes, its meaning and where it goes."""

    #: one of KINDS
    kind: str
    #: what it does (docs/language.md)
    doc: str
    #: what happens when it is not written
    unset: str
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()
    #: the job's fields it sets (``WorkerJob`` paths: ``device.hpu_graphs``); none: ``read_by``
    lands: tuple[str, ...] = ()
    #: what reads it where no job field does (a launch, a plan file)
    read_by: str = ""
    #: still means something on this CPU: a rehearsal keeps it
    rehearsed: bool = False


_ROWS: list[OptionKey] = []  # each ``key(...)`` of TargetOptions' fields, in the fields' order


def key(kind: str, doc: str, unset: str, **row: Any) -> None:
    """A ``TargetOptions`` field's default (unwritten: ``None``); its row is kept, in the order
    of the fields, for ``OPTIONS``.  A row says where the option lands or what reads it."""
    if not (row.get("lands") or row.get("read_by")):
        raise TypeError(f"a target option's row must say where it lands in the job (lands=...) or what reads it "
                        f"(read_by=...): {doc!r}")
    _ROWS.append(OptionKey(kind, doc, unset, **row))


class TargetOptions(Value):
    """The options a target wrote, typed; ``None`` where it wrote none (its row says what then)."""

    hpu_graphs: bool | None = key("boolean", "Gaudi: capture HPU graphs", "backend default",
                                 lands=("device.hpu_graphs",))
    lazy_mode: bool | None = key("boolean", "Gaudi: lazy execution mode", "backend default",
                                lands=("device.lazy_mode",))
    te_layers: bool | None = key("boolean", "CUDA: swap transformer blocks for Transformer Engine layers", "off",
                                 read_by="the worker, through the plan's te_recipe.json")
    dataloader_workers: int | None = key("integer", "data-loader worker processes per rank", "backend default",
                                         lo=0, hi=1024, lands=("device.dataloader_workers",))
    pin_memory: bool | None = key(
        "boolean", "CUDA: the data loader's batches in page-locked host memory (DataLoader pin_memory; with "
        "dataloader_workers > 0)", "off", lands=("device.pin_memory",))
    threads: int | None = key("integer", "intra-op CPU threads per process", "cores ÷ processes", lo=1, hi=1024,
                              lands=("threads",), rehearsed=True)
    weights: str | None = key("choice", "overrides the model's weights setting for this target", "the model's",
                              choices=("auto", "real", "random", "stand_in"), lands=("model.weights",))
    neuron_parallel_compile: bool | None = key(
        "boolean", "Neuron: pre-compile graphs in parallel (neuron_parallel_compile)", "off",
        read_by="the launch: a neuron_parallel_compile pass before the run")
    xla_use_bf16: bool | None = key(
        "boolean", "Neuron: XLA_USE_BF16=1, every fp32 tensor held and computed in bf16 (seed 004), no "
        "autocast; needs precision bf16 (E243); deprecated by torch-xla after 2.6", "off",
        read_by="the launch's environment (XLA_USE_BF16=1)")
    script: str | None = key(
        "choice", "what the launcher starts: accelctl's own loop (worker) or the backend's documented example "
        "script (example, e.g. optimum-habana's run_generation.py)", "worker", choices=("worker", "example"),
        read_by="the launch: what the launcher starts")
    te_version: str | None = key(
        "te_version", "Transformer Engine version the plan targets (its autocast API changed in 2.9)",
        "the te_fp8 backend's (2.20)", read_by="the plan's Transformer Engine files (te_recipe.json)")
    hub: str | None = key(
        "choice", "Hugging Face Hub access of the worker: online (weights, configs and datasets by id, HF_HOME "
        "and the HF cache respected) or offline (HF_HUB_OFFLINE=1: cache and local paths only)",
        "online on accelerators, offline on cpu", choices=("online", "offline"),
        lands=("hub",))

    def written(self) -> dict[str, Any]:
        """The options the target wrote, by name, in the table's order."""
        return {name: v for name in OPTIONS if (v := getattr(self, name)) is not None}


#: every target option's row, by name, in the order of the fields
OPTIONS: dict[str, OptionKey] = dict(zip(TargetOptions.__struct_fields__, _ROWS, strict=True))
