"""A big file's new lines parsed in forked processes at once (a cold read of a big store): the
same records, problems and cache, byte for byte, as one process's parse; a part whose child
fails or sends nothing usable is parsed by the reader itself; no child is left behind."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time

import pytest

from cnnbench.results import cache, file_ranges, parallel_parse, reader
from cnnbench.results.store import read_records
from tests.test_store_cache import odd_lines, rec, same


@pytest.fixture
def big(tmp_path, monkeypatch):
    """A store of many lines of every kind (records, problems, notices, shared and unshared
    sections), read through its cache, that splits into 4 parts (one parsed here, 3 forked)."""
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel_parse, "PART_BYTES", 4096)
    monkeypatch.setattr(parallel_parse, "free_cpus", lambda: 4)
    # threads other tests left running in this process are not this test's: count those started after
    running = threading.active_count()
    monkeypatch.setattr(threading, "active_count", lambda real=threading.active_count: real() - running + 1)
    lines = [json.dumps(rec(i)) for i in range(60)] + odd_lines() * 4 + [json.dumps(rec(i)) for i in range(60, 90)]
    folder = tmp_path / "results"
    folder.mkdir()
    path = folder / "box.jsonl"
    path.write_text("\n".join(lines) + "\n")
    # a torch DataLoader with workers (another test's) leaves its SIGCHLD handler in the process
    previous = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        with path.open("rb") as f:
            assert len(parallel_parse.plan(f.fileno(), 0, path.stat().st_size)) == 5
        yield path
    finally:
        if previous is not None:
            signal.signal(signal.SIGCHLD, previous)


@pytest.fixture
def forks(monkeypatch):
    """The children the reader forked (their pids), counted in this process."""
    started: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            started.append(pid)
        return pid

    monkeypatch.setattr(parallel_parse.os, "fork", fork)
    return started


def one_process_read(path, monkeypatch, **kw):
    """The file read as a small one is: at once, by one process."""
    with monkeypatch.context() as m:
        m.setattr(parallel_parse, "PART_BYTES", 1 << 40)
        return read_records(path.parent, **kw)


def reaped(pids: list[int]) -> bool:
    """Every one of these children has been reaped by the reader (none running, none a zombie)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


@pytest.mark.parametrize("step_times", [True, False, "lazy"])
def test_parts_parsed_at_once_give_what_one_process_gives(big, monkeypatch, forks, step_times, caplog):
    expected = one_process_read(big, monkeypatch, step_times=step_times)
    assert not forks and expected[1]
    written_alone = cache.cache_path(big).read_bytes()
    cache.cache_path(big).unlink()
    with caplog.at_level(logging.DEBUG, logger="cnnbench.results.store"):
        got = read_records(big.parent, step_times=step_times)
    assert "in 4 parts at once" in caplog.text and "process failed" not in caplog.text  # each child's part used
    assert "changed as it was read" not in caplog.text  # and found to be the bytes the reader hashed
    assert len(forks) == 3 and reaped(forks)
    assert same(got, expected)
    assert cache.cache_path(big).read_bytes() == written_alone
    again = read_records(big.parent, step_times=step_times)  # from the cache the parts made
    assert len(forks) == 3 and same(again, expected)


def test_the_childrens_rows_are_written_as_their_processes_wrote_them(big, monkeypatch, forks):
    """Each forked part's rows go into the cache as the JSON text its process wrote, and the
    reader's own as it dumped them while the children finished: none is dumped as the cache is
    written (the cache is byte for byte one process's: above)."""
    seen: list[tuple[int, list]] = []
    real = cache.rows_pieces
    monkeypatch.setattr(cache, "rows_pieces", lambda rows, texts: seen.append((len(rows), list(texts)))
                        or real(rows, texts))
    records, _ = read_records(big.parent)
    assert len(forks) == 3 and len(seen) == 1
    rows, texts = seen[0]
    assert len(texts) == 4 and texts[0][0] == 0 and texts[-1][0] + texts[-1][1] == rows  # every row
    assert all(a[0] + a[1] == b[0] for a, b in zip(texts, texts[1:], strict=False))  # in order, each once


