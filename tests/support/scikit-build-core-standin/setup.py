# The stand-in for scikit-build-core that archbuild's tests build into a wheelhouse (see
# scikit_build_core/build.py): `python3 -m pip wheel --no-deps --no-build-isolation -w DIR .`
from setuptools import setup

setup(
    name="scikit-build-core",
    # A local label says what it is wherever a version is shown (the manifest, the build key).
    version="1.0.0+archbuild.standin",
    description="archbuild's test stand-in for scikit-build-core's PEP 517 backend (not scikit-build-core)",
    packages=["scikit_build_core"],  # scikit_build_core.build is build.py inside it
    python_requires=">=3.8",
)
