"""archbuild's test stand-in for scikit-build-core (see scikit_build_core.build)."""

__version__ = "1.0.0+archbuild.standin"
