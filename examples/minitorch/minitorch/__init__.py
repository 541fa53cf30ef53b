"""minitorch: a tiny package with PyTorch's build contract (archbuild's test project)."""

from . import cuda
from ._lib import saxpy, sum, vector_add

try:
    from .version import __version__, git_version
except ImportError:  # running from a source tree that was never built
    __version__ = "0.0.0+unknown"
    git_version = "Unknown"


def get_include():
    """The C++ headers a dependent compiles against (minitorch/minitorch.h, minitorch/version.h),
    like torch.utils.cpp_extension.include_paths(). Present in the built wheel."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


__all__ = ["cuda", "vector_add", "saxpy", "sum", "get_include", "__version__", "git_version"]
