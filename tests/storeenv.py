"""The S3 settings the tests give pyarrow's AWS SDK: the fixed key S3Proxy checks
(``tools/stores``), no instance metadata, no profile or endpoint of the machine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tools.stores.servers import S3_ACCESS_KEY, S3_SECRET_KEY

#: what the SDK must see, on the driver and on the Spark workers
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
UNSET_AWS = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_REGION")


@contextmanager
def aws_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in FAKE_AWS.items():
            env.setenv(name, value)
        for name in UNSET_AWS:
            env.delenv(name, raising=False)
        yield
