"""minitorch-skbuild's PEP 517 backend (pyproject.toml: build-backend = "minitorch_backend",
backend-path = ["tools/backend"]).

Where scikit-build-core is importable, this module IS scikit-build-core: every hook is
scikit_build_core.build's. Debian 12 does not package scikit-build-core and these tests run
offline, so otherwise a small backend of our own takes its place. It honours the part of
scikit-build-core's contract that PyTorch 2.14's build relies on:

  config settings  build-dir (relative: to the source tree, the hooks' working directory; empty:
                   a temporary directory), cmake.build-type (default Release), cmake.define.NAME,
                   cmake.args; the same keys under [tool.scikit-build] in pyproject.toml (config
                   settings win)
  [tool.scikit-build.env]  NAME = "value" or {env = "OTHER", default = "…", force = false},
                   setdefault semantics (MAX_JOBS -> CMAKE_BUILD_PARALLEL_LEVEL)
  CMake            cmake -S . -B <build-dir> -G Ninja -DCMAKE_BUILD_TYPE=… -DSKBUILD=2
                   -DSKBUILD_PROJECT_NAME/VERSION/VERSION_FULL -DSKBUILD_PLATLIB_DIR=<staging>
                   -DCMAKE_INSTALL_PREFIX=<staging> …; configured on every call (an existing
                   tree re-configures incrementally), then cmake --build, cmake --install
  wheel            the packages of wheel.packages (default: the project's own package dir)
                   plus what CMake installed, zipped with RECORD, tagged for this interpreter

Set MINITORCH_BACKEND=fallback to use the in-tree backend even where scikit-build-core exists.
"""

import base64
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

try:
    if os.environ.get("MINITORCH_BACKEND") == "fallback":
        raise ImportError("MINITORCH_BACKEND=fallback")
    import scikit_build_core.build as _skbuild
except ImportError:
    _skbuild = None

BACKEND = "scikit-build-core" if _skbuild else "minitorch in-tree fallback"

