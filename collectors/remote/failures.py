"""Foreign storage exceptions (botocore, aiohttp, azure, google, pyarrow) as our one-line errors.

Matched on class names and codes rather than imported classes, so that a missing backend
library never breaks the translation of another's errors.
"""

from __future__ import annotations

from collections.abc import Mapping

from stateglass.collectors.errors import (
    AccessDenied,
    BadCredentials,
    NoSuchBucket,
    StorageError,
    StorageUnavailable,
)
from stateglass.collectors.remote.urls import redact

_CREDENTIAL_CODES = (
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AuthenticationFailed",
    "InvalidAuthenticationInfo",
    "ExpiredToken",
    "InvalidToken",
    "NoCredentialsError",
    "PartialCredentialsError",
    "ClientAuthenticationError",
    "CredentialRetrievalError",
    "DefaultCredentialsError",
    "RefreshError",
    "Unable to locate credentials",
    "Server failed to authenticate",
)
# An HTTP 403 as the clients word it ("An error occurred (403) when calling the HeadObject
# operation: Forbidden"): a bare "403" would also match a port or a path (127.0.0.1:40311).
_DENIED_CODES = (
    "AccessDenied",
    "AuthorizationPermissionMismatch",
    "AuthorizationFailure",
    "(403)",
    "Forbidden",
)
_BUCKET_CODES = ("NoSuchBucket", "ContainerNotFound", "bucket does not exist", "NotFound: bucket")
_THROTTLE_CODES = ("SlowDown", "Throttl", "TooManyRequests", "RequestLimitExceeded", "ServerBusy")
_UNREACHABLE = (
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ServerDisconnectedError",
    "ClientConnectorError",
    "ClientOSError",
    "ClientPayloadError",
    "ServiceRequestError",
    "ServiceResponseError",
    "IncompleteReadError",
    "ConnectionError",
    "ConnectionResetError",
    "ConnectionRefusedError",
    "TimeoutError",
    "ResponseStreamingError",
)


def _names(exc: BaseException) -> str:
    """Class names and messages of ``exc`` and its causes: where the codes hide."""
    parts: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        parts.extend(t.__name__ for t in type(cur).__mro__)
        parts.append(str(cur))
        cur = cur.__cause__ or cur.__context__
    return " ".join(parts)


def storage_error(
    url: str, exc: BaseException, secrets: Mapping[str, object]
) -> StorageError | None:
    """The :class:`StorageError` for ``exc``; None when it is not a storage failure (a missing
    file, a bug), so that the caller handles or re-raises it."""
    text = _names(exc)
    if any(code in text for code in _BUCKET_CODES):
        return NoSuchBucket(url, "no such bucket or container")
    if isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError):
        return None
    if any(code in text for code in _CREDENTIAL_CODES):
        return BadCredentials(
            url,
            "credentials missing or rejected: check the environment, profile or "
            "--storage-option keys for this store",
        )
    if isinstance(exc, PermissionError) or any(code in text for code in _DENIED_CODES):
        return AccessDenied(url, "access denied: the credentials may not read this path")
    if any(code in text for code in _THROTTLE_CODES):
        return StorageUnavailable(url, "still throttled by the store after retries; try later")
    if any(code in text for code in _UNREACHABLE) or isinstance(exc, OSError):
        detail = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, secrets)
        return StorageUnavailable(url, f"storage unreachable or connection lost ({detail[:160]})")
    if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
        # s3fs makes its client at the first request, with the options as keyword arguments.
        detail = redact(str(exc).splitlines()[0], secrets)
        return StorageError(url, f"a storage option the client does not take ({detail[:160]})")
    return None
