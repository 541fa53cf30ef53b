"""A CUDA extension of the installed torch, built for exactly the archs `archbuild env` names.

    eval "$(archbuild env --sm 90)"        # TORCH_CUDA_ARCH_LIST, CUDA_HOME, MAX_JOBS …
    python setup.py build_ext --inplace    # or: pip install --no-build-isolation .
    python -c "import torch, archbuild_torch_ext as e; print(e.affine(torch.ones(4, device='cuda'), 2.0, 1.0))"

torch.utils.cpp_extension reads TORCH_CUDA_ARCH_LIST (and MAX_JOBS) itself; scripts/gpu-check
builds it on a GPU host and compares the library's device code with the list.
"""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="archbuild-torch-ext",
    version="0.1.0",
    ext_modules=[CUDAExtension("archbuild_torch_ext", ["affine.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
