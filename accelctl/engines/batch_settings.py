"""``engine aws_batch { ... }``: the settings of the aws_batch engine (``accelctl.engines.aws_batch``)."""

from __future__ import annotations

from accelctl.engines.settings import IMAGE
from accelctl.spec import values as V

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
