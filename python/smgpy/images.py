"""Images of a request, from the URLs the server hands an engine (``image_data``) to pixels.

The server passes each image part as a string: a ``data:image/...;base64,`` URL (what the
OpenAI and Anthropic SDKs send for local files) or an ``http(s)`` URL whose host the server has
already checked to be public (see the Rust ``image_urls`` module). Engines that declare
``accepts_images`` receive those strings unchanged, as sglang's ``image_data``; this module is
how smgpy's MLX engine turns them into images, and other engines may use it too.

Every image is bounded before it is decoded: bytes (``max_bytes``), pixels (``max_pixels``,
read from the header, so a decompression bomb is refused unread), format (PNG, JPEG, WebP, GIF,
BMP) and count per request. Remote URLs are fetched only from hosts the operator lists
(``allowed_domains``; none by default), with a timeout, no redirects, and only when the name
resolves to public addresses. ``file://`` URLs are read only inside the directory the operator
names (``local_path``; none by default), after resolving links, so no path leaves it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import ipaddress
import os
import socket
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["DecodedImage", "ImageError", "ImagePolicy", "load_images"]

_FORMATS = frozenset({"PNG", "JPEG", "WEBP", "GIF", "BMP"})
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


class ImageError(ValueError):
    """An image of the request cannot be used; the message names which one and why."""


@dataclass(frozen=True)
class ImagePolicy:
    """Bounds on a request's images (see the module doc)."""

    max_images: int = 8
    max_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    # Hosts whose http(s) URLs are fetched ("example.com" also allows its subdomains; "*" any
    # public host). Empty: remote images are refused.
    allowed_domains: frozenset[str] = frozenset()
    fetch_timeout_s: float = 10.0
    # A directory whose files file:// URLs may name (vLLM's --allowed-local-media-path). None: refused.
    local_path: str | None = None


@dataclass(frozen=True, eq=False)
class DecodedImage:
    """An RGB image (PIL) and the SHA-256 of its bytes (what the prefix cache keys it by)."""

    image: Any
    digest: bytes


def _which(i: int) -> str:
    return f"image {i + 1} (the request's {_ORDINALS[i] if i < len(_ORDINALS) else f'#{i + 1}'} image part)"


def load_images(urls: list[str], policy: ImagePolicy) -> list[DecodedImage]:
    """Decode every image of a request, or raise :class:`ImageError` naming the first bad one."""
    if len(urls) > policy.max_images:
        raise ImageError(f"the request has {len(urls)} images; this server accepts at most {policy.max_images}")
    return [_decode(i, _bytes_of(i, url, policy), policy) for i, url in enumerate(urls)]


def _bytes_of(i: int, url: str, policy: ImagePolicy) -> bytes:
    if url[:5].lower() == "data:":
        head, sep, payload = url[5:].partition(",")
        if not sep or not head.lower().endswith(";base64"):
            raise ImageError(f"{_which(i)}: a data URL must be base64 (data:image/png;base64,...)")
        if len(payload) > policy.max_bytes * 4 // 3 + 4:
            raise ImageError(f"{_which(i)} is larger than {policy.max_bytes} bytes")
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ImageError(f"{_which(i)}: its data URL is not valid base64 ({e})") from None
    if url[:7].lower() == "file://":
        return _read_local(i, url, policy)
    return _fetch(i, url, policy)


def _read_local(i: int, url: str, policy: ImagePolicy) -> bytes:
    if policy.local_path is None:
        raise ImageError(f"{_which(i)}: file:// URLs are not allowed on this server; send a data:image/... URL")
    parsed = urllib.parse.urlsplit(url)
    if parsed.netloc not in ("", "localhost"):
        raise ImageError(f"{_which(i)}: a file:// URL names a local path (file:///dir/image.png)")
    root = os.path.realpath(policy.local_path)
    path = os.path.realpath(urllib.parse.unquote(parsed.path))
    if os.path.commonpath([root, path]) != root:
        raise ImageError(f"{_which(i)}: {parsed.path} is outside the directory this server may read images from")
    try:
        with open(path, "rb") as f:
            return f.read(policy.max_bytes + 1)
    except OSError as e:
        raise ImageError(f"{_which(i)}: cannot read {parsed.path} ({e.strerror})") from None


def _host_allowed(host: str, allowed: frozenset[str]) -> bool:
    host = host.lower().rstrip(".")
    return "*" in allowed or any(host == d or host.endswith("." + d) for d in allowed)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect could lead to a private address: it is an error instead


def _fetch(i: int, url: str, policy: ImagePolicy) -> bytes:
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname or ""
    if parsed.scheme.lower() not in ("http", "https") or not host:
        raise ImageError(f"{_which(i)}: send a data:image/... URL or an http(s) URL")
    if not _host_allowed(host, frozenset(d.lower() for d in policy.allowed_domains)):
        raise ImageError(
            f"{_which(i)}: fetching images from {host} is not allowed on this server; "
            "send the image as a data:image/...;base64 URL (the operator can allow hosts with --allowed-media-domains)"
        )
    try:
        infos = socket.getaddrinfo(host, parsed.port or (443 if parsed.scheme.lower() == "https" else 80))
    except OSError as e:
        raise ImageError(f"{_which(i)}: cannot resolve {host} ({e})") from None
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not addr.is_global:
            raise ImageError(f"{_which(i)}: {host} resolves to a non-public address; it is not fetched")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=policy.fetch_timeout_s) as resp:
            data: bytes = resp.read(policy.max_bytes + 1)
    except Exception as e:  # HTTP errors, timeouts, TLS: all the client's image's problem
        raise ImageError(f"{_which(i)}: fetching {url} failed ({e})") from None
    if len(data) > policy.max_bytes:
        raise ImageError(f"{_which(i)} is larger than {policy.max_bytes} bytes")
    return data


def _decode(i: int, data: bytes, policy: ImagePolicy) -> DecodedImage:
    from PIL import Image, UnidentifiedImageError

    if len(data) > policy.max_bytes:
        raise ImageError(f"{_which(i)} is larger than {policy.max_bytes} bytes")
    if not data:
        raise ImageError(f"{_which(i)} is empty")
    try:
        img = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ImageError(f"{_which(i)} is not an image in a supported format (PNG, JPEG, WebP, GIF, BMP)") from None
    if img.format not in _FORMATS:
        raise ImageError(f"{_which(i)} is {img.format}; send PNG, JPEG, WebP, GIF or BMP")
    width, height = img.size
    if width < 1 or height < 1 or width * height > policy.max_pixels:
        raise ImageError(f"{_which(i)} is {width}x{height} pixels; this server accepts at most {policy.max_pixels}")
    try:
        img.load()
        rgb = img.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError(f"{_which(i)} could not be decoded ({e})") from None
    return DecodedImage(rgb, hashlib.sha256(data).digest())
