"""Which file system a path is on, to refuse kernel interfaces as data files.

``/proc/version`` is a "regular file" to ``stat`` and root may open it for appending, yet every
write fails (EIO): a tuning log there passed the up-front check and lost the first batch of
measurements (issue 40). Files of ``proc``, ``sysfs``, ``cgroup`` and the like are the kernel's
interfaces, never storage, so a path on one is refused before any work is done.
"""
from __future__ import annotations

import os

# File systems whose files are kernel interfaces (reads and writes are requests), not storage.
KERNEL_FILESYSTEMS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
    "efivarfs", "pstore", "bpf", "fusectl", "devpts", "binfmt_misc", "mqueue", "autofs",
    "rpc_pipefs", "nsfs", "selinuxfs", "hugetlbfs"})


def filesystem_type(path: str | os.PathLike) -> str | None:
    """The type of the file system ``path`` (which must exist) is on, from
    ``/proc/self/mountinfo`` by device number; None when it cannot be told (not Linux, no
    ``/proc``, a device no mount lists)."""
    try:
        dev = os.stat(path).st_dev
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    want = f"{os.major(dev)}:{os.minor(dev)}"
    for line in lines:
        # ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
        fields = line.split()
        if len(fields) > 3 and fields[2] == want and "-" in fields[6:]:
            i = fields.index("-", 6)
            if i + 1 < len(fields):
                return fields[i + 1]
    return None


def kernel_filesystem(path: str | os.PathLike) -> str | None:
    """The kernel-interface file system (``proc``, ``sysfs``, ...) ``path`` is on, else None."""
    kind = filesystem_type(path)
    return kind if kind in KERNEL_FILESYSTEMS else None
