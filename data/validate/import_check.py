"""archbuild's import test, run by `archbuild validate` with the python of a fresh venv into which
the wheel's requirements and then the wheel were just installed (or, with --installed, the
python whose site-packages hold the distribution):

    python -I import_check.py MODULE [--gpu] [--also TORCH] [--op-what WORDS --op CODE]

Imports MODULE and reports what it finds as ONE JSON object on the last line of stdout:
version, file (must lie inside the venv), cuda.get_arch_list(), and "features": the feature
checks archbuild knows for the module (torch: torch.version.cuda, cuDNN, NCCL, LAPACK, NumPy
interop; with --gpu what PyTorch's release smoke test checks: matmul and conv2d in fp16/fp32
with autocast, an asserted CUDA error surfacing), each {name, ok: true/false/null, value,
error, reason}. With --gpu also the device capability and one real CUDA operation. archbuild,
not this script, decides what passes. Exit status 0 unless the script itself breaks.

A dependent (torchvision, an extension) is checked beside the torch it was built against:
--also TORCH imports that one first (its failure is the import error) and lends its `cuda` module
when MODULE has none; --op CODE is the recipe's CUDA operation (Python statements over `m`, the
module, setting `ok` and maybe `got` and `expected`), named by --op-what.
"""

import argparse
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


def feature(name, fn):
    """One feature check: fn() returns a value (ok) or raises (failed); a Skip is not run."""
    try:
        value = fn()
        return {"name": name, "ok": True, "value": value}
    except Skip as e:
        return {"name": name, "ok": None, "reason": str(e)}
    except BaseException as e:  # noqa: BLE001 (the failure is the finding)
        return {"name": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:500]}


class Skip(Exception):
    pass


def torch_features(torch, gpu):
    """What a working torch build has, then, on a GPU, the
    checks of PyTorch's own release smoke test (.ci/pytorch/smoke_test/smoke_test.py)."""
    def cuda_version():
        v = torch.version.cuda
        if v is None:
            raise RuntimeError("torch.version.cuda is None: a CPU-only build")
        return v

    def cudnn():
        if not torch.backends.cudnn.is_available():
            raise RuntimeError("torch.backends.cudnn.is_available() is False (built without cuDNN)")
        return "cuDNN %s" % torch.backends.cudnn.version()

    def nccl():
        import torch.distributed as dist
        if not dist.is_available():
            raise RuntimeError("torch.distributed is not available")
        if not dist.is_nccl_available():
            raise RuntimeError("torch.distributed.is_nccl_available() is False (built without NCCL)")
        v = getattr(torch.cuda, "nccl", None)
        try:
            return "NCCL %s" % ".".join(str(x) for x in v.version())
        except BaseException:  # noqa: BLE001 (the version needs the library loaded; availability is the check)
            return "available"

    def lapack():
        if not torch._C.has_lapack:
            raise RuntimeError("torch._C.has_lapack is False (built without LAPACK: torch.linalg fails on CPU)")
        a = torch.tensor([[2.0, 0.0], [0.0, 4.0]])
        return "inv ok" if torch.allclose(torch.linalg.inv(a), torch.tensor([[0.5, 0.0], [0.0, 0.25]])) else "inv wrong"

    def numpy_interop():
        try:
            import numpy as np
        except ImportError:
            raise Skip("numpy is not installed")
        t = torch.from_numpy(np.arange(6, dtype=np.float32))
        if float(t.sum()) != 15.0 or t.numpy().tolist() != [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]:
            raise RuntimeError("from_numpy/numpy() round trip gave the wrong values")
        return "numpy %s" % np.__version__

    out = [feature("cuda-version", cuda_version), feature("cudnn", cudnn), feature("nccl", nccl),
           feature("lapack", lapack), feature("numpy", numpy_interop)]
    if not gpu:
        for n in ("matmul", "conv2d", "cuda-error"):
            out.append({"name": n, "ok": None, "reason": "no GPU of a target CC"})
        return out

    def matmul():
        res = []
        for dtype in (torch.float16, torch.float32):
            a = torch.randn(64, 64, device="cuda", dtype=dtype)
            b = torch.randn(64, 64, device="cuda", dtype=dtype)
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                c = a @ b
            ref = (a.float().cpu() @ b.float().cpu())
            if not torch.allclose(c.float().cpu(), ref, atol=0.5, rtol=0.05):
                raise RuntimeError(f"matmul {dtype} with autocast differs from the CPU result")
            res.append(str(dtype).replace("torch.", ""))
        return "ok in " + ", ".join(res)

    def conv2d():
        res = []
        for dtype in (torch.float16, torch.float32):
            conv = torch.nn.Conv2d(3, 8, 3, padding=1).to("cuda", dtype=dtype)
            x = torch.randn(2, 3, 16, 16, device="cuda", dtype=dtype)
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                y = conv(x)
            ref = torch.nn.functional.conv2d(x.float().cpu(), conv.weight.float().cpu(), conv.bias.float().cpu(),
                                             padding=1)
            if not torch.allclose(y.float().cpu(), ref, atol=0.1, rtol=0.05):
                raise RuntimeError(f"conv2d {dtype} with autocast differs from the CPU result")
            res.append(str(dtype).replace("torch.", ""))
        return "ok in " + ", ".join(res)

    out += [feature("matmul", matmul), feature("conv2d", conv2d)]
    return out


