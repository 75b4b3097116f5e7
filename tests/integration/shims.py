"""The LD_PRELOAD shims of the tests (tests/integration/*.c), which meson builds with hashlb
(tests/integration/meson.build) into the build root: one compiler, one command line, built
once, where each test that used one ran `cc` on it at every run."""
import os
import socket


def shim(name):
    """The path of shim <name> (tests/integration/<name>.c) as built; a missing one fails the
    test that needs it (a build of hashlb builds them all)."""
    path = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "tests", "integration",
                        name + ".so")
    if not os.path.exists(path):
        raise SystemExit(f"FAIL: {path} is not built (tests/integration/meson.build builds it "
                         "with hashlb)")
    return path


def _asan_options():
    """ASAN_OPTIONS for a process that preloads a shim: ours, and the shim (uninstrumented,
    loaded before a sanitizer's runtime) not refused for its link order."""
    return os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"


def shim_env(name, **extra):
    """The environment of a process run with shim <name> preloaded: ours, LD_PRELOAD, <extra>
    (the shim's settings) and ASAN_OPTIONS letting the shim load before a sanitizer."""
    return dict(os.environ, LD_PRELOAD=shim(name), **extra, ASAN_OPTIONS=_asan_options())


def shim_wrap(name, *env_pairs):
    """A command prefix ("env", ...) that runs the rest with shim <name> preloaded, the
    "KEY=value" <env_pairs> (the shim's settings) set, and ASAN_OPTIONS letting the shim load
    before a sanitizer."""
    return ("env", f"LD_PRELOAD={shim(name)}", *env_pairs, f"ASAN_OPTIONS={_asan_options()}")


class Paused:
    """A process held at one point <at> of its start by start_pause.c until go(): "open:PATH",
    as it opens PATH (a config: it is loading); "sigprocmask", just after hashlb run's first
    mask; "bind", before it binds its admin endpoint's Unix socket; "main", in main() before the command
    runs. Start it with .wrap, a command prefix that execs it with the shim (after any
    unshare, sh or prlimit, which would stop there instead), and .pass_fds; then reached()."""

    def __init__(self, at):
        self._ours, self._theirs = socket.socketpair()
        self.pass_fds = (self._theirs.fileno(),)
        self.wrap = shim_wrap("start_pause", f"HLB_TEST_PAUSE_AT={at}",
                              f"HLB_TEST_PAUSE_FD={self._theirs.fileno()}")

    def reached(self, timeout=30):
        """Whether the process started reached the point within <timeout> s."""
        self._theirs.close()
        self._ours.settimeout(timeout)
        try:
            return self._ours.recv(1) == b"p"
        except OSError:
            return False

    def go(self):
        """Let it go on."""
        self._ours.close()
