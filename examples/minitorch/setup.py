"""minitorch's build, keeping PyTorch's setup.py contract (setup.py era, <= 2.8):

    TORCH_CUDA_ARCH_LIST="9.0" python setup.py build --cmake-only   # configure only (cmake + ninja in build/)
    cmake --build build                                              # the ninja build
    python setup.py bdist_wheel                                      # reuses build/, packages the wheel

Environment read, as PyTorch does:
  TORCH_CUDA_ARCH_LIST  X.Y, X.Y+PTX, X.Ya / X.Yf, A(B) (SASS for A from compute_B), names such as
                        Hopper or Ampere+PTX; separated by ';' or spaces. Never guessed: an empty
                        list is an error here (PyTorch would probe the build machine's GPUs).
  USE_*, BUILD_*, CMAKE_*  forwarded to CMake as -D (CMAKE_INSTALL_PREFIX excepted: forced, as PyTorch does)
  CUDA_HOME, CUDACXX / CUDA_NVCC_EXECUTABLE, CUDAHOSTCXX / CUDA_HOST_COMPILER, TORCH_NVCC_FLAGS
  MAX_JOBS              parallel jobs of the build (cmake --build -j)
  PYTORCH_BUILD_VERSION the exact wheel version (else version.txt + "+git<sha7>")
  USE_NINJA=0 / CMAKE_GENERATOR  choose the generator (default Ninja)

Like PyTorch, cmake is NOT re-run when build/CMakeCache.txt exists: a build directory keeps the
TORCH_CUDA_ARCH_LIST it was configured with (so one build tree per arch list).
"""

import json
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.join(ROOT, "build")
PACKAGE = "minitorch"
LIBRARY = "libminitorch_kernels.so"

CMAKE_ONLY = "--cmake-only" in sys.argv
if CMAKE_ONLY:
    sys.argv.remove("--cmake-only")


def report(msg):
    print(msg, flush=True)


def fail(msg):
    sys.stderr.write(f"minitorch setup.py: error: {msg}\n")
    sys.exit(1)


# ---------------------------------------------------------------------------------------------
# TORCH_CUDA_ARCH_LIST, main-build grammar (select_compute_arch.cmake)

ARCH_NAMES = {
    "Kepler+Tegra": ["3.2"], "Kepler+Tesla": ["3.7"], "Kepler": ["3.0", "3.5"],
    "Maxwell+Tegra": ["5.3"], "Maxwell": ["5.0", "5.2"], "Pascal": ["6.0", "6.1"],
    "Volta+Tegra": ["7.2"], "Volta": ["7.0"], "Turing": ["7.5"],
    "Ampere+Tegra": ["8.7"], "Ampere": ["8.0", "8.6"], "Ada": ["8.9"], "Hopper": ["9.0"],
    "Blackwell+Tegra": ["10.1"], "Blackwell": ["10.0", "12.0"],
}
ITEM = re.compile(r"^(\d+)\.(\d)([af]?)(?:\((\d+)\.(\d)([af]?)\))?(\+PTX)?$")


def parse_arch_list(text):
    """-> (cmake_architectures, extra_gencode_flags). SASS-only items become "XY-real", PTX-only
    "XY-virtual", both "XY"; "A(B)" becomes -gencode arch=compute_B,code=sm_A, and suffixed
    ones (9.0a, 10.0f) -gencode arch=compute_90a,code=sm_90a (PTX: code=compute_90a)."""
    items = [t for t in re.split(r"[;\s]+", text.strip()) if t]
    if not items:
        fail("TORCH_CUDA_ARCH_LIST is empty; set it (e.g. TORCH_CUDA_ARCH_LIST=9.0) — minitorch never "
             "guesses the build machine's GPUs")
    sass, ptx, gencode = [], [], []

    def add(lst, v):
        if v not in lst:
            lst.append(v)

    for item in items:
        with_ptx = item.endswith("+PTX")
        base = item[:-4] if with_ptx else item
        if base in ARCH_NAMES:
            archs = ARCH_NAMES[base]
            for a in archs:
                add(sass, a.replace(".", ""))
            if with_ptx:
                add(ptx, archs[-1].replace(".", ""))
            continue
        if base in ("All", "Common", "Auto"):
            fail(f"TORCH_CUDA_ARCH_LIST item '{item}': minitorch does not expand {base}; list the architectures")
        m = ITEM.match(item)
        if not m:
            fail(f"TORCH_CUDA_ARCH_LIST: unknown CUDA architecture '{item}' (valid: X.Y, X.Y+PTX, X.Ya, "
                 f"X.Yf, A(B), or one of {', '.join(ARCH_NAMES)})")
        code = m.group(1) + m.group(2) + m.group(3)
        if m.group(4):
            virt = m.group(4) + m.group(5) + m.group(6)
            add(gencode, f"-gencode=arch=compute_{virt},code=sm_{code}")
            if m.group(7):
                add(ptx, virt)
        else:
            add(sass, code)
            if m.group(7):
                add(ptx, code)
    # CMake (3.25) accepts only plain numbers: arch-/family-specific ones (90a, 100f) go as -gencode.
    archs = []
    for c in sass:
        if not c.isdigit():
            add(gencode, f"-gencode=arch=compute_{c},code=sm_{c}")
        else:
            archs.append(c if c in ptx else f"{c}-real")
    for c in ptx:
        if not c.isdigit():
            add(gencode, f"-gencode=arch=compute_{c},code=compute_{c}")
        elif c not in sass:
            archs.append(f"{c}-virtual")
    return archs, gencode


# ---------------------------------------------------------------------------------------------
# configure / build