def cuda_error_check(torch):
    """Last: an asserted device-side error must surface as a RuntimeError (it poisons the CUDA
    context, so nothing CUDA runs after it)."""
    def run():
        try:
            torch._assert_async(torch.tensor(0, device="cuda"))
            torch.cuda.synchronize()
        except RuntimeError as e:
            if "CUDA" in str(e) or "assert" in str(e):
                return "surfaced: " + str(e).splitlines()[0][:200]
            raise
        raise RuntimeError("an asserted CUDA error did not surface")
    return feature("cuda-error", run)


def recipe_op(what, code, mod):
    """The recipe's CUDA operation: CODE run with `m` = the module; it sets ok (got, expected)."""
    scope = {"m": mod}
    exec(compile(code, "<recipe validate.cuda_op>", "exec"), scope)  # noqa: S102 (the recipe's own check)
    out = {"what": what, "ok": bool(scope.get("ok", False))}
    for k in ("got", "expected"):
        if k in scope:
            out[k] = scope[k]
    return out


def gpu_part(name, mod, also=None, op=None):
    cuda = getattr(mod, "cuda", None)
    if cuda is None and also is not None:
        cuda = getattr(also, "cuda", None)  # a dependent: the torch it was built against
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
        g["op"] = recipe_op(op[0], op[1], mod) if op else cuda_op(name, mod)
    except BaseException as e:  # noqa: BLE001
        g["op"] = {"what": f"a CUDA operation through {name}", "ok": False, "error": f"{type(e).__name__}: {e}"}
    return g


def main():
    p = argparse.ArgumentParser(prog="import_check.py")
    p.add_argument("module")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--also")
    p.add_argument("--op")
    p.add_argument("--op-what", default="the recipe's CUDA operation")
    args = p.parse_args()
    name, gpu = args.module, args.gpu
    out = {"module": name, "python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
           "prefix": sys.prefix}
    also = None
    try:
        if args.also:
            also = importlib.import_module(args.also)
            out["also"] = {"module": args.also, "file": getattr(also, "__file__", None),
                           "version": str(getattr(also, "__version__", None))}
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
    if name == "torch":
        out["features"] = torch_features(mod, gpu)
    if gpu:
        out["gpu"] = gpu_part(name, mod, also, (args.op_what, args.op) if args.op else None)
        if name == "torch":
            out["features"].append(cuda_error_check(mod))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
