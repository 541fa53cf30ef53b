"""minitorch: a tiny package with PyTorch's build contract (archbuild's test project)."""

from . import cuda
from ._lib import saxpy, sum, vector_add

try:
    from .version import __version__, git_version
except ImportError:  # running from a source tree that was never built
    __version__ = "0.0.0+unknown"
    git_version = "Unknown"

__all__ = ["cuda", "vector_add", "saxpy", "sum", "__version__", "git_version"]
