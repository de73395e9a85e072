"""Builds the snapdiff executable with CMake and packages it with the Python
side (the snapdiff package and the pytest plugin) in one wheel.

The facts (name, dependencies, entry points) are in pyproject.toml; this file
adds what setuptools cannot declare: the version from CMakeLists.txt, and a
build step that configures CMake into build-py/ (git-ignored, reused by the
next build, so a rebuild compiles only what changed) and compiles only the
target `snapdiff`, which the wheel carries as a script: `pip install .` puts it
in the environment's bin/.

    pip install --no-build-isolation .          # offline, with the build tools installed
    python3 -m build --no-isolation --wheel     # dist/snapdiff-VERSION-py3-none-linux_x86_64.whl

Environment: SNAPDIFF_CMAKE_ARGS adds CMake arguments (e.g.
"-DCMAKE_CXX_COMPILER=clang++"); CMAKE_BUILD_PARALLEL_LEVEL sets the jobs
(default: all cores). The compiler output goes to build-py/build.log and is
shown when the build fails.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.build_scripts import build_scripts
except ImportError:  # setuptools before 67: the distutils command (setuptools provides distutils)
    from distutils.command.build_scripts import build_scripts

ROOT = Path(__file__).resolve().parent
CMAKE_BUILD_DIR = "build-py"
EXECUTABLE = f"{CMAKE_BUILD_DIR}/snapdiff"


def cmake_project_version() -> str:
    """The VERSION of CMakeLists.txt's project(snapdiff ...): one place for it."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    found = re.search(r"project\(\s*snapdiff\s+VERSION\s+([0-9][0-9.]*)", text)
    if not found:
        raise SystemExit("setup.py: no project(snapdiff VERSION x.y.z) in CMakeLists.txt")
    return found.group(1)


class BuildError(SystemExit):
    pass


def _run_logged(cmd: list, log: Path, stage: str) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + shlex.join(cmd) + "\n")
        out.flush()
        try:
            done = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise BuildError(f"snapdiff: {cmd[0]} not found: install CMake and a C++20 compiler "
                             "(scripts/install-deps.sh lists the packages)") from None
    if done.returncode != 0:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        marks = re.compile(r"error:|Error [0-9]+|CMake Error|undefined reference|ld returned|Could NOT find")
        hits = [i for i, line in enumerate(lines) if marks.search(line)]
        if hits:
            shown = []
            for i in hits[:20]:
                shown.extend(lines[max(0, i - 3):i + 8])
        else:
            shown = lines[-60:]
        raise BuildError(f"snapdiff: {stage} failed (exit {done.returncode}; the whole output: {log}):\n"
                         + "\n".join(shown[:200]))


def build_executable() -> Path:
    """cmake configure + build of the target snapdiff in build-py/; the executable's path."""
    if shutil.which("cmake") is None:
        raise BuildError("snapdiff: cmake not found: install CMake and a C++20 compiler "
                         "(scripts/install-deps.sh lists the packages)")
    build_dir = ROOT / CMAKE_BUILD_DIR
    build_dir.mkdir(exist_ok=True)
    log = build_dir / "build.log"
    log.write_text("", encoding="utf-8")
    configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                 "-DSNAPDIFF_BUILD_TESTS=OFF", "-DSNAPDIFF_BUILD_CAPTURE=OFF"]
    if shutil.which("ccache"):
        configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    configure += shlex.split(os.environ.get("SNAPDIFF_CMAKE_ARGS", ""))
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    print(f"snapdiff: configuring {CMAKE_BUILD_DIR}/ (cmake)", flush=True)
    _run_logged(configure, log, "cmake configure")
    print(f"snapdiff: compiling the snapdiff executable (-j{jobs}; log {CMAKE_BUILD_DIR}/build.log)",
          flush=True)
    _run_logged(["cmake", "--build", str(build_dir), "--target", "snapdiff", "-j", jobs], log, "build")
    executable = ROOT / EXECUTABLE
    if not os.access(executable, os.X_OK):
        raise BuildError(f"snapdiff: the build made no executable {EXECUTABLE} (log {log})")
    return executable


class BuildExecutable(build_scripts):
    """build_scripts that first builds the executable, then copies it as it is
    (the stock command reads a script's first line as text to rewrite a
    Python shebang, which a compiled program does not have)."""

    def run(self) -> None:
        build_executable()
        self.mkpath(self.build_dir)
        for script in self.scripts:
            target = os.path.join(self.build_dir, os.path.basename(script))
            self.copy_file(script, target)
            os.chmod(target, 0o755)


class BinaryDistribution(Distribution):
    """The wheel carries a compiled program: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self) -> bool:
        return True


cmdclass = {"build_scripts": BuildExecutable}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        """Platform-specific, but for any Python 3: the executable does not load
        Python, so the tag is py3-none-PLATFORM (not cp311-cp311-...)."""

        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:
    # pip builds a wheel even to install; with --no-build-isolation it does not
    # fetch the wheel package, which a plain venv lacks.
    if {"bdist_wheel", "dist_info"} & set(sys.argv):
        raise SystemExit(
            "snapdiff: the Python package 'wheel' is missing here. Offline: make the venv with "
            "--system-site-packages where the system has it (Debian/Ubuntu: python3-wheel, Fedora: "
            "python3-wheel), or pip install wheel first; online: pip install . without "
            "--no-build-isolation fetches it") from None

setup(
    version=cmake_project_version(),
    scripts=[EXECUTABLE],
    distclass=BinaryDistribution,
    cmdclass=cmdclass,
    options={"build": {"build_base": f"{CMAKE_BUILD_DIR}/setuptools"}},
)
