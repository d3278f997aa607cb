"""Shared-secret authentication of RPC calls (Note [Unpickle after auth]).

gRPC drops call credentials on insecure channels, so every call carries, in
its metadata, ``ts:nonce:tag:mac`` where ``mac = HMAC-SHA256(secret,
method|ts|nonce|tag)`` and ``tag`` is the Poly1305 tag of the request body
under the one-time key ``HMAC-SHA256(secret, "body"|nonce)``. The server
interceptor checks the MAC, the clock window and nonce reuse, and answers
UNAUTHENTICATED before any handler runs; the handler then checks the body
(inline, or from the bulk lane) against ``tag`` before unpickling it.

Note [Body MAC]: the body tag is Poly1305, not a SHA-256 digest, because a
100 MB tensor is hashed twice per hop: SHA-256 runs at about 1 GB/s here
(SHA-NI), Poly1305 at several GB/s, so the MAC no longer bounds throughput.
Poly1305 is a one-time MAC: its key is derived per call from the secret and
the nonce, and the verifier refuses reused nonces, so no key is used twice.
"""
from __future__ import annotations

import hmac
import os
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import grpc
from cryptography.hazmat.primitives.poly1305 import Poly1305

AUTH_KEY = "x-aiograd-auth"
FROM_KEY = "x-aiograd-from"
#: How far a call's timestamp may be from the server's clock.
WINDOW_S = 300.0


def new_nonce() -> str:
    return os.urandom(16).hex()


def body_mac(secret: bytes, nonce: str) -> Poly1305:
    """A Poly1305 MAC under the one-time key of ``nonce`` (Note [Body MAC]), for bodies
    MAC'd piece by piece as they are sent or received."""
    return Poly1305(hmac.digest(secret, b"body|" + nonce.encode(), "sha256"))


def body_tag(secret: bytes, nonce: str, bufs: Iterable[Any]) -> str:
    """The Poly1305 tag of the body made of ``bufs``, under the one-time key of ``nonce``
    (Note [Body MAC])."""
    mac = body_mac(secret, nonce)
    for buf in bufs:
        mac.update(buf)
    return mac.finalize().hex()


def sign(secret: bytes, method: str, tag: str, nonce: str | None = None) -> str:
    """The token of one call whose body has Poly1305 ``tag`` under ``nonce``'s key."""
    ts = repr(time.time())
    nonce = nonce or new_nonce()
    mac = hmac.new(secret, f"{method}|{ts}|{nonce}|{tag}".encode(), "sha256").hexdigest()
    return f"{ts}:{nonce}:{tag}:{mac}"


def token_parts(token: str) -> tuple[str, str]:
    """``(nonce, body tag)`` of a token the interceptor verified."""
    _, nonce, tag, _ = token.split(":")
    return nonce, tag


class Verifier:
    """Checks tokens made by :func:`sign`; remembers recent nonces against replay."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._seen: OrderedDict[str, float] = OrderedDict()

    def check(self, method: str, token: str | None) -> str | None:
        """The body tag the token vouches for, or None if the token is bad."""
        if not token or token.count(":") != 3:
            return None
        ts, nonce, tag, mac = token.split(":")
        want = hmac.new(self._secret, f"{method}|{ts}|{nonce}|{tag}".encode(),
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
        return tag


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

        return grpc.unary_unary_rpc_method_handler(deny)
