"""archbuild's import test, run by `archbuild validate` with the python of a fresh venv into which
the wheel was just installed (pip install --no-index --no-deps):

    python -I import_check.py MODULE [--gpu]

Imports MODULE and reports what it finds as ONE JSON object on the last line of stdout:
version, file (must lie inside the venv), cuda.get_arch_list(); with --gpu also the device
capability and the result of one real CUDA operation through the package. archbuild, not this
script, decides what passes. Exit status 0 unless the script itself breaks.
"""

import importlib
import json
import sys
import traceback


def cuda_op(name, mod):
    """One real CUDA operation through the package, checked against a CPU answer."""
    if name == "torch":
        torch = mod
        x = torch.arange(1024, device="cuda", dtype=torch.float32)
        got = float((x * 2.0).sum().item())
        torch.cuda.synchronize()
        expected = float(2 * sum(range(1024)))
        return {"what": "torch: (arange(1024, device='cuda') * 2).sum()", "ok": got == expected,
                "got": got, "expected": expected}
    if hasattr(mod, "vector_add"):
        a = [float(i) for i in range(4096)]
        b = [2.0 * i for i in range(4096)]
        got = mod.vector_add(a, b)
        bad = [i for i, (x, y, z) in enumerate(zip(a, b, got)) if x + y != z]
        return {"what": f"{name}.vector_add on 4096 floats", "ok": len(got) == len(a) and not bad,
                "got": got[bad[0]] if bad else None, "expected": a[bad[0]] + b[bad[0]] if bad else None}
    return {"what": None, "ok": None, "reason": f"archbuild knows no CUDA operation of the package {name}"}


def gpu_part(name, mod):
    cuda = getattr(mod, "cuda", None)
    if cuda is None:
        return {"error": f"{name} has no cuda submodule"}
    g = {}
    try:
        if hasattr(cuda, "is_available"):
            g["available"] = bool(cuda.is_available())
        if hasattr(cuda, "device_count"):
            g["device_count"] = int(cuda.device_count())
        if hasattr(cuda, "get_device_capability"):
            g["capability"] = [int(v) for v in cuda.get_device_capability(0)]
        if hasattr(cuda, "get_device_name"):
            g["name"] = str(cuda.get_device_name(0))
    except BaseException as e:  # noqa: BLE001 (a CUDA error is the finding)
        g["error"] = f"{type(e).__name__}: {e}"
        return g
    try:
        g["op"] = cuda_op(name, mod)
    except BaseException as e:  # noqa: BLE001
        g["op"] = {"what": f"a CUDA operation through {name}", "ok": False, "error": f"{type(e).__name__}: {e}"}
    return g


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: import_check.py MODULE [--gpu]\n")
        return 2
    name = sys.argv[1]
    gpu = "--gpu" in sys.argv[2:]
    out = {"module": name, "python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
           "prefix": sys.prefix}
    try:
        mod = importlib.import_module(name)
    except BaseException as e:  # noqa: BLE001 (any failure to import is the finding)
        out["import_error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc()[-4000:]
        print(json.dumps(out))
        return 0
    out["file"] = getattr(mod, "__file__", None)
    version = getattr(mod, "__version__", None)
    out["version"] = str(version) if version is not None else None
    if name == "torch":
        out["cuda_version"] = getattr(getattr(mod, "version", None), "cuda", None)
    cuda = getattr(mod, "cuda", None)
    if cuda is not None and hasattr(cuda, "get_arch_list"):
        try:
            out["arch_list"] = [str(a) for a in cuda.get_arch_list()]
        except BaseException as e:  # noqa: BLE001
            out["arch_list_error"] = f"{type(e).__name__}: {e}"
    if gpu:
        out["gpu"] = gpu_part(name, mod)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
