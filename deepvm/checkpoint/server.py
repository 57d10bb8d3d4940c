"""The checkpoint tier: ``deepvm checkpoint serve``, Starlette under uvicorn
(the server stack Prefect already installs), over a :class:`VersionFolder`
(the protocol: deepvm.checkpoint.protocol)."""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Any

from deepvm.checkpoint._versions import CapacityError, CorruptVersion, Version, VersionFolder
from deepvm.checkpoint.protocol import SHA_HEADER, STEP_HEADER, auth_headers

__all__ = ["CHUNK_BYTES", "TokenGate", "create_app", "log", "serve"]

log = logging.getLogger("deepvm.checkpoint")
CHUNK_BYTES = 1 << 20  # what a download is sent in


def create_app(folder: VersionFolder, *, token: str | None) -> Any:
    """The tier's Starlette application; with a ``token``, only requests that
    carry it (:func:`deepvm.checkpoint.protocol.auth_headers`) reach it."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Route

    class VersionResponse(FileResponse):
        chunk_size = CHUNK_BYTES

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    def send(version: Version) -> Response:
        return VersionResponse(
            version.path,
            media_type="application/octet-stream",
            headers={STEP_HEADER: str(version.step), SHA_HEADER: version.sha256},
        )

    async def put_version(request: Request) -> Response:
        step = _step(request.path_params["step"])
        length, digest = request.headers.get("content-length"), request.headers.get(SHA_HEADER)
        if step is None or length is None or not length.isdigit() or not digest:
            return error(400, f"PUT /versions/STEP needs Content-Length and {SHA_HEADER}")
        size = int(length)
        try:
            with folder.upload(step, size=size, sha256=digest) as upload:
                async for chunk in request.stream():
                    upload.add(chunk)
                version = upload.finish()
        except CapacityError as exc:
            return error(507, str(exc))
        except ClientDisconnect:  # the writer died mid-upload: nothing was kept
            log.warning("version %d: the client left mid-upload", step)
            return error(400, "the upload was cut short")
        except CorruptVersion as exc:
            log.warning("refused %s", exc)
            return error(422, str(exc))
        log.info("version %d stored (%d bytes)", version.step, version.size)
        return JSONResponse(version.as_dict(), status_code=201)

    async def list_versions(request: Request) -> Response:
        return JSONResponse([v.as_dict() for v in folder.versions()])

    async def get_version(request: Request) -> Response:
        name = request.path_params["step"]
        version = folder.newest() if name == "latest" else _found(folder, _step(name))
        if version is None:
            return error(404, f"no complete version {name}")
        return send(version)

    async def room(request: Request) -> Response:
        """Whether ``size`` bytes would fit now: a client asks before it uploads, so
        a full tier refuses without the bytes crossing the network."""
        size = request.query_params.get("size", "")
        if not size.isdigit():
            return error(400, "GET /room needs ?size=BYTES")
        try:
            folder.check_room(int(size))
        except CapacityError as exc:
            return error(507, str(exc))
        return JSONResponse({"fits": True})

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "versions": len(folder.versions()),
                "keep": folder.keep,
                "used_bytes": folder.used_bytes(),
                "capacity_bytes": folder.capacity_bytes,
            }
        )

    gate = [Middleware(TokenGate, token=token)] if token else []
    return Starlette(
        middleware=gate,
        routes=[
            Route("/health", health),
            Route("/room", room),
            Route("/versions", list_versions),
            Route("/versions/{step}", put_version, methods=["PUT"]),
            Route("/versions/{step}", get_version, methods=["GET"]),
        ],
    )


class TokenGate:
    """ASGI middleware: a request whose Authorization header is not the tier's
    bearer token gets 401 before any route runs, so nothing is read or written.
    hmac.compare_digest takes the same time wherever the bytes differ."""

    def __init__(self, app: Any, *, token: str):
        self.app = app
        self.expected = auth_headers(token)["Authorization"].encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                from starlette.responses import JSONResponse

                refusal = JSONResponse(
                    {"error": "this tier needs its token (Authorization: Bearer ...)"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _step(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 12 else None


def _found(folder: VersionFolder, step: int | None) -> Version | None:
    return None if step is None else folder.get(step)


def serve(
    root: str | Path,
    *,
    host: str,
    port: int,
    keep: int,
    capacity_bytes: int | None,
    token: str | None,
) -> None:
    """Run the tier until interrupted."""
    import uvicorn

    folder = VersionFolder(root, keep=keep, capacity_bytes=capacity_bytes)
    uvicorn.run(create_app(folder, token=token), host=host, port=port, log_level="warning")
