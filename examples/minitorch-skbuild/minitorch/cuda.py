"""torch.cuda look-alikes: what the build compiled for, and what this machine has."""

import json
import os

from . import _lib

_INFO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build_info.json")


def _build_info():
    with open(_INFO) as f:
        return json.load(f)


def get_arch_list():
    """The architectures the kernels were compiled for, e.g. ['sm_90'] or ['sm_90', 'compute_90']
    (sm_XY: SASS; compute_XY: PTX), like torch.cuda.get_arch_list(). Empty for a CPU build."""
    return list(_build_info().get("arch_list", []))


def is_built():
    return bool(_build_info().get("use_cuda", False))


def device_count():
    return _lib.device_count()


def is_available():
    return is_built() and device_count() > 0


def get_device_capability(device=0):
    return _lib.device_capability(device)
