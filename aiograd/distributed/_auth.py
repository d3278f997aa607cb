"""Shared-secret authentication of RPC calls (Note [Unpickle after auth]).

gRPC drops call credentials on insecure channels, so every call carries, in
its metadata, ``ts:nonce:digest:mac`` where ``mac = HMAC-SHA256(secret,
method|ts|nonce|digest)`` and ``digest`` is the SHA-256 of the request body.
The server interceptor checks the MAC, the clock window and nonce reuse, and
answers UNAUTHENTICATED before any handler runs; the handler then checks the
body against ``digest`` before unpickling it.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import grpc

AUTH_KEY = "x-aiograd-auth"
FROM_KEY = "x-aiograd-from"
#: How far a call's timestamp may be from the server's clock.
WINDOW_S = 300.0


def digest(chunks: Iterable[Any]) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    return h.hexdigest()


def sign(secret: bytes, method: str, body_digest: str) -> str:
    ts = repr(time.time())
    nonce = os.urandom(12).hex()
    mac = hmac.new(secret, f"{method}|{ts}|{nonce}|{body_digest}".encode(), "sha256").hexdigest()
    return f"{ts}:{nonce}:{body_digest}:{mac}"


class Verifier:
    """Checks tokens made by :func:`sign`; remembers recent nonces against replay."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._seen: OrderedDict[str, float] = OrderedDict()

    def check(self, method: str, token: str | None) -> str | None:
        """The body digest the token vouches for, or None if the token is bad."""
        if not token or token.count(":") != 3:
            return None
        ts, nonce, body_digest, mac = token.split(":")
        want = hmac.new(self._secret, f"{method}|{ts}|{nonce}|{body_digest}".encode(),
                        "sha256").hexdigest()
        if not hmac.compare_digest(want, mac):
            return None
        now = time.time()
        try:
            if abs(now - float(ts)) > WINDOW_S:
                return None
        except ValueError:
            return None
        if nonce in self._seen:
            return None
        self._seen[nonce] = now
        while self._seen and next(iter(self._seen.values())) < now - 2 * WINDOW_S:
            self._seen.popitem(last=False)
        return body_digest


def metadata_value(metadata: Any, key: str) -> str | None:
    for k, v in metadata or ():
        if k == key:
            return v if isinstance(v, str) else v.decode()
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls whose token does not verify, before the handler sees a byte."""

    def __init__(self, verifier: Verifier) -> None:
        self._verifier = verifier

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        token = metadata_value(details.invocation_metadata, AUTH_KEY)
        if self._verifier.check(details.method, token) is not None:
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:
            return None

        async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "rpc: wrong or missing shared secret")

        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(deny)
        return grpc.unary_unary_rpc_method_handler(deny)
