"""The [[tool.dynamic-metadata]] provider of the version (pyproject.toml), PyTorch's rule
(pytorch/pytorch@22b9aa63:tools/metadata/version.py, through tools/generate_torch_version.py):
PYTORCH_BUILD_VERSION when set, else version.txt plus "+git<sha7>" of the checkout."""

import os
import subprocess

__all__ = ["dynamic_metadata"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_version():
    if os.environ.get("PYTORCH_BUILD_VERSION"):
        return os.environ["PYTORCH_BUILD_VERSION"]
    with open(os.path.join(ROOT, "version.txt")) as f:
        base = f.read().strip()
    try:
        sha = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT, stderr=subprocess.DEVNULL).decode().strip()
    except (OSError, subprocess.CalledProcessError):
        return base
    return f"{base}+git{sha[:7]}"


def dynamic_metadata(settings, project):
    """The dynamic-metadata hook: settings are the entry's keys besides provider (none here)."""
    if settings:
        raise RuntimeError(f"This provider takes no settings, got {sorted(settings)}")
    return {"version": torch_version()}
