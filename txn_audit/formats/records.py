"""What every ``.log`` entry shares, whatever its format (Kafka's ``Records``).

Every entry, a v2 record batch or a legacy message, starts the same way, big-endian::

    0 offset int64 (baseOffset of a v2 batch) | 8 size int32 (bytes after this field)
    12 (partitionLeaderEpoch of a v2 batch, CRC-32 of a legacy message) int32
    16 magic int8: 0 or 1 legacy message (``legacy``), 2 record batch (``record_batch``)

so a walk over a segment reads ``HEADER_SIZE_UP_TO_MAGIC`` bytes and dispatches on the magic.
The attributes of both formats keep the codec in bits 0-2 and the timestamp type in bit 3.
"""

from __future__ import annotations

from typing import Final

OFFSET_OFFSET: Final = 0
OFFSET_LENGTH: Final = 8
SIZE_OFFSET: Final = OFFSET_OFFSET + OFFSET_LENGTH  # 8
SIZE_LENGTH: Final = 4
LOG_OVERHEAD: Final = SIZE_OFFSET + SIZE_LENGTH  # 12: the framing before the size's bytes
MAGIC_OFFSET: Final = 16
MAGIC_LENGTH: Final = 1
HEADER_SIZE_UP_TO_MAGIC: Final = MAGIC_OFFSET + MAGIC_LENGTH  # 17

MAGIC_VALUE_V0: Final = 0
MAGIC_VALUE_V1: Final = 1
MAGIC_VALUE_V2: Final = 2

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
