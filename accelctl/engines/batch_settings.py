"""``engine aws_batch { ... }``: the settings of the aws_batch engine (``accelctl.engines.aws_batch``)."""

from __future__ import annotations

from accelctl.engines.settings import IMAGE
from accelctl.language import values as V
from accelctl.language.plugins import EngineRow

_NAME = V.token(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}|arn:aws[A-Za-z0-9_:/.+=@-]{1,1600}", '"dl1-queue"',
                "AWS Batch name or ARN")

SETTINGS: dict[str, V.VType] = {
    "job_queue": _NAME,
    "job_definition": _NAME,
    "image": IMAGE,
    "role_arn": V.token(r"arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9_+=,.@/-]{1,512}",
                        '"arn:aws:iam::123456789012:role/batch"', "IAM role ARN"),
    "efa": V.boolean(),
    "vcpus": V.integer(1, 4096),
    "memory": V.quantity("bytes"),
    "attempts": V.integer(1, 10),
}

ROW = EngineRow(
    name="aws_batch",
    engine="accelctl.engines.aws_batch:AwsBatchEngine",
    summary="AWS Batch multi-node parallel job (job definition + SubmitJob, DeepSpeed per node)",
    settings=SETTINGS,
    meanings={
        "job_queue": "AWS Batch job queue", "job_definition": "AWS Batch job definition name",
        "image": "container image", "role_arn": "job role ARN", "efa": "attach EFA network interfaces",
        "vcpus": "vCPUs per node", "memory": "memory request / limit", "attempts": "retry attempts",
    },
    code="E546",
    refuses="`engine aws_batch` cannot place the target: `job_queue`/`image` missing, a node it cannot size (no "
            "catalog instance: set `vcpus` and `memory`), `efa = on` on an instance without EFA, or a device family "
            "whose row gives AWS Batch no GPU type or device files (a family no AWS instance carries)",
    scheduler="accelctl.engines.batch_scheduler:BatchScheduler",
    image_key="image",
)
