"""The names kvtier serve gives an engine's blocks in its index (its KV events carry the
engine's own hashes instead: docs/events.md, "Block names").

The server chains the engine's block hashes once more (docs/protocol.md, "Block identity";
``serve/block_names.hpp``): ``name_i = XXH3_64bits_withSeed(le64(name_{i-1}) || le64(0x7365727665)
|| le64(hash_i) || le64(tokens_i), 0x6b76746965722d69)``, ``name_{-1} = 0``.
Storage keys (and the file backend's file names) come from these names. XXH3 is implemented
here for its one input size (32 bytes), so that nothing beyond pyzmq and msgpack is needed;
tests pin it against libxxhash's answers.
"""

from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple, Union

_M64 = (1 << 64) - 1
_PRIME64_1 = 0x9E3779B185EBCA87
# The first 32 bytes of XXH3's default secret (xxhash.h, XXH3_kSecret).
_SECRET = bytes([
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
])
_TRACE_SEED = 0x6b76746965722d69  # "kvtier-i"
ENGINE_NAME_SPACE = 0x7365727665  # "serve"


def _u64(b: bytes, off: int) -> int:
    return int.from_bytes(b[off:off + 8], "little")


def _mix16(data: bytes, off: int, soff: int, seed: int) -> int:
    lo = _u64(data, off) ^ ((_u64(_SECRET, soff) + seed) & _M64)
    hi = _u64(data, off + 8) ^ ((_u64(_SECRET, soff + 8) - seed) & _M64)
    product = lo * hi
    return (product & _M64) ^ (product >> 64)


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & _M64
    return h ^ (h >> 32)


def xxh3_64_32(data: bytes, seed: int) -> int:
    """XXH3_64bits_withSeed of exactly 32 bytes (xxhash's 17-to-128-byte path)."""
    if len(data) != 32:
        raise ValueError("this XXH3 takes exactly 32 bytes")
    acc = (32 * _PRIME64_1) & _M64
    acc = (acc + _mix16(data, 0, 0, seed) + _mix16(data, 16, 16, seed)) & _M64
    return _avalanche(acc)


def server_names(blocks: Iterable[Union[int, Tuple[int, int]]],
                 block_size: int = 0) -> List[int]:
    """The server's names of a prompt's blocks, given as engine hashes (each ``block_size``
    tokens) or as (hash, tokens) pairs."""
    names: List[int] = []
    parent = 0
    for b in blocks:
        h, tokens = (b, block_size) if isinstance(b, int) else b
        words = b"".join(int(x).to_bytes(8, "little")
                         for x in (parent, ENGINE_NAME_SPACE, h, tokens))
        parent = xxh3_64_32(words, _TRACE_SEED)
        names.append(parent)
    return names
