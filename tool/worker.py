# Sandbox worker for package tool (embedded into the Go binary with go:embed).
#
# Started by Go as `python3 -I -c <bootstrap> <config json>`, where the short
# bootstrap reads this file from fd 5 (so that it does not fill the command
# line that ps shows), closes fd 5 and runs it; possibly as PID 1 of fresh
# user, mount, PID, network, IPC and UTS namespaces. It sets up the
# sandbox's file system (when it has a mount namespace), then serves requests
# read from fd 3 and answers on fd 4, one at a time. Each request runs in a
# child forked ahead of time, which has dropped its privileges and waits for
# the request; it applies the call's rlimits and runs the code with a fresh
# globals dict. The worker itself never runs model code, so nothing a
# snippet does survives into the next call. After answering, the worker
# kills every process left in the sandbox, empties the scratch directories,
# forks the next child and only then tells Go it is ready for another
# request.
#
# Frames (both directions): 4-byte big-endian length of a JSON header, the
# header, then the raw payloads whose lengths the header names. After the
# hello, each request gets a response frame and then a ready frame.

import builtins
import ctypes
import errno
import gc
import json
import linecache
import os
import resource
import select
import signal
import stat
import struct
import sys
import time
import traceback

REQ_FD = 3
RESP_FD = 4

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

# Signals the worker must survive when a snippet that shares its uid sends them.
IGNORED = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
           signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE, signal.SIGTSTP,
           signal.SIGTTIN, signal.SIGTTOU, signal.SIGALRM]

CFG = json.loads(sys.argv[1])
# Paths inside the scratch directories that clean_dir must keep: read-only
# mounts, and the directories that lead to them.
KEEP = set()
KEEP_PARENTS = set()
LIBC = ctypes.CDLL(None, use_errno=True)


def check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def mount(src, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    check(LIBC.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
          "mount %s on %s" % (src, target))


def read_exact(fd, n):
    chunks = []
    while n > 0:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def read_frame():
    (n,) = struct.unpack(">I", read_exact(REQ_FD, 4))
    return json.loads(read_exact(REQ_FD, n))


def write_frame(header, *payloads):
    h = json.dumps(header).encode()
    data = struct.pack(">I", len(h)) + h + b"".join(payloads)
    view = memoryview(data)
    while view:
        n = os.write(RESP_FD, view)
        view = view[n:]


# ---------------------------------------------------------------- set-up

def mount_flags(path):
    # Remounting a bind mount read-only inside a user namespace must keep the
    # flags the kernel locked on the original mount (nosuid, nodev, ...).
    f = os.statvfs(path).f_flag
    flags = 0
    for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                   (getattr(os, "ST_NOATIME", 1024), 1024), (getattr(os, "ST_NODIRATIME", 2048), 2048),
                   (getattr(os, "ST_RELATIME", 4096), 1 << 21)):
        if f & st:
            flags |= ms
    return flags


def python_dirs():
    dirs = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    dirs += [p for p in sys.path if p and os.path.isabs(p)]
    return [d for d in dirs if os.path.exists(d)]