def test_rows_changed_as_their_part_is_joined_are_dumped_again(big, monkeypatch, forks):
    """A part's section the reader does not share (kept in each of its rows) changes those rows:
    their text from the child is no longer theirs, and is not written."""
    expected = one_process_read(big, monkeypatch, step_times=True)
    cache.cache_path(big).unlink()
    real_join = parallel_parse._join

    def join_unshared(cached, part):  # as if this process could share none of its sections
        cached._share = lambda section: -1
        try:
            return real_join(cached, part)
        finally:
            del cached._share

    monkeypatch.setattr(parallel_parse, "_join", join_unshared)
    got = read_records(big.parent, step_times=True)
    assert len(forks) == 3 and same(got, expected)
    assert same(read_records(big.parent, step_times=True), expected)  # from the cache written so


def test_rows_no_cache_can_hold_are_read_and_no_cache_is_written(big, monkeypatch, forks):
    """A row orjson cannot write (an integer beyond 64 bits, as a migration could make): the read
    still gives every record, in parts or not, and no cache is written."""
    real = reader.store_lines.migrate

    def odd(record):
        record = real(record)
        record["odd"] = 2**70  # orjson refuses it
        return record

    monkeypatch.setattr(reader.store_lines, "migrate", odd)
    expected = one_process_read(big, monkeypatch, step_times=True)
    assert not cache.cache_path(big).exists() and expected[0]
    got = read_records(big.parent, step_times=True)
    assert len(forks) == 3 and reaped(forks) and same(got, expected)
    assert not cache.cache_path(big).exists()


@pytest.fixture
def no_hang():
    """Fails a test (instead of leaving it running) whose read does not end within 2 minutes."""
    def stuck(signum, frame):  # not an OSError, which the reader would take for a file it cannot read
        pytest.fail("the read did not end")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def written_over(path, shift: bool):
    """Write ``path`` over in place, the same size: each line one byte later (``shift``: the
    planned line ends no longer end lines), or one figure of its last record changed."""
    data = path.read_bytes()
    if shift:
        new = b" " + data[:-1]
    else:
        at = data.rindex(b'"total_images_per_sec": ') + len(b'"total_images_per_sec": ')
        new = data[:at] + (b"7" if data[at:at + 1] != b"7" else b"8") + data[at + 1:]
    with path.open("r+b") as f:  # the same file (inode), as a copy onto it or an edit writes it
        f.write(new)


@pytest.mark.parametrize("when", ["before the parts are read", "after the parts are read"])
def test_a_file_written_over_as_its_parts_are_read_is_read_again_at_once(big, monkeypatch, forks, no_hang, when):
    """Written over in place, the same size: after the plan (the planned ends no longer end lines:
    no part parses half a line, none loops), or after the children parsed their parts and before
    this process hashes them (a part with other bytes than its child parsed). Either way the file
    is read afresh, and the cache holds its hash with its records, so that the next read
    gives the file as it is."""
    if when == "before the parts are read":
        real_start = parallel_parse._start

        def over_then_start(*args):
            if not forks:
                written_over(big, shift=True)
            real_start(*args)

        monkeypatch.setattr(parallel_parse, "_start", over_then_start)
    else:
        real_hash = file_ranges.hash_range
        calls: list[int] = []

        def over_then_hash(*args):
            if not calls:
                for pid in forks:  # each child has parsed and sent its part
                    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                written_over(big, shift=False)
            calls.append(1)
            return real_hash(*args)

        monkeypatch.setattr(file_ranges, "hash_range", over_then_hash)
    got = read_records(big.parent, step_times=True)
    assert len(forks) == 3 and reaped(forks)
    again = read_records(big.parent, step_times=True)  # from the cache this read wrote
    monkeypatch.undo()
    cache.cache_path(big).unlink()
    expected = read_records(big.parent, step_times=True)
    assert same(got, expected) and same(again, expected)


