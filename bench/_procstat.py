"""Process accounting from /proc: CPU of the server, moto and the whole machine during a measurement."""

from __future__ import annotations

import os
from collections.abc import Sequence

TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (gunicorn master + workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / TICKS


def rss_mib(pids: Sequence[int]) -> float:
    """Resident memory of ``pids`` together, MiB (a process gone meanwhile counts 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total / 1024


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, to show what else ran during a measurement."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return float(sum(values) - idle), float(sum(values))


def find_moto() -> list[int]:
    me = os.getpid()
    pids = []
    for pid in process_tree(me):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"moto_server" in f.read():
                    pids.append(pid)
        except OSError:
            continue
    return pids