def setup_namespaces(info):
    """Builds a new root on a tmpfs and pivots into it.

    Visible afterwards, read-only: the system directories, the interpreter's
    own prefix and module path, a few files of /etc and the paths the caller
    named. Writable: /work (the working directory), /tmp and /dev/shm, each a
    size-capped tmpfs. Everything else, including /etc/shadow, the host's
    /tmp and /home and the project that started the sandbox, is absent.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    wanted = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
              "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives",
              "/etc/ssl/certs"]
    wanted += python_dirs() + list(CFG.get("ro_paths") or [])
    # Open every source first: the new root is mounted over /tmp, which may
    # hide some of them.
    sources = []
    seen = set()
    for p in wanted:
        p = os.path.normpath(p)
        if p in seen or not os.path.lexists(p):
            continue
        seen.add(p)
        if os.path.islink(p):
            sources.append((p, None, os.readlink(p)))
            real = os.path.realpath(p)
            if real not in seen and os.path.exists(real):
                seen.add(real)
                sources.append((real, os.open(real, os.O_PATH | os.O_CLOEXEC), None))
            continue
        sources.append((p, os.open(p, os.O_PATH | os.O_CLOEXEC), None))
    devs = []
    for d in ("null", "zero", "full", "random", "urandom"):
        try:
            devs.append((d, os.open("/dev/" + d, os.O_PATH | os.O_CLOEXEC)))
        except OSError:
            pass

    root = "/tmp"
    mount("sandbox-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    # The writable scratch file systems come first, so that read-only paths
    # under them (a data set in the host's /tmp, say) are bound on top.
    uid = CFG["uid"]
    size = CFG["tmpfs_bytes"]
    opts = "mode=0700,size=%d,uid=%d,gid=%d" % (size, uid, uid)
    for d in CFG["scratch"]:
        os.makedirs(root + d, exist_ok=True)
        mount("sandbox-" + d.strip("/").replace("/", "-"), root + d, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    # Parents are mounted before their children.
    sources.sort(key=lambda s: s[0].count("/"))
    for path, fd, link in sources:
        for d in CFG["scratch"]:
            if path.startswith(d + "/"):
                # Cleaning the scratch directory between calls keeps this
                # path and the directories leading to it.
                KEEP.add(path)
                p = os.path.dirname(path)
                while p != d:
                    KEEP_PARENTS.add(p)
                    p = os.path.dirname(p)
    for path, fd, link in sources:
        target = root + path
        if link is not None:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                os.symlink(link, target)
            continue
        isdir = stat.S_ISDIR(os.fstat(fd).st_mode)
        if os.path.lexists(target):
            # Already visible through a parent mount (e.g. the prefix lives under /usr).
            os.close(fd)
            continue
        os.makedirs(target if isdir else os.path.dirname(target), exist_ok=True)
        if not isdir:
            open(target, "w").close()
        src = "/proc/self/fd/%d" % fd
        mount(src, target, None, MS_BIND)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | mount_flags(target))
        os.close(fd)

    os.makedirs(root + "/dev", exist_ok=True)
    for d, fd in devs:
        target = root + "/dev/" + d
        open(target, "w").close()
        mount("/proc/self/fd/%d" % fd, target, None, MS_BIND)
        os.close(fd)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, root + "/dev/" + name)

    os.makedirs(root + "/etc", exist_ok=True)
    with open(root + "/etc/passwd", "w") as f:
        f.write("root:x:0:0:root:/work:/bin/sh\nsandbox:x:%d:%d:sandbox:/work:/bin/sh\n" % (uid, uid))
    with open(root + "/etc/group", "w") as f:
        f.write("root:x:0:\nsandbox:x:%d:\n" % uid)
    with open(root + "/etc/hosts", "w") as f:
        f.write("127.0.0.1 localhost\n")
    os.makedirs(root + "/proc", exist_ok=True)
    try:
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        info["proc"] = True
    except OSError as e:
        info["proc"] = False
        info["proc_error"] = str(e)

    os.chdir(root)
    nr = PIVOT_ROOT.get(os.uname().machine)
    if nr is not None:
        check(LIBC.syscall(ctypes.c_long(nr), b".", b"."), "pivot_root")
        check(LIBC.umount2(b".", MNT_DETACH), "umount old root")
    else:
        mount(".", "/", None, 1 << 13)  # MS_MOVE
        os.chroot(".")
    os.chdir("/")
    # The root tmpfs itself becomes read-only; /work, /tmp and /dev/shm stay writable.
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    try:
        LIBC.sethostname(b"sandbox", 7)
    except Exception:
        pass
    # Snippets may not nest user namespaces of their own.
    try:
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
        info["nested_userns"] = False
    except OSError:
        info["nested_userns"] = True
    info["filesystem"] = "private"
    info["network"] = "none"


def drop_bounding_set():
    for cap in range(64):
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def clear_capabilities():
    hdr = CapHeader(0x20080522, 0)
    data = (CapData * 2)()
    check(LIBC.capset(ctypes.byref(hdr), data), "capset")


# ---------------------------------------------------------------- one call
#
# The child that runs a call is forked ahead of time, while the worker is
# idle, right after the previous call was cleaned up: it gives up its
# privileges, sets up its file descriptors, environment and standard
# streams, then blocks reading its request from CHILD_REQ_FD. A request thus
# costs a pipe write, the code and the child's report, not a fork. Limits
# that depend on the request (and RLIMIT_CPU, which must count the code's
# time) are applied once the request has arrived.
#
# The child reports on CHILD_STATUS_FD: b"r" once it is ready (before any
# model code runs, so the worker trusts it), and b"d" plus the exit code
# after the code has run, its output was flushed and its stdout and stderr
# were closed. The worker answers as soon as it has that report and end of
# file on both output pipes, without waiting for the kernel to tear the
# child's address space down (hundreds of microseconds, growing with the
# worker's size); the clean-up after the answer kills and reaps the child.
# Model code can write a false report to the descriptor, but only about
# itself: the worker answers early only once both output pipes are closed,
# and it kills everything before it accepts the next request.

CHILD_REQ_FD = 3
CHILD_STATUS_FD = 4
# The child's request: CPU seconds, address space, processes, file size,
# open files, then the lengths of the code and of stdin, which follow.
CHILD_REQ = struct.Struct("<qqqqqqq")
# Compiled once in each child before it reports ready, so that the pages
# the compiler writes are copied before the clock of a call starts.
WARM_UP = "def f(x):\n    return [x, {'a': x}, (x, 1.5), 'text %s' % x]\nprint(f(1))\n"


def become_sandbox_user():
    """Runs in the child: gives up every privilege before model code runs."""
    mode = CFG["drop"]
    if mode == "setuid":
        uid = CFG["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    elif mode == "capabilities":
        clear_capabilities()
    LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # Die with the worker (changing credentials cleared any earlier
    # setting), so that no idle child outlives it without a PID namespace.
    LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def apply_limits(cpu, as_, nproc, fsize, nofile):
    """Sets the call's rlimits in the child. RLIMIT_CPU counts the process's
    whole CPU time; the whole seconds the child used before its request (none,
    in practice: its set-up takes milliseconds) are added, so that the limit
    bounds the code as it did when the child was forked for the request."""
    def setl(which, v, hard=None):
        if v <= 0:
            return
        resource.setrlimit(which, (v, v if hard is None else hard))
    if cpu > 0:
        t = os.times()
        cpu += int(t.user + t.system)
        setl(resource.RLIMIT_CPU, cpu, cpu + 1)
    setl(resource.RLIMIT_AS, as_)
    setl(resource.RLIMIT_NPROC, nproc)
    setl(resource.RLIMIT_FSIZE, fsize)
    setl(resource.RLIMIT_NOFILE, nofile)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def child_main(req_r, status_w, out_w, err_w):
    """Runs in a freshly forked child: gets ready, waits for one request,
    runs it, reports and exits. Never returns."""
    try:
        os.setpgid(0, 0)
        for s in IGNORED + [signal.SIGCHLD]:
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as in a fresh python3
        stdin_fd = -1
        if hasattr(os, "memfd_create"):
            stdin_fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
        else:
            stdin_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(req_r, CHILD_REQ_FD, inheritable=False)
        os.dup2(status_w, CHILD_STATUS_FD, inheritable=False)
        os.closerange(CHILD_STATUS_FD + 1, max(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
        os.chdir(CFG["workdir"])
        become_sandbox_user()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": CFG["workdir"], "LANG": "C.UTF-8",
               "TMPDIR": CFG["tmpdir"], "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        os.environ.clear()
        os.environ.update(env)
        sys.stdin = open(0, "r", encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False,
                          buffering=1)
        sys.argv = [""]
        sys.path[0:0] = [CFG["workdir"]]
        compile(WARM_UP, "<warm-up>", "exec", dont_inherit=True)
        os.write(CHILD_STATUS_FD, b"r")
        # Idle until the request comes; end of file means the worker is gone.
        cpu, as_, nproc, fsize, nofile, code_len, stdin_len = CHILD_REQ.unpack(
            read_exact(CHILD_REQ_FD, CHILD_REQ.size))
        code = read_exact(CHILD_REQ_FD, code_len) if code_len else b""
        stdin = read_exact(CHILD_REQ_FD, stdin_len) if stdin_len else b""
        os.close(CHILD_REQ_FD)
        if stdin:
            view = memoryview(stdin)
            while view:
                view = view[os.write(0, view):]
            os.lseek(0, 0, os.SEEK_SET)
        del stdin
        apply_limits(cpu, as_, nproc, fsize, nofile)
    except BaseException:
        os._exit(126)
    status = 0
    name = "<code>"
    try:
        src = code.decode("utf-8", "replace")
        del code
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        compiled = compile(src, name, "exec", dont_inherit=True)
        exec(compiled, {"__name__": "__main__", "__builtins__": builtins, "__file__": name})
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code & 0xFF
        else:
            try:
                print(e.code, file=sys.stderr)
            except BaseException:
                pass
            status = 1
    except BaseException as e:
        status = 1
        try:
            tb = e.__traceback__
            # Hide the worker's own frame: the model sees its code only.
            if tb is not None and tb.tb_frame.f_code.co_filename != name:
                tb = tb.tb_next
            traceback.print_exception(type(e), e, tb)
        except BaseException:
            pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            status = status or 120
    try:
        os.close(1)
        os.close(2)
        os.write(CHILD_STATUS_FD, bytes((ord("d"), status)))
    except BaseException:
        pass
    os._exit(status)


class Child:
    """The worker's handle on a pre-forked child: its pid, a pidfd when the
    kernel has them, and the worker's ends of its pipes."""

    def __init__(self):
        self.pid = None
        self.pidfd = None
        self.fds = []

    def close(self):
        for fd in self.fds + ([self.pidfd] if self.pidfd is not None else []):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        self.pidfd = None

    def alive(self):
        if self.pidfd is not None:
            return not select.select([self.pidfd], [], [], 0)[0]
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False