def test_a_failed_childs_part_parsed_here_is_checked_against_what_was_hashed(big, monkeypatch, forks):
    """A part whose child failed is parsed here after its bytes were hashed: written over in
    between, it is found so, and the file is read afresh."""
    monkeypatch.setattr(parallel_parse, "_child", lambda *args: os._exit(3))
    real_hash = file_ranges.hash_range
    calls: list[int] = []

    def hash_then_write_over(*args):
        crc = real_hash(*args)
        calls.append(1)
        if len(calls) == 3:  # the last part hashed; none parsed yet
            written_over(big, shift=False)
        return crc

    monkeypatch.setattr(file_ranges, "hash_range", hash_then_write_over)
    got = read_records(big.parent, step_times=True)
    again = read_records(big.parent, step_times=True)
    assert len(forks) == 3 and reaped(forks)
    monkeypatch.undo()
    cache.cache_path(big).unlink()
    expected = read_records(big.parent, step_times=True)
    assert same(got, expected) and same(again, expected)


def test_lines_appended_after_the_open_are_hashed_as_they_were_parsed(big, monkeypatch, forks):
    """A cached file that grows after it was opened (its stat still the cache's): the covered lines
    are checked against the cache's hash, and the new ones hashed as parsed, so that a figure
    written over before the cache is written is seen by the next read (the cache is not made of
    the old bytes with the new bytes' hash)."""
    head = big.read_bytes()
    cut = head.index(b"\n", len(head) // 2) + 1
    big.write_bytes(head[:cut])
    read_records(big.parent)  # cached: the first half
    real_new, real_write = parallel_parse.new_lines, cache.write

    def append_then(f, begin, **kw):
        if begin:  # the cache loaded, its stat matching: the rest appended now
            with big.open("ab") as out:
                out.write(head[cut:])
        return real_new(f, begin, **kw)

    def write_over_then_write(*args):
        written_over(big, shift=False)  # a figure of the last line, parsed by now
        return real_write(*args)

    monkeypatch.setattr(parallel_parse, "new_lines", append_then)
    monkeypatch.setattr(cache, "write", write_over_then_write)
    read_records(big.parent, step_times=True)
    monkeypatch.setattr(parallel_parse, "new_lines", real_new)
    monkeypatch.setattr(cache, "write", real_write)
    again = read_records(big.parent, step_times=True)
    monkeypatch.undo()
    cache.cache_path(big).unlink()
    assert same(again, read_records(big.parent, step_times=True))


def test_a_last_line_without_its_newline_does_not_loop_the_parser(no_hang):
    """Lines asked for whole that end without a newline (never by the readers: a safety net)."""
    cached = cache.CachedRecords()
    assert reader._add_new_lines(cached, b'{"a":1}\nxyz', 11) == 2


@pytest.mark.parametrize("piece", [1000, 100])  # lines of a few hundred bytes: several a piece; longer than one
@pytest.mark.parametrize("parts", [1, 4])
def test_lines_read_a_piece_at_a_time_give_what_one_read_gives(big, monkeypatch, forks, piece, parts):
    """Many lines are read a piece at a time (by one process, or by each part's): the records,
    problems and cache of the file read at once."""
    expected = one_process_read(big, monkeypatch, step_times=True)
    written_at_once = cache.cache_path(big).read_bytes()
    cache.cache_path(big).unlink()
    monkeypatch.setattr(file_ranges, "PIECE_BYTES", piece)
    monkeypatch.setattr(parallel_parse, "MAX_PARTS", parts)
    got = read_records(big.parent, step_times=True)
    assert len(forks) == parts - 1 and reaped(forks)
    assert same(got, expected)
    assert cache.cache_path(big).read_bytes() == written_at_once


def test_lines_appended_to_a_cached_file_are_parsed_in_parts_and_joined(big, tmp_path, monkeypatch, forks):
    """Parts joined after records already cached: sections shared with theirs, positions and
    line numbers after theirs."""
    head = big.read_text().splitlines(keepends=True)
    big.write_text("".join(head[:10]))
    assert sum(map(len, head[:10])) < 2 * parallel_parse.PART_BYTES  # too few lines for parts
    read_records(big.parent)
    assert not forks
    big.write_text("".join(head))
    got = read_records(big.parent, step_times=True)
    assert len(forks) == 3
    assert same(got, one_process_read(big, monkeypatch, step_times=True))
    assert same(read_records(big.parent, step_times=True), got)


def test_a_file_cut_as_its_parts_are_read_is_read_again_at_once(big, monkeypatch, forks):
    """A file found shorter than its parts were planned (cut, or rewritten in place, as they were
    read) is read afresh, at once: the records and problems of the file as it is then."""
    real_start = parallel_parse._start
    size = big.stat().st_size

    def cut_then_start(*args):
        if not forks:  # before the first child: it and the others find their parts short
            os.truncate(big, size * 3 // 5 + 7)
        real_start(*args)

    monkeypatch.setattr(parallel_parse, "_start", cut_then_start)
    got = read_records(big.parent, step_times=True)
    assert len(forks) == 3 and reaped(forks)
    monkeypatch.undo()
    cache.cache_path(big).unlink()
    expected = read_records(big.parent, step_times=True)
    assert big.stat().st_size < size and same(got, expected)
    assert any("truncated line" in p for p in got[1])  # the cut line, read as the last


@pytest.mark.parametrize("failure", ["child dies", "does not fit", "other lines", "sizes disagree"])
def test_a_part_whose_child_fails_is_parsed_here(big, monkeypatch, forks, failure):
    if failure == "child dies":
        monkeypatch.setattr(parallel_parse, "_child", lambda *args: os._exit(3))
    elif failure == "other lines":  # a part of all but its last line, well formed
        real_child = parallel_parse._child
        monkeypatch.setattr(parallel_parse, "_child", lambda parse, fd, begin, end, *rest: real_child(
            parse, fd, begin, begin + os.pread(fd, end - begin, begin).rfind(b"\n", 0, end - begin - 1) + 1, *rest))
    elif failure == "sizes disagree":  # the memory file holds other than the pipe says
        real_part = parallel_parse._part
        monkeypatch.setattr(parallel_parse, "_part",
                            lambda fd, body, steps, summaries, rows: real_part(fd, body, steps + 8, summaries, rows))
    else:
        real = parallel_parse._part
        calls: list[int] = []
        monkeypatch.setattr(parallel_parse, "_part",
                            lambda *part: None if not calls and not calls.append(1) else real(*part))
    expected = one_process_read(big, monkeypatch, step_times=True)
    written_alone = cache.cache_path(big).read_bytes()
    cache.cache_path(big).unlink()
    got = read_records(big.parent, step_times=True)
    assert len(forks) == 3 and reaped(forks)
    assert same(got, expected)
    # the same cache: the failed part's bytes hashed once, its summaries made here
    assert cache.cache_path(big).read_bytes() == written_alone


def test_children_are_stopped_when_the_reader_stops_waiting(big, monkeypatch, forks):
    """^C while the children still parse: each is killed and reaped, none parses on alone."""
    monkeypatch.setattr(parallel_parse, "_child", lambda *args: (time.sleep(600), os._exit(0)))

    def interrupted(child):
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel_parse, "_receive", interrupted)
    rescued: list[int] = []

    def rescue(signum, frame):  # had the reader waited for them instead: freed after 2 minutes
        for pid in forks:
            os.kill(pid, signal.SIGKILL)
            rescued.append(pid)

    previous = signal.signal(signal.SIGALRM, rescue)
    signal.alarm(120)
    try:
        with pytest.raises(KeyboardInterrupt):
            read_records(big.parent)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert len(forks) == 3 and not rescued and reaped(forks)
    assert not cache.cache_path(big).exists()


def test_a_received_child_is_never_killed_again(big, monkeypatch, forks):
    """^C while a child's part is checked: that child, already reaped, is not killed again (its
    pid may be another process's by then), nor its pipe or memory file closed twice; the others
    are stopped."""
    killed: list[int] = []
    real_kill = os.kill
    monkeypatch.setattr(parallel_parse.os, "kill", lambda pid, sig: killed.append(pid) or real_kill(pid, sig))
    opened: set[int] = set()  # the pipes' ends and memory files the reader holds
    twice: list[int] = []
    real_pipe, real_memfd, real_close = os.pipe, os.memfd_create, os.close

    def pipe():
        r, w = real_pipe()
        opened.update((r, w))
        return r, w

    def memfd_create(*args):
        fd = real_memfd(*args)
        opened.add(fd)
        return fd

    def close(fd):
        if fd in opened:
            opened.discard(fd)
        else:
            twice.append(fd)
        real_close(fd)

    monkeypatch.setattr(parallel_parse.os, "pipe", pipe)
    monkeypatch.setattr(parallel_parse.os, "memfd_create", memfd_create)
    monkeypatch.setattr(parallel_parse.os, "close", close)

    def interrupted(*part):
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel_parse, "_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        read_records(big.parent)
    assert len(forks) == 3 and forks[0] not in killed and reaped(forks)
    assert not opened and not twice  # every end closed, none twice


def test_children_others_reap_leave_one_process_parsing(big, monkeypatch, forks):
    """With SIGCHLD ignored (or handled) children vanish unseen: one process parses."""
    expected = one_process_read(big, monkeypatch)
    cache.cache_path(big).unlink()
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        got = read_records(big.parent)
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert not forks and same(got, expected)


def test_a_python_without_memory_files_parses_in_one_process(big, monkeypatch, forks):
    """``os.memfd_create`` is missing where Python was built against a glibc before 2.27: the
    store is read as one process reads it, without error."""
    expected = one_process_read(big, monkeypatch)
    cache.cache_path(big).unlink()
    monkeypatch.delattr(parallel_parse.os, "memfd_create")
    assert same(read_records(big.parent), expected)
    assert not forks


def test_a_part_being_checked_is_not_lost_to_an_interrupt(big, monkeypatch, forks):
    """^C while a child's part is taken in is the reader's ^C (not turned into a part that does
    not fit, then parsed here); every child is reaped."""
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "check_shape", interrupted)  # as the part is read
    with pytest.raises(KeyboardInterrupt):
        read_records(big.parent)
    assert len(forks) == 3 and reaped(forks)