if _skbuild is not None:
    # The real backend, hook for hook.
    build_wheel = _skbuild.build_wheel
    build_sdist = _skbuild.build_sdist
    get_requires_for_build_wheel = _skbuild.get_requires_for_build_wheel
    get_requires_for_build_sdist = _skbuild.get_requires_for_build_sdist
    if hasattr(_skbuild, "prepare_metadata_for_build_wheel"):
        prepare_metadata_for_build_wheel = _skbuild.prepare_metadata_for_build_wheel
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import minitorch_version  # noqa: E402  (same folder)

    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib

    def _say(msg):
        print(f"*** {BACKEND}: {msg}", flush=True)

    def _run(argv, env):
        _say("running: " + " ".join(shlex.quote(a) for a in argv))
        subprocess.check_call(argv, env=env)

    def _settings(pyproject, config_settings):
        """[tool.scikit-build] flattened to dotted keys, then the config settings over it."""
        flat = {}

        def walk(prefix, table):
            for k, v in table.items():
                key = f"{prefix}{k}"
                if isinstance(v, dict) and key not in ("env",):
                    walk(key + ".", v)
                else:
                    flat[key] = v

        walk("", pyproject.get("tool", {}).get("scikit-build", {}))
        for k, v in (config_settings or {}).items():
            flat[k] = v[-1] if isinstance(v, list) else v
        return flat

    def _apply_env(table, env):
        for name, spec in table.items():
            force = False
            if isinstance(spec, dict):
                value = os.environ.get(spec["env"], spec.get("default")) if "env" in spec else spec.get("default")
                force = bool(spec.get("force", False))
            else:
                value = str(spec)
            if value is None:
                continue
            if force or name not in env:
                env[name] = str(value)

    def _tag():
        ver = f"{sys.version_info.major}{sys.version_info.minor}"
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return f"cp{ver}-cp{ver}{getattr(sys, 'abiflags', '')}-{plat}"

    def _record_hash(data):
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    def _write_wheel(wheel_directory, name, version, summary, requires_python, staging):
        tag = _tag()
        dist_info = f"{name}-{version}.dist-info"
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        if summary:
            metadata += f"Summary: {summary}\n"
        if requires_python:
            metadata += f"Requires-Python: {requires_python}\n"
        wheel_meta = f"Wheel-Version: 1.0\nGenerator: {BACKEND}\nRoot-Is-Purelib: false\nTag: {tag}\n"
        filename = f"{name}-{version.replace('-', '_')}-{tag}.whl"
        path = os.path.join(wheel_directory, filename)
        records = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for root, dirs, files in os.walk(staging):
                dirs.sort()
                for f in sorted(files):
                    full = os.path.join(root, f)
                    arc = os.path.relpath(full, staging).replace(os.sep, "/")
                    with open(full, "rb") as fh:
                        data = fh.read()
                    z.writestr(zipfile.ZipInfo.from_file(full, arc), data, zipfile.ZIP_DEFLATED)
                    records.append(f"{arc},{_record_hash(data)},{len(data)}")
            for member, text in ((f"{dist_info}/METADATA", metadata), (f"{dist_info}/WHEEL", wheel_meta)):
                data = text.encode()
                z.writestr(member, data)
                records.append(f"{member},{_record_hash(data)},{len(data)}")
            records.append(f"{dist_info}/RECORD,,")
            z.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
        return filename

    def get_requires_for_build_wheel(config_settings=None):
        return []

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        with open("pyproject.toml", "rb") as f:
            pyproject = tomllib.load(f)
        project = pyproject["project"]
        name = project["name"].replace("-", "_").replace(".", "_")
        version = project.get("version") or minitorch_version.version()
        s = _settings(pyproject, config_settings)
        build_type = s.get("cmake.build-type", "Release")
        source_dir = s.get("cmake.source-dir", ".")
        env = dict(os.environ)
        _apply_env(s.get("env", {}), env)
        _say(f"{name} {version}, CMake build type {build_type}")

        with tempfile.TemporaryDirectory() as tmp:
            build_dir = s.get("build-dir", "")
            if build_dir:
                build_dir = build_dir.format(build_type=build_type, wheel_tag=_tag(), state="wheel",
                                             cache_tag=sys.implementation.cache_tag)
            else:
                build_dir = os.path.join(tmp, "build")
            _say(f"build directory: {os.path.abspath(build_dir)}")
            staging = os.path.join(tmp, "wheel")
            os.makedirs(staging)
            numeric = version.split("+")[0]
            argv = ["cmake", "-S", source_dir, "-B", build_dir, "-G", "Ninja",
                    f"-DCMAKE_BUILD_TYPE={build_type}", f"-DCMAKE_INSTALL_PREFIX={staging}",
                    "-DSKBUILD=2", f"-DSKBUILD_PROJECT_NAME={name}", f"-DSKBUILD_PROJECT_VERSION={numeric}",
                    f"-DSKBUILD_PROJECT_VERSION_FULL={version}", f"-DSKBUILD_PLATLIB_DIR={staging}",
                    "-DSKBUILD_STATE=wheel", f"-DPython_EXECUTABLE={sys.executable}"]
            for k, v in sorted(s.items()):
                if k.startswith("cmake.define."):
                    argv.append(f"-D{k[len('cmake.define.'):]}={v}")
            args = s.get("cmake.args", [])
            argv += shlex.split(args) if isinstance(args, str) else list(args)
            argv += shlex.split(env.get("CMAKE_ARGS", ""))
            _run(argv, env)
            _run(["cmake", "--build", build_dir, "--config", build_type], env)
            _run(["cmake", "--install", build_dir, "--prefix", staging, "--config", build_type], env)

            packages = s.get("wheel.packages") or ([name] if os.path.isdir(name) else [])
            for pkg in packages:
                dest = os.path.join(staging, os.path.basename(pkg))
                for root, dirs, files in os.walk(pkg):
                    dirs[:] = [d for d in dirs if d != "__pycache__"]
                    for f in files:
                        rel = os.path.relpath(os.path.join(root, f), pkg)
                        target = os.path.join(dest, rel)
                        if not os.path.exists(target):  # what CMake installed wins
                            os.makedirs(os.path.dirname(target), exist_ok=True)
                            shutil.copy2(os.path.join(root, f), target)
            filename = _write_wheel(wheel_directory, name, version, project.get("description", ""),
                                    project.get("requires-python", ""), staging)
        _say(f"created {filename}")
        return filename
