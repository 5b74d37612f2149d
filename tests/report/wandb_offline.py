"""Reading a W&B offline run back (tests of `report --wandb` and of `track { wandb = ... }`):
its `.wandb` file's records, parsed with wandb's own protobufs."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def read_records(path: Path) -> list:
    """The records of a ``.wandb`` file: W&B's header (``:W&B``, magic, version), then the
    LevelDB log framing (32 KiB blocks; each chunk: CRC-32, length, type FULL/FIRST/MIDDLE/
    LAST), each record a ``wandb_internal_pb2.Record``."""
    from wandb.proto.wandb_internal_pb2 import Record

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    out, pos, block, pending = [], 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the block's tail is padding
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            break
        chunk = data[pos + 7:pos + 7 + length]
        assert zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF == crc
        pending += chunk
        if kind in (1, 4):  # FULL, LAST
            out.append(Record.FromString(pending))
            pending = b""
        pos += 7 + length
    return out


def item_key(item) -> str:
    """A history or summary item's key (newer wandb writes it as ``nested_key``)."""
    return item.key or "/".join(item.nested_key)