def test_no_fork_beside_another_thread(big, monkeypatch, forks):
    """A fork copies only the calling thread: with others alive, one process parses."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        records, _ = read_records(big.parent)
    finally:
        stop.set()
        other.join()
    assert not forks and len(records) == len(one_process_read(big, monkeypatch)[0])


@pytest.mark.parametrize(("usable", "machine", "load", "free"), [
    (4, 4, 0.0, 4), (4, 4, 1.4, 4), (4, 4, 3.0, 2), (4, 4, 4.0, 1), (4, 4, 16.0, 1),
    (8, 64, 57.0, 8), (8, 64, 62.0, 3), (8, 64, 80.0, 1), (2, None, 0.5, 2)])
@pytest.mark.parametrize("running", [None, 1000])
def test_parts_are_as_many_as_free_cpus(monkeypatch, usable, machine, load, free, running):
    """On a loaded machine more processes would only share the same CPUs: the CPUs the load
    average shows busy (beside the reader's own 1) are held back, as ``make -l`` does; a job's
    own CPUs (its affinity) count while the rest of the machine has room for the load. (With
    more threads running now than the load average counts, or no count of them, the load
    average decides.)"""
    monkeypatch.setattr("cnnbench.machine.host.usable_cpus", lambda: list(range(usable)))
    monkeypatch.setattr(parallel_parse.os, "cpu_count", lambda: machine)
    monkeypatch.setattr("cnnbench.machine.host.load_average", lambda: [load, 0.0, 0.0])
    monkeypatch.setattr("cnnbench.machine.host.running_now", lambda **_: running)
    assert parallel_parse.free_cpus() == free


@pytest.mark.parametrize(("load", "running", "free"), [
    (1.6, 1, 2), (1.6, 2, 1), (3.0, 1, 2), (3.0, 3, 1), (0.2, 3, 2)])
def test_a_machine_busy_a_moment_ago_but_idle_now_reads_as_free(monkeypatch, load, running, free):
    """The load average decays over a minute: right after a sweep on 2 CPUs it still shows one
    busy, while only the reader runs. The threads running at this instant (the reader's
    included) then bound what counts as busy; a thread running now while the load average is
    low (a passing command) does not hold a CPU back."""
    monkeypatch.setattr("cnnbench.machine.host.usable_cpus", lambda: [0, 1])
    monkeypatch.setattr(parallel_parse.os, "cpu_count", lambda: 2)
    monkeypatch.setattr("cnnbench.machine.host.load_average", lambda: [load, 0.0, 0.0])
    monkeypatch.setattr("cnnbench.machine.host.running_now", lambda **_: running)
    assert parallel_parse.free_cpus() == free


def test_the_threads_running_now_are_the_most_of_several_readings(monkeypatch):
    """A busy process that waits at one instant (a burst of work, then a wait) is counted where
    another reading finds it running."""
    import io

    from cnnbench.machine import host

    lines = iter([b"1.50 1.20 1.00 1/80 4242\n", b"1.50 1.20 1.00 3/80 4242\n", b"1.50 1.20 1.00 2/80 4242\n"])
    monkeypatch.setattr(host, "open", lambda *args: io.BytesIO(next(lines)), raising=False)
    monkeypatch.setattr(host.time, "sleep", lambda seconds: None)
    assert host.running_now(readings=3) == 3
    lines = iter([b"0.00 0.00 0.00 0/0 0\n"])  # gVisor's: no count, not an idle machine
    assert host.running_now(readings=1) is None


def test_the_threads_running_now_are_read_from_the_system():
    from cnnbench.machine.host import running_now

    now = running_now()
    try:
        with open("/proc/loadavg", "rb") as f:
            counted = int(f.read().split()[3].split(b"/")[0]) > 0  # gVisor's counts none: 0/0
    except OSError:  # not Linux
        counted = False
    assert now >= 1 if counted else now is None  # this test's own thread runs


def test_a_signal_arriving_as_signals_are_held_back_leaves_the_mask_as_it_was(monkeypatch):
    """CPython delivers a pending ^C right after changing the mask: the block's own ^C must not
    leave ^C, SIGTERM and SIGHUP blocked for good (a notebook's kernel that caught it)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    real = signal.pthread_sigmask
    calls: list[int] = []

    def mask(how, sigs):
        old = real(how, sigs)
        calls.append(how)
        if how == signal.SIG_BLOCK and sigs:  # as if ^C came just then
            raise KeyboardInterrupt
        return old

    monkeypatch.setattr(parallel_parse.signal, "pthread_sigmask", mask)
    with pytest.raises(KeyboardInterrupt), parallel_parse._signals_held():
        pass
    assert real(signal.SIG_BLOCK, []) == before and signal.SIG_SETMASK in calls


@pytest.mark.parametrize("piece", [7, 64, 1 << 20])
def test_line_pieces_are_whole_lines_in_order(tmp_path, monkeypatch, piece):
    """Pieces end at line ends (a line longer than a piece is read to its end), and together
    are the range's bytes, once each."""
    lines = [b"x" * n + b"\n" for n in (0, 3, 200, 5, 64, 63, 1)]
    path = tmp_path / "f"
    path.write_bytes(b"head\n" + b"".join(lines) + b"tail")
    monkeypatch.setattr(file_ranges, "PIECE_BYTES", piece)
    with path.open("rb") as f:
        pieces = list(file_ranges.line_pieces(f.fileno(), 5, 5 + len(b"".join(lines))))
    assert all(whole and data[:whole].endswith(b"\n") for data, whole in pieces)
    assert b"".join(data[:whole] for data, whole in pieces) == b"".join(lines)
