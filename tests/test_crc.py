"""The cache's CRC-32 (issue 22): two ranges' checksums make the checksum of both, as zlib's
``crc32_combine`` does, so a cold read in parts reads each part's bytes once."""

from __future__ import annotations

import random
import zlib

import pytest

from cnnbench.results.crc import Crc32, combine, hexdigest


@pytest.mark.parametrize("first", [0, 1, 7, 4096, 100_003])
@pytest.mark.parametrize("second", [0, 1, 2, 8, 65_537])
def test_two_ranges_checksums_make_the_checksum_of_both(first, second):
    rng = random.Random(first * 7 + second)
    a, b = rng.randbytes(first), rng.randbytes(second)
    assert combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_a_long_range_is_combined_without_reading_it():
    """A length beyond 32 bits (x's powers are taken from a table of 32 that repeats): combining
    with a checksum of 0 applies the shift of the length alone, and two halves shift as the
    whole does."""
    half = 3 << 31
    twice = Crc32(b"head")
    twice.extend(0, half)
    twice.extend(0, half)
    once = Crc32(b"head")
    once.extend(0, 2 * half)
    assert twice.value == once.value != zlib.crc32(b"head")


def test_a_running_crc_reads_as_hashlib_does():
    digest = Crc32()
    digest.update(b"abc")
    digest.update(memoryview(b"def"))
    assert digest.hexdigest() == f"{zlib.crc32(b'abcdef'):08x}" == hexdigest(b"abcdef")
    digest.extend(zlib.crc32(b"ghi"), 3)
    assert digest.value == zlib.crc32(b"abcdefghi")


def _matrix_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 combination by 32x32 matrices over GF(2), as zlib's older ``crc32_combine``
    (1.2.11) works: another way to the same answer, to check :func:`combine` at lengths too long
    to hash here."""
    def times(matrix: list[int], vector: int) -> int:
        out, row = 0, 0
        while vector:
            if vector & 1:
                out ^= matrix[row]
            vector >>= 1
            row += 1
        return out

    def square(matrix: list[int]) -> list[int]:
        return [times(matrix, matrix[n]) for n in range(32)]

    if length2 <= 0:
        return crc1
    operator = [0xEDB88320] + [1 << n for n in range(31)]  # one zero bit
    for _ in range(3):  # two, four, eight zero bits: one zero byte
        operator = square(operator)
    while length2:  # length2's bits: 1, 2, 4, ... zero bytes
        if length2 & 1:
            crc1 = times(operator, crc1)
        length2 >>= 1
        operator = square(operator)
    return crc1 ^ crc2


@pytest.mark.parametrize("length", [1, 255, (1 << 31) - 1, 1 << 32, (1 << 32) + 12_345, 3 << 31, (1 << 40) + 7])
def test_long_ranges_combine_as_zlibs_matrix_method_does(length):
    crc1, crc2 = zlib.crc32(b"the covered lines"), zlib.crc32(b"a part")
    assert combine(crc1, crc2, length) == _matrix_combine(crc1, crc2, length)


def test_the_matrix_method_itself_gives_zlibs_crc():
    a, b = b"the covered lines\n" * 10, bytes(range(256)) * 4
    assert _matrix_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
