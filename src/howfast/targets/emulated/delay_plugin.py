"""An nbdkit plugin (run by nbdkit's python plugin, never imported by howfast): serves an image
file and adds a fixed delay to every read, write, zero and **flush**, the way a slower device
would. nbdkit 1.32's delay filter cannot delay flushes, and a PostgreSQL commit is a WAL write
then a flush: without the flush delayed, a commit waits one added delay instead of two.

    nbdkit python delay_plugin.py file=IMAGE delay-ms=2 [nodelay-file=PATH] [delay-file=PATH]

The requests run in parallel (thread model parallel; sleeping and file I/O release Python's
lock), so concurrent requests overlap their delays like requests queued on a real device. The
delay is slept before the request is done on the image: the real cost of the file below comes
on top of it, as under the delay filter. A flush is an fdatasync of the image file, so data
the client flushed is on the storage under test, as with nbdkit's file plugin.

With `delay-file`, the delay can change while the volume serves (issue 29's slow-storage
event): the file holds a number of milliseconds, written by howfast atomically (a new file
renamed over it); the plugin looks at the file's inode and mtime at most every CHECK_S and reads
it again when they changed. Until the file exists, and when it holds no valid number, the
delay in force stays.

Once the file `nodelay-file` names exists, no request waits any more, and the ones waiting stop
within SLICE_S: howfast creates it when it takes the volume down, or is interrupted while it
builds it, so that nothing waits out a delay on a volume about to be deleted (a mount at
100 ms makes about 40 delayed I/Os, an unmount a dozen). Nor does a flush then wait for the
storage under test (fdatasync of the image, which a busy disk can make take seconds): the
image is deleted next.
"""

from __future__ import annotations

import builtins
import errno
import math
import os
import time

import nbdkit  # type: ignore[import-not-found]  # exists only inside nbdkit

API_VERSION = 2
ZERO_CHUNK = 1 << 20  # zeroes written per pwrite when asked to zero a range

SLICE_S = 0.05  # a long delay is slept in slices, to see the nodelay file soon
CHECK_S = 0.05  # the delay file is looked at no more often than this
MAX_DELAY_MS = 1000.0  # a number above this in the delay file is not taken

image_path: str | None = None
delay_s = 0.0
nodelay_path: str | None = None
delay_path: str | None = None
_checked_at = -math.inf  # monotonic time the delay file was last looked at
_seen: tuple[int, int] | None = None  # its (inode, mtime_ns) then


def parse_delay_ms(text: str) -> float | None:
    """The delay file's milliseconds; None unless a finite number in [0, MAX_DELAY_MS]."""
    try:
        ms = float(text.strip())
    except ValueError:
        return None
    return ms if math.isfinite(ms) and 0 <= ms <= MAX_DELAY_MS else None


def current_delay_s(now: float) -> float:
    """The delay in force at monotonic time `now`: the delay file's, looked at again when
    CHECK_S has passed since the last look and read again only when it changed. Requests run
    in parallel: two may look at once, and both read the same file."""
    global delay_s, _checked_at, _seen
    if delay_path is None or now - _checked_at < CHECK_S:
        return delay_s
    _checked_at = now
    try:
        st = os.stat(delay_path)
        key = (st.st_ino, st.st_mtime_ns)
        if key != _seen:
            with builtins.open(delay_path) as f:
                ms = parse_delay_ms(f.read())
            _seen = key
            if ms is not None:
                delay_s = ms / 1000
    except OSError:
        pass  # not written yet, or being replaced: the delay in force stays
    return delay_s


def config(key: str, value: str) -> None:
    global image_path, delay_s, nodelay_path, delay_path
    if key == "nodelay-file":
        nodelay_path = os.path.abspath(value)
    elif key == "delay-file":
        delay_path = os.path.abspath(value)
    elif key == "file":
        image_path = os.path.abspath(value)
    elif key == "delay-ms":
        ms = float(value)
        if not math.isfinite(ms) or ms < 0:
            raise ValueError(f"delay-ms must be a number of milliseconds >= 0, not {value!r}")
        delay_s = ms / 1000
    else:
        raise ValueError(
            f"unknown parameter {key!r} (file=IMAGE delay-ms=MS nodelay-file=PATH delay-file=PATH)"
        )


def config_complete() -> None:
    if image_path is None:
        raise ValueError("file=IMAGE is required")


def thread_model() -> int:
    return int(nbdkit.THREAD_MODEL_PARALLEL)


def open(readonly: bool) -> int:  # the name nbdkit calls; builtins.open is not used here
    assert image_path is not None
    return os.open(image_path, os.O_RDONLY if readonly else os.O_RDWR)


def close(h: int) -> None:
    os.close(h)


def get_size(h: int) -> int:
    return os.fstat(h).st_size


def can_multi_conn(h: int) -> bool:
    """A flush on any connection is an fdatasync of the one image: it covers them all."""
    return True


def can_flush(h: int) -> bool:
    return True


def can_zero(h: int) -> bool:
    return True


def can_fua(h: int) -> int:
    """A write with FUA is one delayed request, then fdatasync (not a write and a flush)."""
    return int(nbdkit.FUA_NATIVE)


def _delay() -> None:
    now = time.monotonic()
    wait_s = current_delay_s(now)
    if not wait_s:
        return
    if nodelay_path is None:
        time.sleep(wait_s)
        return
    end = now + wait_s
    while not os.path.exists(nodelay_path):
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, SLICE_S))


def pread(h: int, buf: memoryview, offset: int, flags: int) -> None:
    _delay()
    done = 0
    while done < len(buf):
        n = os.preadv(h, [buf[done:]], offset + done)
        if n == 0:
            raise OSError(errno.EIO, f"read beyond the end of {image_path}")
        done += n


def _going_away() -> bool:
    """The volume is being taken down (the nodelay file exists): its image is deleted next."""
    return nodelay_path is not None and os.path.exists(nodelay_path)


def _sync(h: int) -> None:
    if not _going_away():
        os.fdatasync(h)


def pwrite(h: int, buf: memoryview, offset: int, flags: int) -> None:
    _delay()
    _write_all(h, buf, offset)
    if flags & nbdkit.FLAG_FUA:
        _sync(h)


def zero(h: int, count: int, offset: int, flags: int) -> None:
    """One delay for the whole range, like one request to a device."""
    _delay()
    zeroes = bytes(min(count, ZERO_CHUNK))
    while count > 0:
        n = min(count, len(zeroes))
        _write_all(h, memoryview(zeroes)[:n], offset)
        offset += n
        count -= n
    if flags & nbdkit.FLAG_FUA:
        _sync(h)


def flush(h: int, flags: int) -> None:
    _delay()
    _sync(h)


def _write_all(h: int, buf: memoryview, offset: int) -> None:
    done = 0
    while done < len(buf):
        done += os.pwrite(h, buf[done:], offset + done)
