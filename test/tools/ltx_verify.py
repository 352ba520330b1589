#!/usr/bin/env python3
"""An independent verifier of LTX files (superfly/ltx, format version 3).

Written from the format's definition (the superfly/ltx format description and
its Go encoder/decoder), not from this repository's TypeScript code, so that it
can catch mistakes of our encoder. Standard library only: the CRC-64 ISO, the
xxHash32, the LZ4 block decoder and the LZ4 frame decoder are implemented here.

Usage:
  ltx_verify.py file FILE...
      Decode each file fully and check it. Prints one JSON line per good file;
      for a bad one, a message on stderr. Exit status 1 if any file is bad.
  ltx_verify.py chain [--out DB] FILE...
      The files in application order, the first a snapshot (min TXID 1). Checks
      each file as `file` does, then TXID contiguity and, for files that track
      checksums, the pre-apply checksum against the database built so far and
      the post-apply checksum against the database after applying the file.
      Prints one JSON summary line; --out writes the final database image.
      Beyond the format's own rules, a file that grows the database must carry
      every new page (SQLite writes each page it adds), or the chain fails.
  ltx_verify.py dbchecksum --page-size N [--pages] DB
      The LTX database checksum of a raw database file (and, with --pages, the
      checksum of each page), for cross-checking other implementations.

The format, as checked here:
  Header (100 bytes, big-endian): magic "LTX1", flags u32 (only 0x2 "no
  checksum" is valid), page size u32 (power of two, 512..65536), commit u32
  (database size in pages after applying), min TXID u64, max TXID u64,
  timestamp i64 (ms), pre-apply checksum u64, WAL offset i64, WAL size i64, WAL
  salt-1 u32, WAL salt-2 u32, node id u64, then 20 bytes that version 3 writes
  as zero. Rules: min and max TXID non-zero, min <= max; WAL offset and size
  not negative; salts require a WAL offset; a WAL size requires a WAL offset; a
  snapshot (min TXID 1) has pre-apply checksum 0; with "no checksum" the
  pre-apply checksum is 0; otherwise it is non-zero with the checksum flag
  (bit 63) set.
  Page block: frames in ascending page number order. Frame: pgno u32, flags u16;
  flag 0x1 means a u32 compressed size follows, then an LZ4 block; flags 0 is
  the legacy encoding, an LZ4 frame without size prefix. Every page decompresses
  to exactly the page size. pgno <= commit, never the lock page (the page that
  holds byte 0x40000000). A snapshot holds every page 1..commit except the lock
  page. A zero six-byte page header ends the block.
  Page index: (pgno, frame offset, frame size) as unsigned varints per page,
  sorted by pgno, ended by a zero varint, then a u64 holding the byte size of
  the varints (terminator included).
  Trailer (16 bytes): post-apply checksum u64, file checksum u64. With "no
  checksum" the post-apply checksum is 0, otherwise non-zero with bit 63 set;
  a zero-page database (commit 0) has post-apply checksum exactly bit 63.
  File checksum: bit 63 | CRC-64 ISO over the header, each page header and
  size prefix as stored followed by the *decompressed* page data, the zero
  page header, the page index with its size field, and the post-apply
  checksum field.
  Database checksum: bit 63 | XOR over the pages 1..commit except the lock page
  of (bit 63 | CRC-64 ISO(pgno as big-endian u32 + page data)); bit 63 alone
  for an empty database.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from dataclasses import dataclass, field

MAGIC = b"LTX1"
MAGIC_V4 = b"LTX4"
HEADER_SIZE = 100
PAGE_HEADER_SIZE = 6
TRAILER_SIZE = 16
CHECKSUM_FLAG = 1 << 63
HEADER_FLAG_NO_CHECKSUM = 0x2
HEADER_FLAG_MASK = HEADER_FLAG_NO_CHECKSUM
PAGE_FLAG_SIZE = 0x1
PENDING_BYTE = 0x40000000
MAX_PAGE_SIZE = 65536
U64 = (1 << 64) - 1
FILENAME_RE = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.ltx$")


class VerifyError(Exception):
    """A failed check: `check` names it, the message says what was found."""

    def __init__(self, check: str, message: str):
        super().__init__(message)
        self.check = check


# --- CRC-64 ISO (Go's hash/crc64 with crc64.ISO: reflected, poly 0xD800000000000000,
# register initialised to all ones and inverted at the end). ---

def _crc64_table() -> list[int]:
    poly = 0xD800000000000000
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC64_TABLE = _crc64_table()


def _slice_tables() -> list[list[int]]:
    # Slicing-by-8: table k gives the effect of a byte followed by k zero bytes.
    tables = [_CRC64_TABLE]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(v >> 8) ^ _CRC64_TABLE[v & 0xFF] for v in prev])
    return tables


_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _slice_tables()


class Crc64:
    """Incremental CRC-64 ISO."""

    def __init__(self) -> None:
        self._reg = U64

    def update(self, data: bytes) -> None:
        reg = self._reg
        n8 = len(data) & ~7
        if n8:
            t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7
            for (x,) in struct.iter_unpack("<Q", memoryview(data)[:n8]):
                x ^= reg
                reg = (t7[x & 0xFF] ^ t6[(x >> 8) & 0xFF] ^ t5[(x >> 16) & 0xFF]
                       ^ t4[(x >> 24) & 0xFF] ^ t3[(x >> 32) & 0xFF] ^ t2[(x >> 40) & 0xFF]
                       ^ t1[(x >> 48) & 0xFF] ^ t0[x >> 56])
        t = _CRC64_TABLE
        for b in memoryview(data)[n8:]:
            reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
        self._reg = reg

    def value(self) -> int:
        return self._reg ^ U64


def crc64(data: bytes) -> int:
    h = Crc64()
    h.update(data)
    return h.value()


# --- xxHash32 (for LZ4 frame header, block and content checksums). ---

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i <= n - 16:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl32((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl32((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl32((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl32((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl32((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl32((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# --- LZ4 block format. ---

def lz4_block_decompress(src: bytes, max_size: int, exact: bool, history: bytes = b"") -> bytes:
    """Decodes one LZ4 block. `history` is earlier output a dependent block may
    reference. With `exact`, the output must be exactly `max_size` bytes.
    Enforces the block format's end-of-block rules: the last sequence is
    literals only, the last 5 bytes are literals, the last match starts at
    least 12 bytes before the end."""
    n = len(src)
    if n == 0:
        raise VerifyError("lz4", "empty LZ4 block")
    out = bytearray(history)
    base = len(history)
    i = 0
    last_match_start = -1  # output position (within this block) of the last match
    last_literals = 0
    while True:
        if i >= n:
            raise VerifyError("lz4", "block ends after a match (the last sequence must be literals)")
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                if i >= n:
                    raise VerifyError("lz4", "block ends inside a literal length")
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        if i + lit > n:
            raise VerifyError("lz4", f"literals run past the end of the block (at input {i})")
        out += src[i:i + lit]
        i += lit
        if len(out) - base > max_size:
            raise VerifyError("lz4", f"block decompresses past {max_size} bytes")
        if i == n:
            last_literals = lit
            break
        if i + 2 > n:
            raise VerifyError("lz4", "block ends inside a match offset")
        offset = src[i] | (src[i + 1] << 8)
        i += 2
        if offset == 0:
            raise VerifyError("lz4", f"match offset 0 at input {i - 2}")
        if offset > len(out):
            raise VerifyError("lz4", f"match offset {offset} reaches before the start of the data")
        ml = token & 15
        if ml == 15:
            while True:
                if i >= n:
                    raise VerifyError("lz4", "block ends inside a match length")
                b = src[i]
                i += 1
                ml += b
                if b != 255:
                    break
        ml += 4
        last_match_start = len(out) - base
        if last_match_start + ml > max_size:
            raise VerifyError("lz4", f"block decompresses past {max_size} bytes")
        start = len(out) - offset
        if offset >= ml:
            out += out[start:start + ml]
        else:
            pattern = bytes(out[start:])
            out += (pattern * (ml // offset + 1))[:ml]
    size = len(out) - base
    if exact and size != max_size:
        raise VerifyError("lz4", f"block decompresses to {size} bytes, expected {max_size}")
    if last_match_start >= 0:
        if last_literals < 5:
            raise VerifyError(
                "lz4",
                f"end-of-block rule: the last sequence has {last_literals} literals (at least 5 required)",
            )
        if last_match_start > size - 12:
            raise VerifyError(
                "lz4",
                f"end-of-block rule: the last match starts {size - last_match_start} bytes before "
                "the end (at least 12 required)",
            )
    return bytes(out[base:])


_LZ4_FRAME_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def lz4_frame_decompress(buf: bytes, pos: int, limit: int, expected_size: int) -> tuple[bytes, int]:
    """Decodes one LZ4 frame starting at buf[pos] (not reading at or past
    `limit`); returns the content and the position after the frame."""

    def need(p: int, k: int, what: str) -> None:
        if p + k > limit:
            raise VerifyError("lz4-frame", f"frame truncated in {what}")

    need(pos, 7, "frame header")
    (magic,) = struct.unpack_from("<I", buf, pos)
    if magic != _LZ4_FRAME_MAGIC:
        raise VerifyError("lz4-frame", f"bad LZ4 frame magic 0x{magic:08x} (page flags 0 mean an LZ4 frame)")
    flg, bd = buf[pos + 4], buf[pos + 5]
    if flg >> 6 != 1:
        raise VerifyError("lz4-frame", f"unsupported LZ4 frame version {flg >> 6}")
    if flg & 0x2:
        raise VerifyError("lz4-frame", "reserved FLG bit set")
    if flg & 0x1:
        raise VerifyError("lz4-frame", "frames with a dictionary id are not supported")
    b_indep, b_checksum, c_size, c_checksum = (flg >> 5) & 1, (flg >> 4) & 1, (flg >> 3) & 1, (flg >> 2) & 1
    if bd & 0x8F:
        raise VerifyError("lz4-frame", f"reserved BD bits set (0x{bd:02x})")
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if block_max is None:
        raise VerifyError("lz4-frame", f"invalid block maximum size code {(bd >> 4) & 7}")
    desc_end = pos + 6
    if c_size:
        need(desc_end, 8, "content size")
        (content_size,) = struct.unpack_from("<Q", buf, desc_end)
        desc_end += 8
        if content_size != expected_size:
            raise VerifyError("lz4-frame", f"frame content size {content_size}, expected {expected_size}")
    need(desc_end, 1, "header checksum")
    hc = buf[desc_end]
    want_hc = (xxh32(bytes(buf[pos + 4:desc_end])) >> 8) & 0xFF
    if hc != want_hc:
        raise VerifyError("lz4-frame", f"frame header checksum 0x{hc:02x}, computed 0x{want_hc:02x}")
    p = desc_end + 1
    out = bytearray()
    while True:
        need(p, 4, "block size")
        (bsize,) = struct.unpack_from("<I", buf, p)
        p += 4
        if bsize == 0:
            break
        raw = bsize >> 31
        bsize &= 0x7FFFFFFF
        if bsize > block_max:
            raise VerifyError("lz4-frame", f"block of {bsize} bytes exceeds the frame's maximum {block_max}")
        need(p, bsize, "block data")
        block = bytes(buf[p:p + bsize])
        p += bsize
        if b_checksum:
            need(p, 4, "block checksum")
            (bc,) = struct.unpack_from("<I", buf, p)
            p += 4
            if bc != xxh32(block):
                raise VerifyError("lz4-frame", "block checksum mismatch")
        room = min(block_max, expected_size - len(out))
        if raw:
            if bsize > room:
                raise VerifyError("lz4-frame", f"frame content exceeds {expected_size} bytes")
            out += block
        else:
            history = b"" if b_indep else bytes(out[-65536:])
            out += lz4_block_decompress(block, room, exact=False, history=history)
    if c_checksum:
        need(p, 4, "content checksum")
        (cc,) = struct.unpack_from("<I", buf, p)
        p += 4
        if cc != xxh32(bytes(out)):
            raise VerifyError("lz4-frame", "frame content checksum mismatch")
    if len(out) != expected_size:
        raise VerifyError("lz4-frame", f"frame content is {len(out)} bytes, expected {expected_size}")
    return bytes(out), p


# --- LTX. ---

def lock_pgno(page_size: int) -> int:
    return PENDING_BYTE // page_size + 1


def page_checksum(pgno: int, data: bytes) -> int:
    return CHECKSUM_FLAG | crc64(struct.pack(">I", pgno) + data)


def hex16(v: int) -> str:
    return f"{v:016x}"


def read_uvarint(buf: bytes, pos: int, limit: int, what: str) -> tuple[int, int]:
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= limit:
            raise VerifyError("page-index", f"{what} varint runs past the page index (at offset {start})")
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:
            raise VerifyError("page-index", f"{what} varint overflows 64 bits (at offset {start})")
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if b == 0 and pos - start > 1:
                raise VerifyError("page-index", f"{what} varint is not minimally encoded (at offset {start})")
            return value, pos
        shift += 7
        if shift > 63:
            raise VerifyError("page-index", f"{what} varint longer than 10 bytes (at offset {start})")


@dataclass
class Frame:
    pgno: int
    offset: int
    size: int
    encoding: str
    data: bytes


@dataclass
class LtxFile:
    path: str
    flags: int
    page_size: int
    commit: int
    min_txid: int
    max_txid: int
    timestamp: int
    pre_apply: int
    wal_offset: int
    wal_size: int
    wal_salt1: int
    wal_salt2: int
    node_id: int
    post_apply: int
    file_checksum: int
    frames: list[Frame] = field(default_factory=list)

    @property
    def snapshot(self) -> bool:
        return self.min_txid == 1

    @property
    def no_checksum(self) -> bool:
        return bool(self.flags & HEADER_FLAG_NO_CHECKSUM)

    def summary(self) -> dict:
        encodings = sorted({f.encoding for f in self.frames})
        return {
            "file": self.path,
            "min_txid": self.min_txid,
            "max_txid": self.max_txid,
            "commit": self.commit,
            "page_size": self.page_size,
            "pages": len(self.frames),
            "pre_apply": hex16(self.pre_apply),
            "post_apply": hex16(self.post_apply),
            "flags": self.flags,
            "timestamp": self.timestamp,
            "wal_offset": self.wal_offset,
            "wal_size": self.wal_size,
            "wal_salt1": self.wal_salt1,
            "wal_salt2": self.wal_salt2,
            "node_id": hex16(self.node_id),
            "file_checksum": hex16(self.file_checksum),
            "encoding": "+".join(encodings) if encodings else "none",
        }


def decode_ltx(path: str, buf: bytes) -> LtxFile:
    """Decodes and checks one LTX file; raises VerifyError on the first problem."""
    if len(buf) < HEADER_SIZE + PAGE_HEADER_SIZE + 1 + 8 + TRAILER_SIZE:
        raise VerifyError("size", f"{len(buf)} bytes is too short for an LTX file")
    magic = bytes(buf[0:4])
    if magic == MAGIC_V4:
        raise VerifyError("magic", "LTX4 (version 4, encrypted) files are not supported")
    if magic != MAGIC:
        raise VerifyError("magic", f"magic {magic!r}, expected b'LTX1'")
    (flags, page_size, commit, min_txid, max_txid, timestamp, pre_apply, wal_offset, wal_size,
     salt1, salt2, node_id) = struct.unpack_from(">IIIQQqQqqIIQ", buf, 4)
    trailer_at = len(buf) - TRAILER_SIZE
    post_apply, file_checksum = struct.unpack_from(">QQ", buf, trailer_at)
    f = LtxFile(path, flags, page_size, commit, min_txid, max_txid, timestamp, pre_apply,
                wal_offset, wal_size, salt1, salt2, node_id, post_apply, file_checksum)

    # Header rules.
    if flags & ~HEADER_FLAG_MASK:
        raise VerifyError("header", f"invalid flags 0x{flags:08x} (only 0x00000002 is defined)")
    if page_size < 512 or page_size > MAX_PAGE_SIZE or page_size & (page_size - 1):
        raise VerifyError("header", f"invalid page size {page_size}")
    if min_txid == 0:
        raise VerifyError("header", "min TXID is 0")
    if max_txid == 0:
        raise VerifyError("header", "max TXID is 0")
    if min_txid > max_txid:
        raise VerifyError("header", f"TXIDs out of order: min {min_txid} > max {max_txid}")
    if wal_offset < 0:
        raise VerifyError("header", f"negative WAL offset {wal_offset}")
    if wal_size < 0:
        raise VerifyError("header", f"negative WAL size {wal_size}")
    if (salt1 or salt2) and wal_offset == 0:
        raise VerifyError("header", "WAL salts set without a WAL offset")
    if wal_offset == 0 and wal_size != 0:
        raise VerifyError("header", "WAL size set without a WAL offset")
    if any(buf[80:HEADER_SIZE]):
        raise VerifyError("header", f"reserved header bytes 80..99 are not zero: {bytes(buf[80:HEADER_SIZE]).hex()}")
    if min_txid == 1:
        if pre_apply != 0:
            raise VerifyError("header", f"snapshot has pre-apply checksum {hex16(pre_apply)}, must be 0")
    elif flags & HEADER_FLAG_NO_CHECKSUM:
        if pre_apply != 0:
            raise VerifyError("header", f"pre-apply checksum {hex16(pre_apply)} with the no-checksum flag")
    else:
        if pre_apply == 0:
            raise VerifyError("header", "pre-apply checksum is 0 on a non-snapshot file")
        if not pre_apply & CHECKSUM_FLAG:
            raise VerifyError("header", f"pre-apply checksum {hex16(pre_apply)} lacks the checksum flag bit")

    h = Crc64()
    h.update(buf[0:HEADER_SIZE])
    lock = lock_pgno(page_size)
    pos = HEADER_SIZE
    prev = 0
    while True:
        if pos + PAGE_HEADER_SIZE > trailer_at:
            raise VerifyError("page-block", "page block runs into the trailer without a zero page header")
        pgno, pflags = struct.unpack_from(">IH", buf, pos)
        if pgno == 0 and pflags == 0:
            h.update(buf[pos:pos + PAGE_HEADER_SIZE])
            pos += PAGE_HEADER_SIZE
            break
        where = f"page frame {len(f.frames)} (pgno {pgno}) at offset {pos}"
        if pgno == 0:
            raise VerifyError("page-header", f"{where}: page number 0 with flags 0x{pflags:04x}")
        if pflags & ~PAGE_FLAG_SIZE:
            raise VerifyError("page-header", f"{where}: invalid page flags 0x{pflags:04x}")
        if pgno > commit:
            raise VerifyError("page-header", f"{where}: page number beyond commit {commit}")
        if pgno == lock:
            raise VerifyError("page-header", f"{where}: the lock page must not be stored")
        if min_txid == 1:
            want = 1 if prev == 0 else prev + 1
            if want == lock:
                want += 1
            if pgno != want:
                raise VerifyError("snapshot", f"{where}: expected page {want} (a snapshot holds every page in order)")
        elif pgno <= prev:
            raise VerifyError("page-order", f"{where}: not after page {prev}")
        frame_start = pos
        h.update(buf[pos:pos + PAGE_HEADER_SIZE])
        pos += PAGE_HEADER_SIZE
        try:
            if pflags & PAGE_FLAG_SIZE:
                if pos + 4 > trailer_at:
                    raise VerifyError("page-frame", "truncated size prefix")
                (csize,) = struct.unpack_from(">I", buf, pos)
                h.update(buf[pos:pos + 4])
                pos += 4
                if csize == 0:
                    raise VerifyError("page-frame", "compressed size 0")
                if pos + csize > trailer_at:
                    raise VerifyError("page-frame", f"compressed size {csize} runs past the page block")
                data = lz4_block_decompress(bytes(buf[pos:pos + csize]), page_size, exact=True)
                pos += csize
                encoding = "block"
            else:
                data, pos = lz4_frame_decompress(buf, pos, trailer_at, page_size)
                encoding = "frame"
        except VerifyError as e:
            raise VerifyError(e.check, f"{where}: {e}") from None
        h.update(data)
        f.frames.append(Frame(pgno, frame_start, pos - frame_start, encoding, data))
        prev = pgno
    if min_txid == 1:
        expected_last = commit if commit != lock else commit - 1
        if prev != expected_last:
            raise VerifyError(
                "snapshot", f"snapshot ends at page {prev} but commit is {commit}: pages are missing")

    # Page index.
    index_start = pos
    index_limit = trailer_at - 8
    entries = []
    while True:
        pgno, pos = read_uvarint(buf, pos, index_limit, "pgno")
        if pgno == 0:
            break
        off, pos = read_uvarint(buf, pos, index_limit, "offset")
        size, pos = read_uvarint(buf, pos, index_limit, "size")
        entries.append((pgno, off, size))
    index_len = pos - index_start
    if pos + 8 > trailer_at:
        raise VerifyError("page-index", "no room for the page index size field")
    (stored_len,) = struct.unpack_from(">Q", buf, pos)
    pos += 8
    if stored_len != index_len:
        raise VerifyError("page-index", f"size field says {stored_len} bytes, the index has {index_len}")
    if pos != trailer_at:
        raise VerifyError("page-index", f"{trailer_at - pos} unexpected bytes between the page index and the trailer")
    want_entries = [(fr.pgno, fr.offset, fr.size) for fr in f.frames]
    if entries != want_entries:
        for k in range(max(len(entries), len(want_entries))):
            got = entries[k] if k < len(entries) else None
            want = want_entries[k] if k < len(want_entries) else None
            if got != want:
                raise VerifyError(
                    "page-index",
                    f"entry {k} is (pgno, offset, size) {got}, the page block has {want}")
    h.update(buf[index_start:trailer_at])
    h.update(buf[trailer_at:trailer_at + 8])

    # Trailer.
    computed = CHECKSUM_FLAG | h.value()
    if file_checksum != computed:
        raise VerifyError(
            "file-checksum", f"file checksum mismatch: trailer {hex16(file_checksum)}, computed {hex16(computed)}")
    if flags & HEADER_FLAG_NO_CHECKSUM:
        if post_apply != 0:
            raise VerifyError("trailer", f"post-apply checksum {hex16(post_apply)} with the no-checksum flag")
    else:
        if post_apply == 0:
            raise VerifyError("trailer", "post-apply checksum is 0")
        if not post_apply & CHECKSUM_FLAG:
            raise VerifyError("trailer", f"post-apply checksum {hex16(post_apply)} lacks the checksum flag bit")
        if commit == 0 and post_apply != CHECKSUM_FLAG:
            raise VerifyError("trailer", f"empty database (commit 0) needs post-apply checksum {hex16(CHECKSUM_FLAG)}")
        if min_txid == 1:
            chk = CHECKSUM_FLAG
            for fr in f.frames:
                chk ^= page_checksum(fr.pgno, fr.data)
            chk |= CHECKSUM_FLAG
            if chk != post_apply:
                raise VerifyError(
                    "post-apply",
                    f"snapshot post-apply checksum {hex16(post_apply)}, its pages give {hex16(chk)}")

    # The file name, when it has the standard form.
    m = FILENAME_RE.match(os.path.basename(path))
    if m:
        name_min, name_max = int(m.group(1), 16), int(m.group(2), 16)
        if (name_min, name_max) != (min_txid, max_txid):
            raise VerifyError(
                "filename", f"name says TXIDs {name_min}-{name_max}, header says {min_txid}-{max_txid}")
    return f


class Database:
    """A database image built by applying LTX files, with its running checksum
    kept per page."""

    def __init__(self, page_size: int):
        self.page_size = page_size
        self.lock = lock_pgno(page_size)
        self.pages: dict[int, bytes] = {}
        self.sums: dict[int, int] = {}
        self.commit = 0

    def checksum(self) -> int:
        chk = CHECKSUM_FLAG
        for s in self.sums.values():
            chk ^= s
        return chk | CHECKSUM_FLAG

    def apply(self, f: LtxFile) -> None:
        old_commit = self.commit
        if f.snapshot:
            self.pages.clear()
            self.sums.clear()
            old_commit = 0
        for fr in f.frames:
            self.pages[fr.pgno] = fr.data
            self.sums[fr.pgno] = page_checksum(fr.pgno, fr.data)
        for pgno in [p for p in self.pages if p > f.commit]:
            del self.pages[pgno]
            del self.sums[pgno]
        for pgno in range(old_commit + 1, f.commit + 1):
            if pgno != self.lock and pgno not in self.pages:
                raise VerifyError(
                    "growth", f"the database grows from {old_commit} to {f.commit} pages but page {pgno} is in no file")
        self.commit = f.commit

    def image(self) -> bytes:
        zero = bytes(self.page_size)
        return b"".join(self.pages.get(p, zero) for p in range(1, self.commit + 1))


def database_checksum(image: bytes, page_size: int) -> tuple[int, list[int]]:
    if len(image) % page_size:
        raise VerifyError("database", f"size {len(image)} is not a multiple of the page size {page_size}")
    lock = lock_pgno(page_size)
    chk = CHECKSUM_FLAG
    sums = []
    for i in range(len(image) // page_size):
        pgno = i + 1
        s = page_checksum(pgno, image[i * page_size:(i + 1) * page_size])
        sums.append(s)
        if pgno != lock:
            chk ^= s
    return chk | CHECKSUM_FLAG, sums


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise VerifyError("read", str(e)) from None


def fail(path: str, e: VerifyError) -> None:
    print(f"ltx_verify: {path}: {e.check}: {e}", file=sys.stderr)


def decode_path(path: str) -> LtxFile:
    """Reads and decodes one file; an unexpected exception (a bug here, or
    input this decoder did not foresee) is reported as a failed check too."""
    try:
        return decode_ltx(path, _read(path))
    except VerifyError:
        raise
    except Exception as e:  # noqa: BLE001
        raise VerifyError("decode", f"unexpected {type(e).__name__}: {e}") from None


def cmd_file(paths: list[str]) -> int:
    status = 0
    for path in paths:
        try:
            f = decode_path(path)
        except VerifyError as e:
            fail(path, e)
            status = 1
            continue
        print(json.dumps(f.summary()))
    return status


def cmd_chain(paths: list[str], out: str | None) -> int:
    db: Database | None = None
    prev: LtxFile | None = None
    checked = 0
    for path in paths:
        try:
            f = decode_path(path)
            if prev is None:
                if not f.snapshot:
                    raise VerifyError("chain-start", f"the first file must be a snapshot (min TXID 1), not {f.min_txid}")
                db = Database(f.page_size)
            else:
                if f.min_txid != prev.max_txid + 1:
                    raise VerifyError(
                        "txid-contiguity",
                        f"min TXID {f.min_txid} does not follow the previous file's max TXID {prev.max_txid}")
                if f.page_size != db.page_size:
                    raise VerifyError("page-size", f"page size {f.page_size}, the database's is {db.page_size}")
            assert db is not None
            if not f.snapshot and not f.no_checksum:
                running = db.checksum()
                if f.pre_apply != running:
                    raise VerifyError(
                        "pre-apply",
                        f"pre-apply checksum {hex16(f.pre_apply)}, the database before it has {hex16(running)}")
            db.apply(f)
            if not f.no_checksum:
                running = db.checksum()
                if f.post_apply != running:
                    raise VerifyError(
                        "post-apply",
                        f"post-apply checksum {hex16(f.post_apply)}, the database after it has {hex16(running)}")
                checked += 1
        except VerifyError as e:
            fail(path, e)
            return 1
        prev = f
    assert db is not None and prev is not None
    image = db.image()
    final, _ = database_checksum(image, db.page_size)
    if final != db.checksum():
        fail(paths[-1], VerifyError("internal", "the image's checksum disagrees with the running checksum"))
        return 1
    if out:
        with open(out, "wb") as fh:
            fh.write(image)
    print(json.dumps({
        "ok": True,
        "files": len(paths),
        "min_txid": 1,
        "max_txid": prev.max_txid,
        "commit": db.commit,
        "page_size": db.page_size,
        "checksum": hex16(final),
        "checksums_checked": checked,
        "out": out,
    }))
    return 0


def cmd_dbchecksum(path: str, page_size: int, per_page: bool) -> int:
    try:
        if page_size < 512 or page_size > MAX_PAGE_SIZE or page_size & (page_size - 1):
            raise VerifyError("usage", f"invalid page size {page_size}")
        chk, sums = database_checksum(_read(path), page_size)
    except VerifyError as e:
        fail(path, e)
        return 1
    result = {"file": path, "page_size": page_size, "pages": len(sums), "checksum": hex16(chk)}
    if per_page:
        result["page_checksums"] = [hex16(s) for s in sums]
    print(json.dumps(result))
    return 0


def _self_test() -> None:
    # Published check values: CRC-64/GO-ISO of "123456789", xxHash32 of "" and "abc".
    assert crc64(b"123456789") == 0xB90956C775A41001, "crc64 self-test"
    assert xxh32(b"") == 0x02CC5D05, "xxh32 self-test"
    assert xxh32(b"abc") == 0x32D153FF, "xxh32 self-test"


USAGE = __doc__.split("The format, as checked here:")[0].strip()


def main(argv: list[str]) -> int:
    _self_test()
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    cmd, rest = argv[1], argv[2:]
    if cmd == "file" and rest:
        return cmd_file(rest)
    if cmd == "chain":
        out = None
        paths = []
        it = iter(rest)
        for a in it:
            if a == "--out":
                out = next(it, None)
                if out is None:
                    break
            elif a.startswith("--out="):
                out = a[len("--out="):]
            else:
                paths.append(a)
        if paths and (out is not None or "--out" not in rest):
            return cmd_chain(paths, out)
    if cmd == "dbchecksum":
        page_size = None
        per_page = False
        paths = []
        it = iter(rest)
        for a in it:
            if a == "--page-size":
                v = next(it, None)
                page_size = int(v) if v and v.isdigit() else None
            elif a == "--pages":
                per_page = True
            else:
                paths.append(a)
        if page_size is not None and len(paths) == 1:
            return cmd_dbchecksum(paths[0], page_size, per_page)
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
