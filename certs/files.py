"""Atomic file writes for certificates and keys."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

KEY_MODE = 0o600
CERT_MODE = 0o644


def atomic_write(path: str | os.PathLike, data: bytes, mode: int = CERT_MODE) -> bool:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``.

    A reader sees the old content or the new one, never a half-written file. The
    temporary file is created with ``mode`` from the start, so a key is never
    readable by others, not even for a moment. Returns False (and writes nothing)
    when the file already holds ``data``.
    """
    path = Path(path)
    try:
        if path.read_bytes() == data:
            if (path.stat().st_mode & 0o777) != mode:
                os.chmod(path, mode)
            return False
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)
    return True


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
