"""minivision: a dependent of minitorch (archbuild's stand-in for torchvision and CUDA extensions)."""

import ctypes
import os

_DIR = os.path.dirname(os.path.abspath(__file__))
_lib = None


def _load():
    global _lib
    if _lib is None:
        import minitorch  # noqa: F401  (the pairing: minivision runs only beside its minitorch)

        lib = ctypes.CDLL(os.path.join(_DIR, "_ops.so"))
        lib.minivision_built_against.restype = ctypes.c_char_p
        lib.minivision_error_string.restype = ctypes.c_char_p
        f = ctypes.POINTER(ctypes.c_float)
        lib.minivision_box_iou.argtypes = [f, f, f, ctypes.c_int]
        _lib = lib
    return _lib


def built_against():
    """The minitorch version the ops were compiled against (from minitorch/version.h)."""
    return _load().minivision_built_against().decode()


def box_iou(a, b):
    """IoU of box pairs: a, b are lists of (x1, y1, x2, y2); runs on the GPU."""
    n = len(a)
    fa = (ctypes.c_float * (4 * n))(*[v for box in a for v in box])
    fb = (ctypes.c_float * (4 * n))(*[v for box in b for v in box])
    out = (ctypes.c_float * n)()
    code = _load().minivision_box_iou(fa, fb, out, n)
    if code != 0:
        raise RuntimeError(_load().minivision_error_string(code).decode())
    return list(out)
