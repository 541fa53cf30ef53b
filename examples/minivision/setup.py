"""minivision's build: a dependent of minitorch, built the way torchvision and CUDA extensions are
built against an installed torch (`pip install --no-build-isolation`, or `python setup.py build`):

    TORCH_CUDA_ARCH_LIST="9.0" CUDA_HOME=/usr/local/cuda python setup.py build    # or bdist_wheel

- It imports the minitorch the Python has, checks its version against minitorch_version.txt and
  refuses any other (the build fails naming the version it found): a dependent compiled against
  another torch fails later at import.
- It compiles csrc/ops.cu with minitorch's installed headers (minitorch.get_include()).
- TORCH_CUDA_ARCH_LIST is read in the extension grammar (torch.utils.cpp_extension): X.Y, X.Ya,
  +PTX, names that carry PTX on their last arch (Hopper = 9.0+PTX); no `f`, no A(B). Empty is an
  error here (cpp_extension would probe this machine's GPUs).
- CUDA_HOME (else nvcc on PATH), CUDAHOSTCXX (nvcc -ccbin), NVCC_THREADS (nvcc --threads).
- BUILD_VERSION: the wheel's version (default: version.txt), as torchvision reads it.
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join(ROOT, "build", "native")
LIBRARY = "_ops.so"


def read(name):
    with open(os.path.join(ROOT, name)) as f:
        return f.read().strip()


# BUILD_VERSION (with its local label, e.g. 0.1.0+cu130.sm90) as torchvision's setup.py reads it.
VERSION = os.environ.get("BUILD_VERSION") or read("version.txt")
MINITORCH_RELEASE = read("minitorch_version.txt")


def fail(msg):
    sys.stderr.write(f"minivision setup.py: error: {msg}\n")
    sys.exit(1)


def minitorch_build_facts():
    """(version, include dir) of the installed minitorch, or fail naming what was found."""
    try:
        import minitorch
    except ImportError as e:
        fail(f"cannot import minitorch ({e}); install the minitorch wheel into this Python first "
             f"({sys.executable}) and build with --no-build-isolation")
    version = str(minitorch.__version__)
    where = os.path.dirname(os.path.abspath(minitorch.__file__))
    if version.split("+")[0] != MINITORCH_RELEASE:
        fail(f"found minitorch {version} at {where}; minivision {VERSION} builds only against minitorch "
             f"{MINITORCH_RELEASE} (install that one, or use the minivision release made for {version})")
    include = minitorch.get_include() if hasattr(minitorch, "get_include") else ""
    if not os.path.isfile(os.path.join(include, "minitorch", "version.h")):
        fail(f"minitorch {version} at {where} ships no C++ headers (include/minitorch/version.h)")
    return version, include


# TORCH_CUDA_ARCH_LIST, extension grammar (torch.utils.cpp_extension._get_cuda_arch_flags)
NAMES = {
    "Kepler+Tesla": ["3.7"], "Kepler": ["3.5+PTX"], "Maxwell+Tegra": ["5.3"], "Maxwell": ["5.0", "5.2+PTX"],
    "Pascal": ["6.0", "6.1+PTX"], "Volta+Tegra": ["7.2"], "Volta": ["7.0+PTX"], "Turing": ["7.5+PTX"],
    "Ampere+Tegra": ["8.7"], "Ampere": ["8.0", "8.6+PTX"], "Ada": ["8.9+PTX"], "Hopper": ["9.0+PTX"],
    "Blackwell+Tegra": ["11.0"], "Blackwell": ["10.0", "10.3", "12.0", "12.1+PTX"],
}
ITEM = re.compile(r"^(\d+)\.(\d)(a?)(\+PTX)?$")


def gencode_flags(text):
    items = [t for t in re.split(r"[;\s]+", text.strip()) if t]
    if not items:
        fail("TORCH_CUDA_ARCH_LIST is empty; set it (e.g. 9.0) — minivision never probes this machine's GPUs")
    flags = []
    for item in items:
        for arch in NAMES.get(item, [item]):
            m = ITEM.match(arch)
            if not m:
                fail(f"Unknown CUDA arch ({arch}) or GPU not supported: TORCH_CUDA_ARCH_LIST is read in the "
                     f"extension grammar (X.Y, X.Ya, X.Y+PTX, names; no 'f' suffix, no A(B))")
            num = m.group(1) + m.group(2) + m.group(3)
            for flag in [f"-gencode=arch=compute_{num},code=sm_{num}"] + (
                    [f"-gencode=arch=compute_{num},code=compute_{num}"] if m.group(4) else []):
                if flag not in flags:
                    flags.append(flag)
    return flags


def nvcc_path():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return os.path.join(home, "bin", "nvcc")
    found = shutil.which("nvcc")
    if not found:
        fail("no nvcc: set CUDA_HOME")
    return found


def compile_ops():
    version, include = minitorch_build_facts()
    flags = gencode_flags(os.environ.get("TORCH_CUDA_ARCH_LIST", ""))
    os.makedirs(NATIVE, exist_ok=True)
    argv = [nvcc_path(), "-shared", "-Xcompiler", "-fPIC", "-O2", "-I", include] + flags
    if os.environ.get("CUDAHOSTCXX"):
        argv += ["-ccbin", os.environ["CUDAHOSTCXX"]]
    if os.environ.get("NVCC_THREADS"):
        argv += ["--threads", os.environ["NVCC_THREADS"]]
    argv += [os.path.join(ROOT, "csrc", "ops.cu"), "-o", os.path.join(NATIVE, LIBRARY)]
    print("minivision: " + " ".join(argv), flush=True)
    subprocess.run(argv, check=True)
    with open(os.path.join(NATIVE, "built_against.txt"), "w") as f:
        f.write(version + "\n")
    return version


class BuildPy(build_py):
    def run(self):
        compile_ops()
        super().run()
        dest = os.path.join(self.build_lib, "minivision")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(NATIVE, LIBRARY), os.path.join(dest, LIBRARY))
        shutil.copy2(os.path.join(NATIVE, "built_against.txt"), os.path.join(dest, "_built_against.txt"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


def requirements():
    # The wheel pins the exact minitorch it was compiled against, as a dependent of a custom
    # torch must (torch==<version with its local label>); only known when minitorch is importable.
    try:
        import minitorch
        return [f"minitorch=={minitorch.__version__}"]
    except ImportError:
        return [f"minitorch=={MINITORCH_RELEASE}"]


setup(
    name="minivision",
    version=VERSION,
    description="A dependent of minitorch with a CUDA op (archbuild's test project)",
    packages=["minivision"],
    python_requires=">=3.8",
    install_requires=requirements(),
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPy},
    zip_safe=False,
)
