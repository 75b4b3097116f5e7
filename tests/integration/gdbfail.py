"""Make a worker of a running hashlb fail from outside, as the kernel can (io_uring_enter()
returning EBADR: a completion lost for want of memory): gdb attaches and changes one
io_uring_enter()'s return value. Used by test_worker_fail.py and tests/steer/test_run.py."""
import os
import platform
import shutil
import subprocess
import tempfile

EBADR = 53  # x86_64 Linux; the failure is injected there only

# Run by gdb attached to hashlb: on the first return from io_uring_enter() in thread
# HLB_FAIL_LWP (a return, not an entry: at an entry rax holds -ENOSYS), the call returns
# -HLB_FAIL_ERRNO instead; then gdb detaches, the process runs on.
GDB_SCRIPT = """\
python
import gdb, os
lwp = int(os.environ["HLB_FAIL_LWP"])
err = int(os.environ["HLB_FAIL_ERRNO"])
gdb.execute("catch syscall io_uring_enter")
while True:
    gdb.execute("continue")
    t = gdb.selected_thread()
    rax = int(gdb.parse_and_eval("$rax"))
    if t is not None and t.ptid[1] == lwp and rax != -38:
        gdb.execute("set var $rax = %d" % -err)
        print("injected: io_uring_enter returns %d in LWP %d" % (-err, lwp))
        break
gdb.execute("delete")
gdb.execute("detach")
end
"""


def unusable():
    """Why no failure can be injected here (a reason to skip), or None."""
    if not shutil.which("gdb"):
        return "gdb is not installed (scripts/setup.sh installs it)"
    if platform.machine() != "x86_64":
        return f"the failure is injected through x86_64's rax, this is {platform.machine()}"
    probe = subprocess.Popen(["sleep", "600"])
    attach = subprocess.run(["gdb", "-p", str(probe.pid), "-batch", "-nx", "-ex", "detach"],
                            capture_output=True, text=True, timeout=120)
    probe.kill()
    probe.wait()
    if "ptrace: Operation not permitted" in attach.stdout + attach.stderr:
        return "gdb may not attach to a process here (ptrace not permitted)"
    return None


def worker_tid(pid, i):
    """The thread id of worker <i> of hashlb <pid> (its name: hlb-worker<i>), or None."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == f"hlb-worker{i}":
                    return int(tid)
        except OSError:
            pass
    return None


def inject(pid, tid, err=EBADR):
    """Make thread <tid>'s (a worker's) next io_uring_enter() in hashlb <pid> return -<err>:
    (whether gdb said it did, what it printed)."""
    with tempfile.NamedTemporaryFile("w", suffix=".gdb") as f:
        f.write(GDB_SCRIPT)
        f.flush()
        env = dict(os.environ, HLB_FAIL_LWP=str(tid), HLB_FAIL_ERRNO=str(err))
        # a hang guard only: the worker enters io_uring at least every 100 ms (its tick)
        p = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-x", f.name],
                           capture_output=True, text=True, env=env, timeout=120)
    return "injected:" in p.stdout, p.stdout[-500:] + p.stderr[-500:]
