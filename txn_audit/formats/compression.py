"""Record-area compression codecs of Kafka (attributes bits 0-2), built on ``cramjam`` only.

Codec ids and the stream formats Kafka's clients put on disk:

* 0 none.
* 1 gzip: a standard gzip stream (``GZIPOutputStream``); concatenated members are accepted.
* 2 snappy: the Java client wraps snappy-java's ``SnappyOutputStream``, i.e. the *xerial*
  framing: 8-byte magic ``82 'SNAPPY' 00``, int32 version, int32 minimum-compatible version,
  then blocks of ``int32 compressed length`` + raw snappy. snappy-java's reader falls back to
  plain raw snappy when the magic is absent, and librdkafka writes raw snappy, so both are
  decoded here (the magic decides). A header repeated mid-stream (concatenated streams) is
  skipped, as snappy-java does.
* 3 lz4: the LZ4 *frame* format. Old (magic 0) writers computed the frame-descriptor checksum
  (HC byte) wrongly, and Kafka ignores it for magic 0; ``decompress(..., magic=0)`` does too.
* 4 zstd: standard zstd frames (only legal with magic 2).

Every failure is raised as ``CorruptInputError(kind="decompression_error")`` so that callers
can turn it into a ``decode_issues`` row; ``position`` is whatever the caller passes (the
absolute byte offset of the compressed data inside the file).
"""

from __future__ import annotations

import struct
from typing import Final

import cramjam

from txn_audit.errors import CorruptInputError

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
CODEC_NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")  # magic, version, minimum compatible version
_XERIAL_VERSION: Final = 1
_XERIAL_BLOCK: Final = 32 * 1024  # snappy-java's default block size, which Kafka uses
_I32: Final = struct.Struct(">i")
_ZSTD_LEVEL: Final = 3  # Kafka's default zstd level
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"

BufferLike = bytes | bytearray | memoryview

_KIND = "decompression_error"


def decompress(codec: int, data: BufferLike, *, position: int = 0, magic: int = 2) -> bytes:
    """Decompress one record area (v2) or wrapper value (v0/v1) written with ``codec``.

    ``position`` is only used in error reports; ``magic`` enables Kafka's magic-0 leniency for
    the broken LZ4 header checksum.
    """
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data, position)
        if codec == LZ4:
            return _lz4_decompress(data, magic)
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptInputError:
        raise
    except Exception as err:  # cramjam.DecompressionError, ValueError, TypeError, ...
        raise CorruptInputError(_KIND, position, f"{_codec_name(codec)}: {err}") from err
    raise CorruptInputError(_KIND, position, f"unknown compression codec {codec}")


def compress(codec: int, data: bytes, *, xerial: bool = True) -> bytes:
    """Compress ``data`` as Kafka's Java client would (snappy in xerial framing unless
    ``xerial=False``, which gives librdkafka-style raw snappy)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        if not xerial:
            return bytes(cramjam.snappy.compress_raw(data))
        parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION)]
        view = memoryview(data)
        for i in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[i : i + _XERIAL_BLOCK]))
            parts.append(_I32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == LZ4:
        # Kafka's Lz4BlockOutputStream writes independent blocks and no content checksum.
        comp = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
        comp.compress(data)
        return bytes(comp.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise ValueError(f"unknown compression codec {codec}")


def is_xerial_snappy(data: BufferLike) -> bool:
    """Whether a snappy stream carries snappy-java's xerial header (else it is raw snappy)."""
    return len(data) >= _XERIAL_HEADER.size and bytes(data[:8]) == XERIAL_MAGIC


def _snappy_decompress(data: BufferLike, position: int) -> bytes:
    if not is_xerial_snappy(data):
        return bytes(cramjam.snappy.decompress_raw(data))
    view = memoryview(data)
    n = len(view)
    pos = _XERIAL_HEADER.size
    out: list[bytes] = []
    while pos < n:
        if n - pos >= _XERIAL_HEADER.size and bytes(view[pos : pos + 8]) == XERIAL_MAGIC:
            pos += _XERIAL_HEADER.size  # a concatenated stream starts here
            continue
        if n - pos < 4:
            raise CorruptInputError(_KIND, position + pos, f"snappy: {n - pos} stray bytes after the last block")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise CorruptInputError(
                _KIND, position + pos - 4, f"snappy: block length {length} with {n - pos} bytes left"
            )
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(out)


def _lz4_decompress(data: BufferLike, magic: int) -> bytes:
    try:
        return bytes(cramjam.lz4.decompress(data))
    except Exception as err:
        if magic != 0 or "headerChecksum" not in str(err):
            raise
        # Magic-0 writers got the HC byte wrong (hashed the magic too). Kafka skips the check;
        # cramjam cannot, so find the one HC value it accepts (cramjam has no xxhash to compute it).
        if len(data) < 7 or bytes(data[:4]) != _LZ4_MAGIC:
            raise
        fixed = bytearray(data)
        hc_at = 6 + (8 if fixed[4] & 0x08 else 0) + (4 if fixed[4] & 0x01 else 0)
        if hc_at >= len(fixed):
            raise
        for guess in range(256):
            fixed[hc_at] = guess
            try:
                return bytes(cramjam.lz4.decompress(fixed))
            except Exception as again:
                if "headerChecksum" not in str(again):
                    raise
        raise err


def _codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"codec {codec}")
