"""Which watch mode a folder needs: native events, or polling on network file systems.

Inotify sees only the changes made through this machine's kernel, so a share mounted over
NFS or SMB (or FUSE, 9p...) changed by another machine fires no events; such a folder is polled. The
file-system type comes from ``/proc/mounts`` (the longest mount point containing the folder); a
source's ``watch_mode`` setting (``native`` | ``poll``) overrides the detection.
"""

from __future__ import annotations

import os
from pathlib import Path

#: File-system types whose changes by other machines fire no local events.
#: Every FUSE file system (``fuse.*``: sshfs, rclone, s3fs...) counts as one too.
NETWORK_FS_TYPES = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "glusterfs", "lustre", "gpfs",
    "davfs", "beegfs", "orangefs", "ocfs2", "vboxsf", "vmhgfs", "drvfs", "fuse",
})
WATCH_MODES = ("native", "poll")


def _unescape(field: str) -> str:
    """``/proc/mounts`` writes space, tab, newline and backslash in paths as octal escapes."""
    return (field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            .replace("\\134", "\\"))


def mount_fs_type(path: str | Path, *, mounts_file: str = "/proc/mounts") -> str | None:
    """The file-system type of the mount holding ``path`` (e.g. ``ext4``, ``nfs4``, ``cifs``), or None when
    ``mounts_file`` cannot be read (not Linux)."""
    target = os.path.realpath(path)
    best, best_type = "", None
    try:
        with open(mounts_file, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = _unescape(fields[1])
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, best_type = point, fields[2]
    except OSError:
        return None
    return best_type


def watch_mode_for(root: str | Path, config: dict | None = None) -> tuple[str, str]:
    """``(mode, why)`` for a source root: its ``watch_mode`` setting when given, else ``poll`` on a network
    file system and ``native`` elsewhere.

    Raises: ValueError for a ``watch_mode`` other than ``native`` / ``poll``.
    """
    setting = (config or {}).get("watch_mode")
    if setting:
        if setting not in WATCH_MODES:
            raise ValueError(f"watch_mode must be one of {WATCH_MODES}, not {setting!r}")
        return setting, "watch_mode setting"
    fs = mount_fs_type(root)
    if fs is not None and (fs in NETWORK_FS_TYPES or fs.startswith("fuse.")):
        return "poll", f"network file system ({fs})"
    return "native", f"local file system ({fs or 'unknown'})"
