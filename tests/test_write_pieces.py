"""Big buffers reach the system a piece at a time (``files.WRITE_PIECE``): on Linux 6.16 and
later an ext4 file's page cache is made of folios as large as each write, which a machine with
fragmented memory makes by compaction (a 168 MB cache took 0.4–0.5 s to write in one call here,
0.05–0.08 s in 1 MiB calls). What is written is unchanged."""

from __future__ import annotations

import io
import os

import pytest

from cnnbench.results import files
from cnnbench.results.store import read_records
from tests.test_store_cache import rec


class _Recording(io.RawIOBase):
    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        self.sizes.append(len(b))
        self.data += bytes(b)
        return len(b)


@pytest.mark.parametrize("size", [0, 1, 4096, 5000, 3 * 4096 + 7])
def test_a_big_write_goes_to_the_system_in_pieces(monkeypatch, size):
    monkeypatch.setattr(files, "WRITE_PIECE", 4096)
    raw = _Recording()
    out = files.PieceWriter(raw)
    data = os.urandom(size)
    assert out.write(data) == size
    assert out.write(memoryview(bytearray(b"xy" * 3000)).cast("H")) == 6000  # any buffer, counted in bytes
    out.flush()
    assert bytes(raw.data) == data + b"xy" * 3000
    assert raw.sizes and max(raw.sizes) <= 4096


class _RecordingFile(io.FileIO):
    sizes: list[int] = []

    def write(self, b) -> int:  # type: ignore[override]
        _RecordingFile.sizes.append(len(memoryview(b).cast("B")))
        return super().write(b)


def test_a_file_written_whole_is_written_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "WRITE_PIECE", 1024)
    monkeypatch.setattr(io, "FileIO", _RecordingFile)
    _RecordingFile.sizes = []
    with files.replacing(tmp_path / "whole.bin") as out:
        out.write(b"z" * 5000)
    assert (tmp_path / "whole.bin").read_bytes() == b"z" * 5000
    assert _RecordingFile.sizes and max(_RecordingFile.sizes) <= 1024


def test_appended_lines_go_to_the_system_in_pieces(tmp_path, monkeypatch):
    """Records appended at once (an import) are written under the file's lock a piece at a
    time: the lines are whole and in order, each ``write`` call at most a piece."""
    from cnnbench.results.store import append_records

    monkeypatch.setattr(files, "WRITE_PIECE", 1024)
    sizes: list[int] = []
    real = os.write

    def write(fd, data):
        sizes.append(len(data))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    append_records(tmp_path, [rec(i) for i in range(30)])
    monkeypatch.setattr(os, "write", real)
    records, problems = read_records(tmp_path)
    assert not problems and [r["case_name"] for r in records] == [f"c{i}" for i in range(30)]
    assert sum(sizes) > 4 * 1024 and max(sizes) <= 1024


def test_a_buffer_is_free_again_after_a_failed_write(monkeypatch):
    """A write that fails (a full disk) leaves the caller's buffer as a plain file would: free to
    change size while the error is held."""
    class Full(_Recording):
        def write(self, b) -> int:  # type: ignore[override]
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "WRITE_PIECE", 4096)
    data = bytearray(10_000)
    try:
        files.PieceWriter(Full()).write(data)
    except OSError as exc:
        held = exc
    data.extend(b"more")  # BufferError while a view of it were still exported
    assert held.errno == 28 and len(data) == 10_004
