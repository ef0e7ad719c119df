"""Folders of one's own under a shared temporary folder, and files that are not links.

mbdgen keeps a few folders under ``tempfile.gettempdir()`` (``/tmp``, shared by every
local user): the background specializer's locks and logs (:mod:`mbdgen.specialize`), a
Dask worker's copy of a generated module (:mod:`mbdgen.sweeps`), the benchmarks'
models.  Their names are predictable, so another user could create one first and then
swap or plant files in it: a module that is imported, a link in place of a log.
:func:`private_dir` creates such a folder with mode 0700 and refuses one that is a
link, belongs to another user or is writable by others;
:func:`open_no_follow` opens a file for appending without following a link planted
in its place.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from mbdgen.errors import MbdgenError


def _uid() -> int | None:
    getuid = getattr(os, "getuid", None)  # none on Windows: no owners to check
    return None if getuid is None else getuid()


def user_tag() -> str:
    """The user's id (``os.getuid()``), or on Windows the user name: a folder name part."""
    uid = _uid()
    return str(uid) if uid is not None else os.environ.get("USERNAME", "user")


def temp_dir(prefix: str) -> Path:
    """The private folder ``<gettempdir()>/<prefix>-<user id>`` (:func:`private_dir`)."""
    return private_dir(Path(tempfile.gettempdir()) / f"{prefix}-{user_tag()}")


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (mode 0700) or check the one there: a folder, not a link, owned
    by this user and writable by nobody else; else :class:`MbdgenError`, naming it.

    A folder of this user's that others may read but not write (one an older mbdgen
    created with the umask's mode) is made 0700: nobody else could have put a file
    in it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        info = os.lstat(path)
    except OSError as exc:
        raise MbdgenError(f"cannot create the folder {path}: {exc.strerror}") from None
    uid = _uid()
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif uid is not None and info.st_uid != uid:
        problem = f"belongs to another user (uid {info.st_uid})"
    elif uid is not None and info.st_mode & 0o022:
        problem = f"is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})"
    else:
        if uid is not None and info.st_mode & 0o077:
            os.chmod(path, 0o700)
        return path
    raise MbdgenError(
        f"{path} {problem}: mbdgen keeps its files only in a folder of yours that no "
        "one else can write (mode 0700); remove it, or set TMPDIR to a folder of your own"
    )


def open_no_follow(path: str | os.PathLike[str], mode: int = 0o600) -> BinaryIO:
    """``open(path, "ab")``, but a link in place of ``path`` is refused
    (:class:`MbdgenError`) instead of followed; a new file gets ``mode``."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, mode)
    except OSError:
        if os.path.islink(path):
            raise MbdgenError(
                f"{path} is a symbolic link: mbdgen does not write through links in its "
                "folders; remove it"
            ) from None
        raise
    return os.fdopen(fd, "ab")
