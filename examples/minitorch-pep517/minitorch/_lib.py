"""ctypes binding of libminitorch_kernels.so (host lists in, host lists out)."""

import ctypes
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libminitorch_kernels.so")
_lib = None


class MinitorchError(RuntimeError):
    pass


def _load():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_PATH)
        f = ctypes.POINTER(ctypes.c_float)
        i = ctypes.POINTER(ctypes.c_int)
        lib.minitorch_device_count.argtypes = [i]
        lib.minitorch_device_capability.argtypes = [ctypes.c_int, i, i]
        lib.minitorch_error_string.restype = ctypes.c_char_p
        lib.minitorch_error_string.argtypes = [ctypes.c_int]
        lib.minitorch_vector_add.argtypes = [f, f, f, ctypes.c_int]
        lib.minitorch_saxpy.argtypes = [ctypes.c_float, f, f, ctypes.c_int]
        lib.minitorch_sum.argtypes = [f, ctypes.c_int, f]
        _lib = lib
    return _lib


def _check(code):
    if code != 0:
        msg = _load().minitorch_error_string(code).decode(errors="replace")
        raise MinitorchError(f"minitorch: CUDA error {code}: {msg}")


def _floats(values):
    return (ctypes.c_float * len(values))(*values)


def device_count():
    n = ctypes.c_int(0)
    _check(_load().minitorch_device_count(ctypes.byref(n)))
    return n.value


def device_capability(device=0):
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    _check(_load().minitorch_device_capability(device, ctypes.byref(major), ctypes.byref(minor)))
    return (major.value, minor.value)


def vector_add(a, b):
    if len(a) != len(b):
        raise ValueError("vector_add: lengths differ")
    out = _floats([0.0] * len(a))
    _check(_load().minitorch_vector_add(_floats(a), _floats(b), out, len(a)))
    return list(out)


def saxpy(alpha, x, y):
    if len(x) != len(y):
        raise ValueError("saxpy: lengths differ")
    ys = _floats(y)
    _check(_load().minitorch_saxpy(alpha, _floats(x), ys, len(x)))
    return list(ys)


def sum(x):  # noqa: A001 (mirrors torch.sum)
    out = ctypes.c_float(0.0)
    _check(_load().minitorch_sum(_floats(x), len(x), ctypes.byref(out)))
    return out.value
