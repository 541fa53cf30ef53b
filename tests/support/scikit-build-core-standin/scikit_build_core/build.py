"""archbuild's test stand-in for scikit-build-core's PEP 517 backend, scikit_build_core.build.

Debian 12 packages no scikit-build-core and archbuild's tests run offline, so a test builds this
directory into a wheel named scikit-build-core (1.0.0+archbuild.standin) and hands it to archbuild
with --find-links: tests/fixtures/minitorch-skbuild, whose pyproject.toml is written for the real
backend (build-backend = "scikit_build_core.build", requires = ["scikit-build-core>=1.0"]), gets
it in its build venv the way it would get the real one.

It does what scikit-build-core 1.x does with the settings that example uses, in the same order
of precedence (scikit-build/scikit-build-core@120c8dc7:
src/scikit_build_core/settings/skbuild_read_settings.py, skbuild_overrides.py, skbuild_model.py),
and refuses what it does not know instead of ignoring it:

  precedence  config settings (-C) over [tool.scikit-build] with its matching
              [[tool.scikit-build.overrides]] applied top to bottom (a later match wins);
              cmake.build-type set nowhere is $CMAKE_BUILD_TYPE, else "Release"
  overrides   if.env.NAME = true / false: the variable read as a boolean ("", 0, no, off, false,
              f, n: false); if.env.NAME = "regex": the variable is set and the regex is found in
              it; if.platform-system / if.platform-machine: regexes on sys.platform /
              platform.machine(); several conditions must all hold. Other conditions are refused.
  settings    build-dir (relative: to the source tree, the hooks' working directory; empty: a
              temporary directory; {build_type} {wheel_tag} {state} {cache_tag} expanded),
              cmake.build-type, cmake.define.NAME, cmake.args, wheel.packages, the env table
              (NAME = "value" or {env = "OTHER", default = "…"}: set unless already set),
              minimum-version, experimental, strict-config
  metadata    [[tool.dynamic-metadata]] in order: provider = { path = "DIR", module = "NAME" }, the
              module's dynamic_metadata(settings, project) -> {field: value} merged into
              [project]. The provisional [tool.scikit-build.metadata.<field>] table is refused when
              its provider is the project's own (provider-path, or not scikit_build_core.*) unless
              experimental = true, and refused next to [[tool.dynamic-metadata]].
  CMake       cmake -S . -B <build-dir> -G Ninja -DCMAKE_BUILD_TYPE=… -DSKBUILD=2
              -DSKBUILD_PROJECT_NAME/VERSION/VERSION_FULL -DSKBUILD_PLATLIB_DIR=<staging> … on
              every call (an existing tree re-configures incrementally), then cmake --build and
              cmake --install into the wheel's staging directory
  wheel       wheel.packages plus what CMake installed, with RECORD, tagged for this interpreter
"""

import base64
import hashlib
import importlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from . import __version__

NAME = f"scikit-build-core {__version__} (archbuild's test stand-in)"

# The [tool.scikit-build] keys the stand-in implements (dotted); any other is refused.
KNOWN = {"build-dir", "env", "cmake.build-type", "cmake.args", "cmake.source-dir", "wheel.packages",
         "minimum-version", "experimental", "strict-config"}
KNOWN_TABLES = ("cmake.define.", "env.", "metadata.")  # metadata: project_metadata()


class SettingsError(Exception):
    pass


def _say(msg):
    print(f"*** {NAME}: {msg}", flush=True)


def _strtobool(value):
    # skbuild_overrides.strtobool
    if not value:
        return False
    value = value.lower()
    if value.isdigit():
        return bool(int(value))
    return value not in {"n", "no", "off", "false", "f"}


def _flatten(table, prefix=""):
    """{"cmake": {"build-type": "Debug"}} -> {"cmake.build-type": "Debug"}; the env table and
    cmake.define stay one level per name."""
    out = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key not in ("env",) and not key.startswith("env."):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _override_matches(cond, env):
    why = []
    for name, want in cond.items():
        if name == "env":
            for var, match in want.items():
                if isinstance(match, bool):
                    if _strtobool(env.get(var, "")) != match:
                        return None
                    why.append(f"env {var} is {str(match).lower()}")
                elif var not in env or re.search(str(match), env[var]) is None:
                    return None
                else:
                    why.append(f"env {var} matches {match!r}")
        elif name == "platform-system":
            if re.search(want, sys.platform) is None:
                return None
            why.append(f"platform-system matches {want!r}")
        elif name == "platform-machine":
            if re.search(want, platform.machine()) is None:
                return None
            why.append(f"platform-machine matches {want!r}")
        else:
            raise SettingsError(f"[[tool.scikit-build.overrides]] if.{name}: the stand-in implements only "
                                "if.env, if.platform-system and if.platform-machine")
    if not why:
        raise SettingsError("[[tool.scikit-build.overrides]] needs an if table with at least one condition")
    return why


