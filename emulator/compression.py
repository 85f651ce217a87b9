"""Response compression as kube-apiserver does it (APIResponseCompression, on by default).

A response whose body is larger than 128 KiB is sent gzip-compressed, at level 1, when the
request's Accept-Encoding lists `gzip`; the response then carries `Content-Encoding: gzip` and
`Vary: Accept-Encoding`. Single objects and lists are compressed alike; watch streams never
are (their events are written one by one, not through the compressing writer).
"""

from __future__ import annotations

import dataclasses
import zlib

from .wire import ApiRequest, ApiResponse

GZIP_THRESHOLD_BYTES = 128 * 1024
# kube-apiserver compresses at level 1: least CPU for a ratio close to the higher levels'.
GZIP_LEVEL = 1
_GZIP_WBITS = 16 + zlib.MAX_WBITS


def accepts_gzip(req: ApiRequest) -> bool:
    """Whether Accept-Encoding names gzip (exactly, as kube-apiserver matches it)."""
    accept = req.headers.get("accept-encoding", "")
    return any(part.strip() == "gzip" for part in accept.split(","))


def compress_response(req: ApiRequest, resp: ApiResponse) -> ApiResponse:
    """`resp` gzip-compressed when kube-apiserver would compress it; otherwise `resp`."""
    if resp.stream is not None or len(resp.body) <= GZIP_THRESHOLD_BYTES:
        return resp
    if not accepts_gzip(req) or any(k.lower() == "content-encoding" for k in resp.headers):
        return resp
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
    body = compressor.compress(resp.body) + compressor.flush()
    headers = {k: v for k, v in resp.headers.items() if k.lower() != "content-length"}
    headers["Content-Encoding"] = "gzip"
    headers["Vary"] = "Accept-Encoding"
    return dataclasses.replace(resp, body=body, headers=headers)