def cmake_configure():
    cache = os.path.join(BUILD_DIR, "CMakeCache.txt")
    if os.path.exists(cache):
        report("-- build/CMakeCache.txt exists: not re-running cmake (the TORCH_CUDA_ARCH_LIST of that "
               "configure is kept; use a fresh build directory to change it)")
        return
    env = os.environ
    use_cuda = env.get("USE_CUDA", "1").upper() not in ("0", "OFF", "NO", "FALSE", "N")
    args = ["cmake", "-S", ROOT, "-B", BUILD_DIR]
    if "CMAKE_GENERATOR" not in env and env.get("USE_NINJA", "1") not in ("0", "OFF") and shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if use_cuda:
        arch_list = env.get("TORCH_CUDA_ARCH_LIST", "")
        archs, gencode = parse_arch_list(arch_list)
        args.append("-DCMAKE_CUDA_ARCHITECTURES=" + (";".join(archs) if archs else "OFF"))
        args.append("-DMINITORCH_EXTRA_GENCODE=" + " ".join(gencode))
        args.append("-DTORCH_CUDA_ARCH_LIST=" + arch_list)
        nvcc = env.get("CUDACXX") or env.get("CUDA_NVCC_EXECUTABLE")
        if not nvcc and env.get("CUDA_HOME"):
            nvcc = os.path.join(env["CUDA_HOME"], "bin", "nvcc")
        if nvcc:
            args.append("-DCMAKE_CUDA_COMPILER=" + nvcc)
        host = env.get("CUDAHOSTCXX") or env.get("CUDA_HOST_COMPILER")
        if host:
            args.append("-DCMAKE_CUDA_HOST_COMPILER=" + host)
        if env.get("TORCH_NVCC_FLAGS"):
            args.append("-DCMAKE_CUDA_FLAGS=" + env["TORCH_NVCC_FLAGS"])
    # Every USE_*, BUILD_*, CMAKE_* variable becomes a CMake definition (PyTorch's rule).
    for key in sorted(env):
        if key.startswith(("USE_", "BUILD_", "CMAKE_")):
            if key == "CMAKE_INSTALL_PREFIX":
                report("-- ignoring CMAKE_INSTALL_PREFIX from the environment (setup.py decides it)")
                continue
            if key == "CMAKE_CUDA_ARCHITECTURES" and use_cuda:
                continue  # derived from TORCH_CUDA_ARCH_LIST above
            args.append(f"-D{key}={env[key]}")
    args.append("-DUSE_CUDA=" + ("ON" if use_cuda else "OFF"))
    report("-- running: " + " ".join(args))
    subprocess.check_call(args, cwd=ROOT)


def cmake_build():
    args = ["cmake", "--build", BUILD_DIR]
    if os.environ.get("MAX_JOBS"):
        args += ["-j", os.environ["MAX_JOBS"]]
    report("-- running: " + " ".join(args))
    subprocess.check_call(args, cwd=ROOT)


def git_sha():
    try:
        return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                       stderr=subprocess.DEVNULL).decode().strip()
    except Exception:
        return "Unknown"


def get_version():
    if os.environ.get("PYTORCH_BUILD_VERSION"):
        return os.environ["PYTORCH_BUILD_VERSION"]
    with open(os.path.join(ROOT, "version.txt")) as f:
        version = f.read().strip()
    sha = git_sha()
    return version + ("+git" + sha[:7] if sha != "Unknown" else "")


VERSION = get_version()


def version_header(version):
    """include/minitorch/version.h: the exact version a dependent was compiled against."""
    release = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    major, minor, patch = release.groups() if release else ("0", "0", "0")
    return (f"// Generated by minitorch's setup.py.\n#pragma once\n"
            f"#define MINITORCH_VERSION \"{version}\"\n#define MINITORCH_VERSION_MAJOR {major}\n"
            f"#define MINITORCH_VERSION_MINOR {minor}\n#define MINITORCH_VERSION_PATCH {patch}\n")


class BuildPy(build_py):
    """Runs the (incremental) cmake build, then packages the library and the build record."""

    def run(self):
        cmake_configure()
        cmake_build()
        super().run()
        dest = os.path.join(self.build_lib, PACKAGE)
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(BUILD_DIR, LIBRARY), os.path.join(dest, LIBRARY))
        shutil.copy2(os.path.join(BUILD_DIR, "minitorch_build_info.json"), os.path.join(dest, "_build_info.json"))
        with open(os.path.join(dest, "version.py"), "w") as f:
            f.write(f"__version__ = {VERSION!r}\ngit_version = {git_sha()!r}\n")
        # The C++ side a dependent builds against, as torch ships include/torch/version.h.
        include = os.path.join(dest, "include", "minitorch")
        os.makedirs(include, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, "csrc", "minitorch.h"), os.path.join(include, "minitorch.h"))
        with open(os.path.join(include, "version.h"), "w") as f:
            f.write(version_header(VERSION))


class BinaryDistribution(Distribution):
    """The wheel carries a native library: platform-specific, like PyTorch's."""

    def has_ext_modules(self):
        return True


if CMAKE_ONLY:
    # PyTorch: `setup.py build --cmake-only` configures and stops.
    cmake_configure()
    report("Finished running cmake. Run \"cmake --build build\" to build and "
           "\"python setup.py bdist_wheel\" to package.")
    sys.exit(0)

setup(
    name="minitorch",
    version=VERSION,
    description="A tiny project with PyTorch's build contract (archbuild's test project)",
    packages=[PACKAGE],
    python_requires=">=3.8",
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPy},
    zip_safe=False,
)
