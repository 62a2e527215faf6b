"""The segments a PostgreSQL dynamic shared memory control segment lists (pure).

The /dev/shm/PostgreSQL.* file a postmaster maps is its control segment: the segments its
processes make later (the statistics' area, a parallel query's) are listed there, not mapped
by the postmaster, and PostgreSQL removes them through it (dsm.c,
dsm_cleanup_using_control_segment). Its layout (src/backend/storage/ipc/dsm.c, 64-bit):
magic, nitems, maxitems (uint32 each), then from offset 16 `maxitems` items, each a uint32
handle and a uint32 reference count first; an item is 40 bytes since PostgreSQL 14 (24
before). A handle names /dev/shm/PostgreSQL.HANDLE; an odd one, since 14, a part of the main
shared memory, no file. A file that is not exactly such a segment lists nothing.
"""

from __future__ import annotations

import struct

MAGIC = 0x9A503D32  # PG_DYNSHMEM_CONTROL_MAGIC
HEADER = struct.Struct("=III")
ITEMS_AT = 16
ITEM_SIZES = (40, 24)  # since PostgreSQL 14 (first_page, npages), and before
ITEM_HEAD = struct.Struct("=II")  # handle, refcnt


def listed_segments(data: bytes, prefix: str = "/dev/shm/PostgreSQL.") -> list[str]:
    """The files of the live segments (reference count above 0) a control segment lists;
    [] when `data` is not one (its magic, and its size exactly maxitems items)."""
    if len(data) < ITEMS_AT:
        return []
    magic, nitems, maxitems = HEADER.unpack_from(data)
    if magic != MAGIC or maxitems == 0 or nitems > maxitems:
        return []
    size = (len(data) - ITEMS_AT) // maxitems
    if size not in ITEM_SIZES or ITEMS_AT + size * maxitems != len(data):
        return []
    found = []
    for i in range(nitems):
        handle, refcnt = ITEM_HEAD.unpack_from(data, ITEMS_AT + i * size)
        if refcnt == 0 or handle == 0 or (size == 40 and handle & 1):
            continue
        found.append(f"{prefix}{handle}")
    return found
