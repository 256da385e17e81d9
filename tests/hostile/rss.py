"""A process's own peak memory, for the hostile tier's child processes."""

from __future__ import annotations

import resource

__all__ = ["peak_rss_bytes"]


def peak_rss_bytes() -> int:
    """This process's peak resident set: VmHWM of its own address space.

    Not getrusage's ru_maxrss: Linux keeps that across execve, so a child spawned
    by a big pytest process starts with the parent's peak (measured: 437 MB for a
    child whose own peak was 221 MB).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # no /proc