def prefork():
    """Forks the child for the next call and waits until it is ready."""
    c = Child()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    req_r, req_w = os.pipe()
    status_r, status_w = os.pipe()
    c.out_r, c.err_r, c.req_w, c.status_r = out_r, err_r, req_w, status_r
    c.fds = [out_r, err_r, req_w, status_r]
    try:
        pid = os.fork()
    except BaseException:
        c.close()
        for fd in (out_w, err_w, req_r, status_w):
            os.close(fd)
        raise
    if pid == 0:
        try:
            child_main(req_r, status_w, out_w, err_w)
        finally:
            os._exit(126)
    c.pid = pid
    for fd in (out_w, err_w, req_r, status_w):
        os.close(fd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    if hasattr(os, "pidfd_open"):
        try:
            c.pidfd = os.pidfd_open(pid)
        except OSError:
            pass
    # The child's set-up takes milliseconds; a minute means it is stuck.
    ready, _, _ = select.select([status_r], [], [], 60)
    b = os.read(status_r, 1) if ready else b""
    if b != b"r":
        reap_all(pid)
        c.close()
        raise OSError("the pre-forked child did not start (%s)" % ("timeout" if not ready else "exited"))
    return c


def children_of(pid):
    try:
        out = []
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
        return out
    except OSError:
        pass
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def reap_all(pid):
    """Kills every process the call left behind, reaps them all, and returns
    the wait status of the call's main process pid (None if it was not seen)."""
    status = None
    if CFG["pid_ns"]:
        # As PID 1 of the namespace, kill(-1) reaches every other process in it.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        while True:
            try:
                wpid, st = os.waitpid(-1, 0)
            except ChildProcessError:
                return status
            except InterruptedError:
                continue
            if wpid == pid:
                status = st
    # Without a PID namespace the worker is a child subreaper: orphans of the
    # call are re-parented to it, so killing its children until none remain
    # gets them all, whatever sessions or process groups they made.
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    me = os.getpid()
    for _ in range(10000):
        kids = children_of(me)
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                wpid, st = os.waitpid(-1, 0 if kids else os.WNOHANG)
            except ChildProcessError:
                return status
            if wpid == 0:
                break
            if wpid == pid:
                status = st
            if kids:
                break
        if not kids:
            return status
    return status


def clean_ipc():
    """Removes the System V IPC objects a call left in the worker's own IPC
    namespace (POSIX shared memory lives in /dev/shm, emptied separately)."""
    IPC_RMID = 0
    for kind, rm in (("shm", lambda i: LIBC.shmctl(i, IPC_RMID, None)),
                     ("sem", lambda i: LIBC.semctl(i, 0, IPC_RMID)),
                     ("msg", lambda i: LIBC.msgctl(i, IPC_RMID, None))):
        try:
            with open("/proc/sysvipc/" + kind) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].isdigit():
                rm(int(fields[1]))


