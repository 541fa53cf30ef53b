"""TORCH_CUDA_ARCH_LIST (main-build grammar) -> what CMake needs, printed as two lines:
CMAKE_CUDA_ARCHITECTURES (';'-separated, or OFF) and extra -gencode flags (space-separated).
CMakeLists.txt runs it with the build's Python, the way PyTorch 2.14's CMake asks Python for
the environment. The grammar is examples/minitorch/setup.py's (X.Y, X.Y+PTX, X.Ya / X.Yf, A(B),
names such as Hopper); an empty list is an error — the build machine's GPUs are never guessed."""

import re
import sys

ARCH_NAMES = {
    "Kepler+Tegra": ["3.2"], "Kepler+Tesla": ["3.7"], "Kepler": ["3.0", "3.5"],
    "Maxwell+Tegra": ["5.3"], "Maxwell": ["5.0", "5.2"], "Pascal": ["6.0", "6.1"],
    "Volta+Tegra": ["7.2"], "Volta": ["7.0"], "Turing": ["7.5"],
    "Ampere+Tegra": ["8.7"], "Ampere": ["8.0", "8.6"], "Ada": ["8.9"], "Hopper": ["9.0"],
    "Blackwell+Tegra": ["10.1"], "Blackwell": ["10.0", "12.0"],
}
ITEM = re.compile(r"^(\d+)\.(\d)([af]?)(?:\((\d+)\.(\d)([af]?)\))?(\+PTX)?$")


def fail(msg):
    sys.stderr.write(f"minitorch-skbuild: {msg}\n")
    sys.exit(1)


def parse(text):
    items = [t for t in re.split(r"[;\s]+", text.strip()) if t]
    if not items:
        fail("TORCH_CUDA_ARCH_LIST is empty; set it (e.g. TORCH_CUDA_ARCH_LIST=9.0)")
    sass, ptx, gencode = [], [], []

    def add(lst, v):
        if v not in lst:
            lst.append(v)

    for item in items:
        with_ptx = item.endswith("+PTX")
        base = item[:-4] if with_ptx else item
        if base in ARCH_NAMES:
            for a in ARCH_NAMES[base]:
                add(sass, a.replace(".", ""))
            if with_ptx:
                add(ptx, ARCH_NAMES[base][-1].replace(".", ""))
            continue
        m = ITEM.match(item)
        if not m:
            fail(f"TORCH_CUDA_ARCH_LIST: unknown CUDA architecture '{item}' (valid: X.Y, X.Y+PTX, X.Ya, X.Yf, "
                 f"A(B), or one of {', '.join(ARCH_NAMES)})")
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
    archs = []
    for c in sass:
        if not c.isdigit():  # 90a, 100f: CMake 3.25 takes plain numbers only
            add(gencode, f"-gencode=arch=compute_{c},code=sm_{c}")
        else:
            archs.append(c if c in ptx else f"{c}-real")
    for c in ptx:
        if not c.isdigit():
            add(gencode, f"-gencode=arch=compute_{c},code=compute_{c}")
        elif c not in sass:
            archs.append(f"{c}-virtual")
    return archs, gencode


if __name__ == "__main__":
    archs, gencode = parse(sys.argv[1] if len(sys.argv) > 1 else "")
    print(";".join(archs) if archs else "OFF")
    print(" ".join(gencode))
