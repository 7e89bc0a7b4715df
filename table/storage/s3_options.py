"""s3fs settings from paimond's storage options, and the S3 errors that mean "unavailable"."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

_VERBATIM_OPTIONS = frozenset(
    {"key", "access_key_id", "secret", "secret_access_key", "token", "session_token"}
)


def s3fs_arguments(options: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str], int | None]:
    """s3fs constructor arguments, the secrets to scrub from messages, and max attempts."""
    opts = parse_option_values(options)
    for alias, name in (("access_key_id", "key"), ("secret_access_key", "secret"),
                        ("session_token", "token")):
        if alias in opts:
            opts[name] = opts.pop(alias)
    opts.setdefault("endpoint_url", os.environ.get("PAIMOND_S3_ENDPOINT_URL") or None)
    region = opts.pop("region", None)
    if region:
        opts["client_kwargs"] = {**opts.get("client_kwargs", {}), "region_name": region}
    config = dict(opts.pop("config_kwargs", {}))
    if "connect_timeout_s" in opts:
        config["connect_timeout"] = float(opts.pop("connect_timeout_s"))
    if "read_timeout_s" in opts:
        config["read_timeout"] = float(opts.pop("read_timeout_s"))
    attempts = opts.pop("max_attempts", None)
    if attempts is not None:
        attempts = int(attempts)
        config["retries"] = {"total_max_attempts": attempts, "mode": "standard"}
    env_names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    credentials = [opts.get("key"), opts.get("secret"), opts.get("token")]
    secrets = {str(s) for s in (*credentials, *map(os.environ.get, env_names)) if s}
    opts.update(config_kwargs=config, skip_instance_cache=True, use_listings_cache=False)
    return opts, frozenset(s for s in secrets if len(s) >= 4), attempts


def parse_option_values(options: Mapping[str, Any]) -> dict[str, Any]:
    """Config files give strings: "true"/"false" become bools and digits ints, except in
    credentials."""
    parsed = dict(options)
    for k, v in options.items():
        if not isinstance(v, str) or k in _VERBATIM_OPTIONS:
            continue
        if v.lower() in ("true", "false"):
            parsed[k] = v.lower() == "true"
        elif v.isdigit():
            parsed[k] = int(v)
    return parsed


def s3_unavailable_errors() -> tuple[type[BaseException], ...]:
    import aiohttp
    from botocore import exceptions as b

    return (OSError, b.ConnectionError, b.HTTPClientError, b.NoCredentialsError,
            b.PartialCredentialsError, b.CredentialRetrievalError, aiohttp.ClientError)


def s3_error_code(e: BaseException) -> tuple[str | None, int | None]:
    """The S3 error code and HTTP status behind an s3fs-translated OSError."""
    response = getattr(e.__cause__, "response", None) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return response.get("Error", {}).get("Code"), status
