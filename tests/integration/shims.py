"""The LD_PRELOAD shims of the tests (tests/integration/*.c), which meson builds with hashlb
(tests/integration/meson.build) into the build root: one compiler, one command line, built
once, where each test that used one ran `cc` on it at every run."""
import os


def shim(name):
    """The path of shim <name> (tests/integration/<name>.c) as built; a missing one fails the
    test that needs it (a build of hashlb builds them all)."""
    path = os.path.join(os.environ.get("HASHLB_BUILD_ROOT", "build"), "tests", "integration",
                        name + ".so")
    if not os.path.exists(path):
        raise SystemExit(f"FAIL: {path} is not built (tests/integration/meson.build builds it "
                         "with hashlb)")
    return path
