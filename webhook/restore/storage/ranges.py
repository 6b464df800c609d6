"""Range listings of S3 by presigned URL (``verify: files`` of a large folder): the keys of one folder
after a name, page by page until a key passes the range's last name (``restore/verdict.py`` ``cut``
says which ranges; they are listed side by side).

ListObjectsV2 with ``prefix`` = the folder, ``delimiter`` = ``/`` (sub-folders come back as one entry
each), ``start-after`` = the name before the range's first and ``encoding-type=url`` (any key travels
in XML 1.0); each page is signed by s3fs's own client (as ``presigned.presign`` signs HEADs), sent over
the urllib3 pool of the HEADs' client (``presigned.HeadClient.get``), and read by the standard
library's C XML parser (``_xml``: an answer declaring a DTD is refused, so no entity is expanded):
botocore's parsing of a 1,000-key page costs ~0.1 s of CPU, this ~10 ms.
Used where presigned HEADs are (``presigned.usable``); every page within the lookup's deadline.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET  # nosec B405
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from webhook.restore.storage.presigned import EXPIRES_SECONDS

PAGE_KEYS = 1000
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class ListingFailed(Exception):
    """A listing page that is not a ListObjectsV2 answer (an error status, a body that does not parse)."""


@dataclass(frozen=True)
class RangePage:
    files: dict[str, int | None]  # name directly in the folder -> size
    greatest: str  # the greatest key or sub-folder the page holds, "" when none
    token: str | None  # where the next page starts (None: this was the last)


def params(bucket: str, prefix: str, after: str, token: str | None) -> dict[str, Any]:
    """ListObjectsV2's parameters of one page of the folder ``prefix`` (ends in ``/``) after ``after``."""
    out: dict[str, Any] = {
        "Bucket": bucket,
        "Prefix": prefix,
        "Delimiter": "/",
        "MaxKeys": PAGE_KEYS,
        "EncodingType": "url",
    }
    if token:
        out["ContinuationToken"] = token
    elif after:
        out["StartAfter"] = prefix + after
    return out


def presign(filesystem: Any, pages: Sequence[dict[str, Any]], seconds_left: float) -> list[str]:
    """Presigned GET URLs of ListObjectsV2 ``pages`` (their ``params``), signed together on the
    filesystem's event loop by its client (no request)."""
    from fsspec.asyn import sync

    async def sign_all() -> list[str]:
        await filesystem.set_session()

        async def one(page: dict[str, Any]) -> str:
            s3 = await filesystem.get_s3(page["Bucket"])
            url: str = await s3.generate_presigned_url(
                ClientMethod="list_objects_v2", Params=page, ExpiresIn=EXPIRES_SECONDS
            )
            return url

        return list(await asyncio.gather(*(one(p) for p in pages)))

    signed: list[str] = sync(filesystem.loop, sign_all, timeout=max(seconds_left, 0.001))
    return signed


def _xml(body: bytes) -> ET.Element:
    """``body`` parsed; one declaring a document type (never an S3 answer: entities) or not in UTF-8 or
    ASCII (where the check could not see one) is refused."""
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise ListingFailed("the answer declares a document type, which no S3 answer does")
    if b"\x00" in body or body.startswith((b"\xfe\xff", b"\xff\xfe")):
        raise ListingFailed("the answer is not UTF-8, as every S3 answer is")
    try:
        return ET.fromstring(body)  # noqa: S314  # nosec B314
    except ET.ParseError as exc:
        raise ListingFailed(f"the answer is not XML ({exc})") from None


def parse(body: bytes, prefix: str) -> RangePage:
    """One ListObjectsV2 page (``encoding-type=url``) of the folder ``prefix``. Its keys are decoded as
    S3 encodes them: form encoding, a space as ``+`` and a literal ``+`` as ``%2B`` (``unquote_plus``;
    moto writes ``%20`` for a space, which decodes the same)."""
    root = _xml(body)
    if root.tag != f"{_NS}ListBucketResult":
        raise ListingFailed(
            f"the listing answered {root.tag.removeprefix(_NS)[:100]}, not a ListBucketResult"
        )
    encoded = (root.findtext(f"{_NS}EncodingType") or "").lower() == "url"
    files: dict[str, int | None] = {}
    greatest = ""
    for entry in root.iter(f"{_NS}Contents"):
        key = entry.findtext(f"{_NS}Key") or ""
        key = unquote_plus(key) if encoded else key
        greatest = max(greatest, key)
        name = key[len(prefix) :] if key.startswith(prefix) else ""
        if name and "/" not in name:
            size = entry.findtext(f"{_NS}Size") or ""
            files[name] = int(size) if size.isdigit() else None
    for entry in root.iter(f"{_NS}CommonPrefixes"):
        folder = entry.findtext(f"{_NS}Prefix") or ""
        greatest = max(greatest, unquote_plus(folder) if encoded else folder)
    truncated = (root.findtext(f"{_NS}IsTruncated") or "").lower() == "true"
    token = root.findtext(f"{_NS}NextContinuationToken") if truncated else None
    if truncated and not token:
        raise ListingFailed("the listing is truncated and names no continuation token")
    return RangePage(files, greatest, token)


def error_code(body: bytes) -> str:
    """The S3 error code of an error answer's body ("" when it names none)."""
    try:
        return _xml(body).findtext("Code") or ""
    except ListingFailed:
        return ""