def clean_dir(path):
    """Empties a scratch directory, whatever modes the snippet left on it,
    keeping only the read-only mounts inside it (KEEP) and their parents."""
    for dirpath, dirnames, filenames in os.walk(path, topdown=True):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in KEEP]
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if p not in KEEP_PARENTS:
                try:
                    os.chmod(p, 0o700)
                except OSError:
                    pass
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        if dirpath in KEEP or any(dirpath.startswith(k + "/") for k in KEEP):
            continue
        for f in filenames:
            p = os.path.join(dirpath, f)
            if p not in KEEP:
                os.unlink(p)
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if p in KEEP or p in KEEP_PARENTS:
                continue
            if os.path.islink(p):
                os.unlink(p)
            else:
                os.rmdir(p)
    left = [e for e in os.listdir(path) if os.path.join(path, e) not in KEEP | KEEP_PARENTS]
    if left:
        raise OSError("scratch directory %s not empty: %s" % (path, left[:5]))


def write_files(files, blob):
    off = 0
    for f in files:
        name = f["name"]
        data = blob[off:off + f["len"]]
        off += f["len"]
        if os.path.isabs(name) or ".." in name.split("/") or not name:
            raise ValueError("bad file name %r" % name)
        p = os.path.join(CFG["workdir"], name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as fh:
            fh.write(data)
        if CFG["drop"] == "setuid":
            os.chown(p, CFG["uid"], CFG["uid"])


def serve_one(req, c):
    """Runs one request on the pre-forked child c and returns the response
    header and the output. Killing what the call left behind and cleaning
    up come after the answer (clean_up)."""
    t0 = time.monotonic()
    code = read_exact(REQ_FD, req["code_len"]) if req["code_len"] else b""
    stdin = read_exact(REQ_FD, req["stdin_len"]) if req["stdin_len"] else b""
    files = read_exact(REQ_FD, req["files_len"]) if req["files_len"] else b""
    if req.get("files"):
        write_files(req["files"], files)
    lim = req["limits"]
    msg = CHILD_REQ.pack(lim.get("cpu") or 0, lim.get("as") or 0, lim.get("nproc") or 0,
                         lim.get("fsize") or 0, lim.get("nofile") or 0, len(code), len(stdin))
    view = memoryview(msg + code + stdin)
    while view:
        view = view[os.write(c.req_w, view):]
    del code, stdin, files, view
    pid = c.pid
    cap = req["max_output"]
    deadline = t0 + req["timeout"]
    bufs = {c.out_r: [], c.err_r: []}
    got = [0, 0]  # bytes kept, bytes seen
    timed_out = False
    output_limited = False
    status = None
    reported = None  # the exit code the child reported, if it did
    open_outputs = {c.out_r, c.err_r}
    poller = select.poll()
    for fd in (c.out_r, c.err_r, c.status_r):
        poller.register(fd, select.POLLIN | select.POLLHUP)
    exited = c.pidfd is None
    if c.pidfd is not None:
        poller.register(c.pidfd, select.POLLIN)
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        wait = deadline - now
        if c.pidfd is None:
            wait = min(wait, 0.005)
        for fd, ev in poller.poll(max(1, int(wait * 1000 + 0.999))):
            if fd == c.pidfd:
                poller.unregister(fd)
                exited = True
            elif fd == c.status_r:
                b = os.read(fd, 16)
                if len(b) == 2 and b[0] == ord("d") and reported is None:
                    reported = b[1]
                else:
                    # End of file, or bytes that are no report: the exit
                    # status alone says how the call ended.
                    poller.unregister(fd)
                    if b:
                        reported = None
            elif not keep(fd, bufs, cap, got):
                poller.unregister(fd)
                open_outputs.discard(fd)
        if got[1] > cap:
            # More output than the cap: stop reading now rather than drain
            # whatever the snippet still means to write.
            output_limited = True
            break
        if reported is not None and not open_outputs:
            break
        if exited:
            try:
                wpid, st = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                wpid, st = pid, 0
            if wpid == pid:
                status = st
                break
    duration = time.monotonic() - t0
    if status is None and reported is not None and not open_outputs and not timed_out and not output_limited:
        # The code ran to its end and every writer of its output is gone:
        # answer now; clean_up kills and reaps the exiting child.
        exit_code, sig = reported, 0
    else:
        # The call is over when its main process is: background processes
        # that still hold the pipes are killed with everything else it
        # started, before what they wrote is drained.
        st = reap_all(pid)
        if status is None:
            status = st if st is not None else 0
        for fd in (c.out_r, c.err_r):
            if fd not in open_outputs:
                continue
            # Every writer is dead now, so each pipe ends in EOF after what is buffered.
            end = time.monotonic() + 0.5
            os.set_blocking(fd, False)
            while time.monotonic() < end:
                try:
                    if not keep(fd, bufs, cap, got):
                        break
                except BlockingIOError:
                    select.select([fd], [], [], 0.05)
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    output_limited = output_limited or got[1] > cap
    out = b"".join(bufs[c.out_r])
    err = b"".join(bufs[c.err_r])
    resp = {"stdout_len": len(out), "stderr_len": len(err), "timed_out": timed_out,
            "output_limited": output_limited, "exit_code": exit_code, "signal": sig,
            "duration": duration}
    return resp, out, err


def clean_up(c):
    """Kills every process the call left, then empties the scratch
    directories (and, under namespaces, System V IPC). Returns an error
    message when the sandbox could not be made clean."""
    reap_all(c.pid)
    c.close()
    if CFG["namespaces"]:
        clean_ipc()
    for d in CFG["scratch"]:
        try:
            clean_dir(d)
        except OSError as e:
            return str(e)
    return ""


def keep(fd, bufs, cap, got):
    """Reads once from fd, keeping what fits under the cap; False at EOF."""
    b = os.read(fd, 65536)
    if not b:
        return False
    got[1] += len(b)
    room = cap - got[0]
    if room > 0:
        b = b[:room]
        bufs[fd].append(b)
        got[0] += len(b)
    return True



def main():
    info = {"pid": os.getpid(), "python": sys.version.split()[0]}
    for s in IGNORED:
        signal.signal(s, signal.SIG_IGN)
    try:
        if CFG["namespaces"]:
            setup_namespaces(info)
        else:
            info["filesystem"] = "host"
            info["network"] = "host"
            LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if CFG["drop"] != "none":
            drop_bounding_set()
        # Same-uid snippets must not ptrace the worker or read its memory.
        LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        for m in CFG.get("preload") or []:
            __import__(m)
        for d in CFG["scratch"]:
            clean_dir(d)
        # Everything allocated so far lives as long as the worker: moving it
        # out of the collector's reach keeps a child's collections from
        # touching (and so copying) the worker's pages.
        gc.collect()
        gc.freeze()
        child = prefork()
    except BaseException as e:
        write_frame({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        return
    info["ok"] = True
    write_frame(info)
    # Each call: a request, its answer, then the clean-up and the next
    # child, then a "ready" frame. Go sends no request before that frame,
    # so no call ever sees what the previous one left.
    while True:
        try:
            req = read_frame()
        except EOFError:
            return
        if not child.alive():
            # Killed while idle (from outside the sandbox). Go moved that
            # child into the call's cgroup and watches it; a new one would
            # be neither, so the worker gives up and Go replaces it (Go
            # checks the child before each request, so this is a race of
            # microseconds).
            clean_up(child)
            write_frame({"stdout_len": 0, "stderr_len": 0,
                         "error": "the child forked for this call died while idle"})
            return
        try:
            resp, out, err = serve_one(req, child)
        except Exception as e:
            # The request could not be served (a file that does not fit,
            # the child gone): say so, and let Go replace this worker,
            # whose state is now unknown.
            clean_up(child)
            write_frame({"stdout_len": 0, "stderr_len": 0, "error": "%s: %s" % (type(e).__name__, e)})
            return
        write_frame(resp, out, err)
        ready = {"ready": True}
        problem = clean_up(child)
        if not problem:
            try:
                child = prefork()
            except Exception as e:
                problem = "%s: %s" % (type(e).__name__, e)
        if problem:
            write_frame({"ready": False, "error": problem})
            return
        write_frame(ready)


main()
