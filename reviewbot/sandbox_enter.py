"""The half of `reviewbot.sandbox` that runs inside the new namespaces (standard library only).

`reviewbot.sandbox` starts this file as a script (`python -I -S sandbox_enter.py SPEC`) as root.
It takes a private mount, network, IPC and UTS namespace, brings the new loopback interface up,
builds the file view the revision's code gets, drops to the sandbox uid for good and executes
`unshare` to add a user and PID namespace (with a fresh /proc) around the command. SPEC is JSON:

- `uid`, `gid`: the unprivileged ids the command runs as (owning nothing of the service's);
- `argv`, `cwd`, `env`: the command, its directory and its whole environment;
- `keep`: paths the command sees at their own place (the worktree, its scratch directory, the
  interpreter, the `unshare` program), re-mounted after the masks below;
- `fresh`: directories replaced by an empty world-writable tmpfs (/tmp, /var/tmp, /dev/shm) of
  `fresh_size` each: the command sees no file another process left there and leaves none behind;
- `hide`: the service's state (database, secret files, work directory): a directory becomes an
  empty tmpfs, a file a read-only mount of /dev/null without device access (opening it fails);
- `max_processes`: RLIMIT_NPROC of the sandbox uid (processes and threads of the run).

An ancestor of a `keep` path that others may not search (such as a 0700 /root above the
interpreter) is replaced by a tmpfs holding only the way to that path. `keep` paths are cloned
with open_tree(2) before the masks go up and moved into place with move_mount(2) after (Linux 5.2).
Any failure exits with code 125 and one line on stderr starting with `sandbox:`.
"""

import ctypes
import fcntl
import json
import os
import resource
import socket
import stat
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 4
SYS_OPEN_TREE = 428  # the same number on every architecture since Linux 5.2
SYS_MOVE_MOUNT = 429
PR_SET_NO_NEW_PRIVS = 38
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 1
EXIT_SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _loopback_up() -> None:
    with socket.socket() as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def _blocked_ancestor(path: str) -> str | None:
    """The topmost proper ancestor of `path` that others may not search, if any."""
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:depth])
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return ancestor
    return None


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _open_tree(path: str) -> int:
    """A detached copy of the mount tree at `path` (open_tree(2)), to be placed later."""
    fd = _libc.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)
    if fd < 0:
        raise SetupError(f"open_tree {path}: {os.strerror(ctypes.get_errno())}")
    return fd


def _move_mount(fd: int, target: str) -> None:
    _check(
        _libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH),
        f"move_mount {target}",
    )
    os.close(fd)


def build_view(keep: list[str], fresh: list[str], hide: list[str], fresh_size: str) -> None:
    """Mount the command's file view (see the module docstring) in this private mount namespace.
    `fresh_size`: the size of each fresh tmpfs (tmpfs lives in memory: the run may fill it); the
    masks are the root's, which the run cannot write to."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = [(path, _open_tree(path)) for path in keep if os.path.exists(path)]
    masks = [(path, f"mode=1777,size={fresh_size}") for path in fresh if os.path.isdir(path)]
    for path, _ in kept:
        blocked = _blocked_ancestor(path)
        if blocked:
            masks.append((blocked, "mode=0755,size=1m"))
    masks += [(path, "mode=0755,size=1m") for path in hide if os.path.isdir(path)]
    mounted: list[str] = []
    for path, options in sorted(masks, key=lambda mask: len(mask[0])):
        if not any(_inside(path, done) for done in mounted):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
            mounted.append(path)
    for path in hide:
        if os.path.isfile(path) and not any(_inside(path, done) for done in mounted):
            _mount("/dev/null", path, None, MS_BIND)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NODEV | MS_NOSUID)
    for path, fd in kept:
        if stat.S_ISDIR(os.stat(f"/proc/self/fd/{fd}").st_mode):
            os.makedirs(path, exist_ok=True)
        elif not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w"):
                pass
        _move_mount(fd, path)


def main(spec: dict) -> None:
    os.umask(0o022)
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _loopback_up()
    build_view(spec["keep"], spec["fresh"], spec["hide"], spec["fresh_size"])
    uid, gid = int(spec["uid"]), int(spec["gid"])
    assert uid != 0 and gid != 0, "the sandbox never runs as root"
    limit = int(spec["max_processes"])
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.chdir(spec["cwd"])
    unshare = [
        spec["unshare"],
        "--user",
        f"--map-user={uid}",
        f"--map-group={gid}",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount",
        "--mount-proc",
        "--",
    ]
    os.execve(unshare[0], [*unshare, *spec["argv"]], spec["env"])


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except (SetupError, OSError) as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        sys.exit(EXIT_SETUP_FAILED)
