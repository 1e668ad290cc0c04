"""Content parts: text, images and documents, built from what an agent has at hand.

    user("what is this?", image=Path("shot.png"))                 # a file: its bytes, media type sniffed
    user("compare them", image=[png_bytes, "https://example.com/b.jpg"])
    user("summarise", document=Path("report.pdf"))
    user("check", document=document_part(text=notes, title="notes"), cache="1h")
    user(parts=[text_part(context, cache=True), text_part("and now: what changed?")])

A source is a ``Path`` (the file's bytes), ``bytes`` (inline), or a ``str``, which is always a URL
(``https://``, ``http://`` or ``data:``; a file is a ``Path``, so a name is never taken for one).
Media types come from the bytes (PNG, JPEG, GIF, WebP and PDF signatures), then from the file's
suffix; what neither tells is refused here (``ValueError``), never sent untyped. A document file
that is text (``.txt``, ``.md``) is sent as a text document. The sidecar checks the rest (limits,
the media types a model takes) and refuses a part by its index.

``cache`` marks a cache breakpoint: ``True`` (the provider's default lifetime), ``"5m"`` or ``"1h"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, TypeAlias

from sidecar_contract.v1 import sidecar_pb2 as pb

__all__ = [
    "Cache",
    "Detail",
    "DocumentSource",
    "ImageSource",
    "cache_breakpoint",
    "document_part",
    "image_part",
    "media_type_of",
    "text_part",
]

Cache: TypeAlias = bool | Literal["5m", "1h"] | pb.CacheBreakpoint
Detail: TypeAlias = Literal["auto", "low", "high"]
ImageSource: TypeAlias = Path | bytes | str | pb.ImagePart | pb.Part
DocumentSource: TypeAlias = Path | bytes | str | pb.DocumentPart | pb.Part

PDF = "application/pdf"
TEXT = "text/plain"
URL_PREFIXES = ("https://", "http://", "data:")
IMAGE_SUFFIXES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
TEXT_SUFFIXES = (".txt", ".text", ".md", ".markdown")
_TTLS = {"5m": pb.CACHE_TTL_5M, "1h": pb.CACHE_TTL_1H}
_DETAILS = {"auto": pb.IMAGE_DETAIL_AUTO, "low": pb.IMAGE_DETAIL_LOW, "high": pb.IMAGE_DETAIL_HIGH}


def media_type_of(data: bytes) -> str:
    """The media type the bytes' signature says (PNG, JPEG, GIF, WebP, PDF); ``""`` when none."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return PDF
    return ""


def cache_breakpoint(cache: Cache) -> pb.CacheBreakpoint | None:
    """``True`` / ``"5m"`` / ``"1h"`` / a ``CacheBreakpoint`` as a breakpoint; ``False``: none."""
    if isinstance(cache, pb.CacheBreakpoint):
        return cache
    if cache is True:
        return pb.CacheBreakpoint()
    if cache is False:
        return None
    if isinstance(cache, str) and cache in _TTLS:
        return pb.CacheBreakpoint(ttl=_TTLS[cache])
    raise ValueError(f"cache is True, '5m', '1h' or a CacheBreakpoint, not {cache!r}")


def _with_cache(part: pb.Part, cache: Cache | None) -> pb.Part:
    if cache is not None and (breakpoint := cache_breakpoint(cache)) is not None:
        part.cache.CopyFrom(breakpoint)
    return part


def _url(source: str, what: str) -> str:
    if not source.startswith(URL_PREFIXES):
        raise ValueError(
            f"{what}: a str is a URL (https://, http:// or data:), not {source[:60]!r}; pass a Path for a file"
        )
    return source


def text_part(text: str, *, cache: Cache | None = None) -> pb.Part:
    """A text part; ``cache``: the prompt up to and including it is a cache breakpoint."""
    return _with_cache(pb.Part(text=text), cache)


