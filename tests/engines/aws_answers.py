"""AWS's side of a test where a Stubber's fixed queue cannot be used: a client whose calls of
one operation are answered by a function of the request, from any thread, any number of times.

Every request is checked against the real service model's input shape (as botocore checks it
before sending) and every answer against the operation's output shape, as ``Stubber`` checks
its queued answers; an answer ``("ErrorCode", "message")`` is a ClientError from the service.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.validate import validate_parameters


def client(service: str, region: str = "us-east-1"):
    return botocore.session.get_session().create_client(service, region_name=region, aws_access_key_id="x",
                                                         aws_secret_access_key="x")


def answer(c, operation: str, fn: Callable[[dict], dict | tuple[str, str]]) -> None:
    """Answer ``c``'s ``operation`` (``"DescribeJobs"``) with ``fn(request)``."""
    op = c.meta.service_model.operation_model(operation)
    event = f"before-call.{c.meta.service_model.service_id.hyphenize()}.{operation}"

    def handler(model, params, **_):
        if model.name != operation:
            return None
        request = _last.request
        out = fn(request)
        if isinstance(out, tuple):
            return AWSResponse(None, 400, {}, None), {"Error": {"Code": out[0], "Message": out[1]},
                                                      "ResponseMetadata": {"HTTPStatusCode": 400}}
        validate_parameters(out, op.output_shape)
        return AWSResponse(None, 200, {}, None), dict(out, ResponseMetadata={"HTTPStatusCode": 200})

    def keep_request(params, model, **_):  # the request as the caller wrote it (this thread's call)
        _last.request = dict(params)

    c.meta.events.register(f"before-parameter-build.{c.meta.service_model.service_id.hyphenize()}.{operation}",
                           keep_request)
    c.meta.events.register(event, handler)


_last = threading.local()
