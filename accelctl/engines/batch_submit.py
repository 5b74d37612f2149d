"""``python -m accelctl.engines.batch_submit JOB_DEFINITION.json SUBMIT_JOB.json``: the launch of
an ``aws_batch`` plan.  Registers the job definition, then submits the job against the exact
revision AWS returned (not "the latest of that name", which another registration could
change in between), with botocore and the caller's usual AWS configuration (profile,
region, credentials).  Prints the job's id and ARN; exits 1 with AWS's message on an error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m accelctl.engines.batch_submit JOB_DEFINITION.json SUBMIT_JOB.json", file=sys.stderr)
        return 2
    definition, submit = (json.loads(Path(a).read_text(encoding="utf-8")) for a in args)
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        print("botocore is not installed: pip install 'accelctl[aws]'", file=sys.stderr)
        return 1
    try:
        client = botocore.session.get_session().create_client("batch")
        registered = client.register_job_definition(**definition)
        print(f"registered {registered['jobDefinitionArn']}")
        job = client.submit_job(**dict(submit, jobDefinition=registered["jobDefinitionArn"]))
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
        print(f"AWS Batch: {e}", file=sys.stderr)
        return 1
    print(f"submitted {job['jobName']}: jobId {job['jobId']} ({job.get('jobArn', '')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