def image_part(
    source: Path | bytes | str,
    *,
    media_type: str = "",
    detail: Detail | None = None,
    cache: Cache | None = None,
) -> pb.Part:
    """An image: a file, inline bytes or a URL; ``media_type`` unless the bytes or the suffix tell it."""
    if isinstance(source, str):
        image = pb.ImagePart(url=_url(source, "image_part"), media_type=media_type)
    else:
        data = source.read_bytes() if isinstance(source, Path) else bytes(source)
        if not media_type:
            media_type = media_type_of(data)
            if not media_type.startswith("image/") and isinstance(source, Path):
                media_type = IMAGE_SUFFIXES.get(source.suffix.lower(), "")
            if not media_type.startswith("image/"):
                named = f" {str(source)!r}" if isinstance(source, Path) else ""
                raise ValueError(
                    f"image_part: the bytes of{named or ' the image'} are no PNG, JPEG, GIF or WebP; pass media_type"
                )
        image = pb.ImagePart(data=data, media_type=media_type)
    if detail is not None:
        if detail not in _DETAILS:
            raise ValueError(f"image_part: detail is 'auto', 'low' or 'high', not {detail!r}")
        image.detail = _DETAILS[detail]
    return _with_cache(pb.Part(image=image), cache)


def document_part(
    source: Path | bytes | str | None = None,
    *,
    text: str | None = None,
    media_type: str = "",
    title: str = "",
    cache: Cache | None = None,
) -> pb.Part:
    """A document: a PDF (a file, inline bytes or a URL), or plain text (``text=``, or a .txt/.md file)."""
    if (source is None) == (text is None):
        raise ValueError("document_part takes a source (a Path, bytes or a URL) or text=, one of them")
    if text is not None:
        doc = pb.DocumentPart(text=text, media_type=media_type or TEXT, title=title)
    elif isinstance(source, str):
        doc = pb.DocumentPart(url=_url(source, "document_part"), media_type=media_type, title=title)
    else:
        assert source is not None
        data = source.read_bytes() if isinstance(source, Path) else bytes(source)
        suffix = source.suffix.lower() if isinstance(source, Path) else ""
        if media_type == TEXT or (not media_type and media_type_of(data) != PDF and suffix in TEXT_SUFFIXES):
            doc = pb.DocumentPart(text=data.decode("utf-8"), media_type=TEXT, title=title)
        elif media_type or media_type_of(data) == PDF or suffix == ".pdf":
            doc = pb.DocumentPart(data=data, media_type=media_type or PDF, title=title)
        else:
            named = f"{str(source)!r} is" if isinstance(source, Path) else "the bytes are"
            raise ValueError(
                f"document_part: {named} no PDF and no text file ({', '.join(TEXT_SUFFIXES)}); "
                "pass media_type, or a text document as text="
            )
    return _with_cache(pb.Part(document=doc), cache)


def _as_list(value: object) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def image_parts(images: ImageSource | Sequence[ImageSource] | None) -> list[pb.Part]:
    """Each image source as its part (a part or an ImagePart as it is)."""
    out = []
    for source in _as_list(images):
        if isinstance(source, pb.Part):
            out.append(source)
        elif isinstance(source, pb.ImagePart):
            out.append(pb.Part(image=source))
        elif isinstance(source, (Path, bytes, bytearray, memoryview, str)):
            out.append(image_part(source if isinstance(source, (Path, str)) else bytes(source)))
        else:
            raise TypeError(
                f"an image is a Path, bytes, a URL str, an ImagePart or a Part, not {type(source).__name__}"
            )
    return out


def document_parts(documents: DocumentSource | Sequence[DocumentSource] | None) -> list[pb.Part]:
    """Each document source as its part (a part or a DocumentPart as it is)."""
    out = []
    for source in _as_list(documents):
        if isinstance(source, pb.Part):
            out.append(source)
        elif isinstance(source, pb.DocumentPart):
            out.append(pb.Part(document=source))
        elif isinstance(source, (Path, bytes, bytearray, memoryview, str)):
            out.append(document_part(source if isinstance(source, (Path, str)) else bytes(source)))
        else:
            raise TypeError(
                f"a document is a Path, bytes, a URL str, a DocumentPart or a Part, not {type(source).__name__}"
            )
    return out
