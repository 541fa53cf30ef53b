"""The wheel version, PyTorch's rule: PYTORCH_BUILD_VERSION when set, else version.txt plus
"+git<sha7>". Shared by the in-tree backend and, as a scikit-build-core metadata plugin
([tool.scikit-build.metadata.version] in pyproject.toml), by the real backend."""

import os
import subprocess


def version(root="."):
    if os.environ.get("PYTORCH_BUILD_VERSION"):
        return os.environ["PYTORCH_BUILD_VERSION"]
    with open(os.path.join(root, "version.txt")) as f:
        base = f.read().strip()
    try:
        sha = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=root, stderr=subprocess.DEVNULL).decode().strip()
    except (OSError, subprocess.CalledProcessError):
        return base
    return f"{base}+git{sha[:7]}"


def dynamic_metadata(field, settings=None):
    """scikit-build-core's metadata-plugin hook (provider = "minitorch_version")."""
    if field != "version":
        raise ValueError(f"minitorch_version provides only the version, not {field}")
    return version()