def read_settings(pyproject, config_settings, env):
    """The settings of a wheel build: (flat settings, where the build type came from)."""
    skb = dict(pyproject.get("tool", {}).get("scikit-build", {}))
    overrides = skb.pop("overrides", [])
    flat = _flatten(skb)
    build_type_from = "[tool.scikit-build]" if "cmake.build-type" in flat else None
    for n, ov in enumerate(overrides, 1):
        ov = dict(ov)
        why = _override_matches(ov.pop("if", {}), env)
        if why is None:
            continue
        ov.pop("inherit", None)
        changes = _flatten(ov)
        _say(f"override #{n} applies ({' and '.join(why)}): " + ", ".join(f"{k} = {v!r}" for k, v in changes.items()))
        if "cmake.build-type" in changes:
            build_type_from = f"override #{n} ({' and '.join(why)})"
        flat.update(changes)
    for k in flat:
        if k not in KNOWN and not k.startswith(KNOWN_TABLES):
            raise SettingsError(f"[tool.scikit-build] {k}: not implemented by the stand-in")
    # Config settings over everything of the project's, its overrides included.
    for k, v in (config_settings or {}).items():
        k = k[len("skbuild."):] if k.startswith("skbuild.") else k
        if k not in KNOWN and not k.startswith("cmake.define."):
            raise SettingsError(f"config setting {k}: not implemented by the stand-in")
        flat[k] = v[-1] if isinstance(v, list) else v
        if k == "cmake.build-type":
            build_type_from = "config setting (-C)"
    # Overrides may set env.NAME one by one: into the env table.
    for k in [k for k in flat if k.startswith("env.")]:
        flat["env"] = {**flat.get("env", {}), k[len("env."):]: flat.pop(k)}
    if build_type_from is None:
        if "CMAKE_BUILD_TYPE" in env:
            flat["cmake.build-type"] = env["CMAKE_BUILD_TYPE"]
            build_type_from = "$CMAKE_BUILD_TYPE"
        else:
            flat["cmake.build-type"] = "Release"
            build_type_from = "the default"
    return flat, build_type_from


def project_metadata(pyproject, flat):
    """[project] with its dynamic fields filled by the metadata providers."""
    project = dict(pyproject["project"])
    legacy = pyproject.get("tool", {}).get("scikit-build", {}).get("metadata", {})
    standard = pyproject.get("tool", {}).get("dynamic-metadata", [])
    if legacy and standard:
        raise SettingsError("tool.scikit-build.metadata cannot be combined with the standard top-level "
                            "[[tool.dynamic-metadata]]; use only one")
    for field, entry in legacy.items():
        provider = entry.get("provider", "")
        if not flat.get("experimental", False) and ("provider-path" in entry or not provider.startswith("scikit_build_core.")):
            raise SettingsError("experimental must be enabled currently to use plugins not provided by scikit-build-core "
                                f"([tool.scikit-build.metadata.{field}])")
        raise SettingsError(f"[tool.scikit-build.metadata.{field}]: the provisional form is not implemented by the stand-in")
    for entry in standard:
        entry = dict(entry)
        provider = entry.pop("provider", None)
        if not isinstance(provider, dict) or set(provider) != {"path", "module"}:
            raise SettingsError(f"[[tool.dynamic-metadata]] provider = {provider!r}: the stand-in implements only the "
                                "local form, provider = { path = \"DIR\", module = \"NAME\" }")
        sys.path.insert(0, os.path.abspath(provider["path"]))
        try:
            module = importlib.import_module(provider["module"])
        finally:
            sys.path.pop(0)
        fields = module.dynamic_metadata(entry, dict(project))
        for k, v in fields.items():
            if k not in project.get("dynamic", []):
                raise SettingsError(f"[[tool.dynamic-metadata]] {provider['module']} set {k}, which [project] does not "
                                    "list in dynamic")
            project[k] = v
    project["dynamic"] = [f for f in project.get("dynamic", []) if f not in project]
    if project["dynamic"]:
        raise SettingsError(f"[project] dynamic fields no provider set: {', '.join(project['dynamic'])}")
    return project


def _apply_env(table, env):
    for name, spec in table.items():
        if isinstance(spec, dict):
            value = env.get(spec["env"], spec.get("default")) if "env" in spec else spec.get("default")
        else:
            value = str(spec)
        if value is not None and name not in env:
            env[name] = str(value)


def _tag():
    ver = f"{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"cp{ver}-cp{ver}{getattr(sys, 'abiflags', '')}-{plat}"


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory, name, project, staging):
    tag = _tag()
    version = project["version"]
    dist_info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n"
    if project.get("description"):
        metadata += f"Summary: {project['description']}\n"
    if project.get("requires-python"):
        metadata += f"Requires-Python: {project['requires-python']}\n"
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: {NAME}\nRoot-Is-Purelib: false\nTag: {tag}\n"
    filename = f"{name}-{version.replace('-', '_')}-{tag}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
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


def _run(argv, env):
    _say("running: " + " ".join(shlex.quote(a) for a in argv))
    subprocess.check_call(argv, env=env)


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open("pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    env = dict(os.environ)
    try:
        s, build_type_from = read_settings(pyproject, config_settings, env)
        project = project_metadata(pyproject, s)
    except SettingsError as e:
        print(f"ERROR: {e}", file=sys.stderr, flush=True)
        raise SystemExit(7)
    name = project["name"].replace("-", "_").replace(".", "_")
    version = project["version"]
    build_type = s["cmake.build-type"]
    _apply_env(s.get("env", {}), env)
    _say(f"{name} {version}, CMake build type {build_type} (from {build_type_from})")

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
        argv = ["cmake", "-S", s.get("cmake.source-dir", "."), "-B", build_dir, "-G", "Ninja",
                f"-DCMAKE_BUILD_TYPE={build_type}", f"-DCMAKE_INSTALL_PREFIX={staging}",
                "-DSKBUILD=2", f"-DSKBUILD_PROJECT_NAME={name}", f"-DSKBUILD_PROJECT_VERSION={version.split('+')[0]}",
                f"-DSKBUILD_PROJECT_VERSION_FULL={version}", f"-DSKBUILD_PLATLIB_DIR={staging}",
                "-DSKBUILD_STATE=wheel", f"-DPython_EXECUTABLE={sys.executable}"]
        for k, v in sorted(s.items()):
            if k.startswith("cmake.define."):
                if isinstance(v, bool):
                    v = "ON" if v else "OFF"
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
        filename = _write_wheel(wheel_directory, name, project, staging)
    _say(f"created {filename}")
    return filename
