"""What a plan makes of its target's ``stack { }`` (``accelctl.language.stack``).

* ``requirements.txt``: the pinned packages, as ``pip install -r`` reads them (Habana's
  DeepSpeed fork from its git tag);
* the image: where the engine takes one (Kubernetes pods, AWS Batch job definitions) it is the
  engine's ``image`` unless the ``engine`` block names its own; Slurm's ``container_image``
  (pyxis/enroot ``--container-image``) is not built, and the local and torchrun engines start
  their processes on this machine: a note says what to pull and run there;
* the AMI and the SDK: notes (the machine's, not something a launch can install).

Pure data from the spec: the plan of a target with a stack reads nothing of this machine but
for the host CPU, whose run uses what is installed here (a warning where a pin differs).
"""

from __future__ import annotations


from accelctl.backends.base import Built
from accelctl.contract.plan import RUN_DIR, GeneratedFile
from accelctl.catalog import DEVICES
from accelctl.language.plugins import engine_row
from accelctl.language.stack import SDKS
from accelctl.workload.types import EngineSpec, StackSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace

REQUIREMENTS = "requirements.txt"
#: Habana's DeepSpeed fork, as its README installs it
HABANA_DEEPSPEED = "deepspeed @ git+https://github.com/HabanaAI/DeepSpeed.git@{version}"


def requirement(name: str, version: str) -> str:
    """One line of requirements.txt pinning ``name`` at ``version``."""
    return HABANA_DEEPSPEED.format(version=version) if name == "habana-deepspeed" else f"{name}=={version}"


def requirements_text(spec: WorkloadSpec, target: TargetSpec) -> str:
    head = f"# the stack of target {target.name} (workload {spec.name})\n# pip install -r {REQUIREMENTS}\n"
    return head + "".join(requirement(n, v) + "\n" for n, v in target.stack.packages.items())


def sdk_name(stack: StackSpec) -> str:
    return f"{SDKS[stack.sdk][0]} {stack.sdk_version}" if stack.sdk else ""


def engine_settings(target: TargetSpec, engine: str, settings: EngineSpec) -> EngineSpec:
    """The engine block's settings with the stack's image where the engine takes one and the
    block names none."""
    key = engine_row(engine).image_key
    if not key or not target.stack.image or settings.settings.get(key):
        return settings
    return replace(settings, settings={**settings.settings, key: target.stack.image})


def with_stack(spec: WorkloadSpec, target: TargetSpec, engine: str, settings: EngineSpec, built: Built) -> Built:
    """``built`` (after the engine's wrap) with the stack's file, notes and warnings."""
    stack = target.stack
    if stack.empty:
        return built
    files, notes, warnings = list(built.files), list(built.notes), list(built.warnings)
    if stack.packages:
        files.append(GeneratedFile(REQUIREMENTS, requirements_text(spec, target),
                                   role="the target's pinned packages (stack { packages { } })"))
        notes.append(f"stack: packages pinned in {RUN_DIR}/{REQUIREMENTS} ("
                     + ", ".join(requirement(n, v) for n, v in stack.packages.items())
                     + "): the target's machine installs them (pip install -r); plan --check checks them where "
                     "a side environment holds them")
    if stack.sdk:
        notes.append(f"stack: SDK {sdk_name(stack)} on the target's machine (its driver and runtime: not installed "
                     "by a launch)")
    if stack.ami:
        notes.append(f"stack: the instances boot AMI {stack.ami!r}")
    if stack.image:
        notes.append(_image_note(stack.image, engine, settings))
    if DEVICES[target.device].host and stack.packages:
        from accelctl.backends.deepspeed.backend import installed_version

        for name, version in stack.packages.items():
            have = installed_version("deepspeed" if name == "habana-deepspeed" else name)
            if have != version:
                warnings.append(f"stack pins {name} {version}; this machine has {have or 'none'}: a run here uses "
                                "what is installed")
    return replace(built, files=files, notes=notes, warnings=warnings)


def _image_note(image: str, engine: str, settings: EngineSpec) -> str:
    row = engine_row(engine)
    if row.image_key:
        key, named = row.image_key, settings.settings.get(row.image_key)
        if named and named != image:
            return f"stack: image {image}; engine {engine} {{ {key} = \"{named}\" }} names its own, which the job runs"
        return f"stack: image {image}: the {engine} job runs in it (docker pull {image})"
    if row.image_note:
        return f"stack: image {image}: {row.image_note}"
    return (f"stack: image {image}: engine {engine} starts the processes on this machine, outside it; on the "
            f"target's machine: docker pull {image} and run the launch inside it (docker run --rm --ipc=host "
            f"-v {RUN_DIR}:{RUN_DIR} {image} ...)")


def unchecked(target: TargetSpec, results: list) -> list:
    """``plan --check``'s word on the stack's versions no check ran against (``CheckResult.pins``
    names what one did, in a side environment): one NOT RUN result listing them, or none."""
    from accelctl.backends.findings import not_run

    stack = target.stack
    covered = {name for r in results for name in r.pins}
    why = [f"{requirement(n, v)}: no side environment here holds it; the plan's other checks ran against this "
           "machine's packages" for n, v in stack.packages.items() if n not in covered]
    if stack.sdk:
        why.append(f"SDK {sdk_name(stack)}: not on this machine")
    if not why:
        return []
    result = not_run(f"stack of target {target.name} (pinned versions)", why[0])
    result.messages += why[1:]
    return [result]
