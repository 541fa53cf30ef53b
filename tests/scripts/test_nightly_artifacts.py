#!/usr/bin/env python3
"""examples/ci/nightly.yml's artifacts carry real wheels from the build jobs to `archbuild publish`.

Reads the workflow as GitHub would run it, for two build jobs: each job's workspace holds what
`archbuild wheel --out dist --json > wheel.json` leaves (dist/<wheel>, wheel.json); the build
job's steps that name artifacts run (`run:` steps with bash, their `$GITHUB_OUTPUT` read back);
each upload-artifact step stores the files its `path` globs match relative to their least common
ancestor (actions/upload-artifact v4: "the least common ancestor of all the search paths will be
the root directory of the artifact"); the publish job's download-artifact steps lay them out as
download-artifact v4 does (`pattern`; with `merge-multiple` every artifact's files in `path`,
without it each under `path/<artifact name>/`); then the publish job's Publish step runs with a
bundle whose bin/archbuild is the archbuild under test. It must publish both wheels, and
`--verify` must pass.

Usage: test_nightly_artifacts.py SOURCE_DIR ARCHBUILD
"""
import fnmatch
import glob
import hashlib
import base64
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

try:
    import yaml
except ImportError:
    print("##archbuild-skip## python3-yaml is not installed (scripts/install-deps installs it)")
    sys.exit(0)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def make_wheel(dirname, dist, version, tag="py3-none-any"):
    """A tiny pure-Python wheel with a correct RECORD."""
    di = f"{dist}-{version}.dist-info/"
    members = {
        f"{dist}/__init__.py": f'VALUE = "{version}"\n',
        di + "METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        di + "WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = ""
    for name, content in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(content.encode())}\n"
    record += di + "RECORD,,\n"
    members[di + "RECORD"] = record
    os.makedirs(dirname, exist_ok=True)
    path = os.path.join(dirname, f"{dist}-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


def substitute(text, values):
    """${{ expr }} -> values[expr]; an expression the test does not know fails it."""
    def one(m):
        expr = m.group(1).strip()
        if expr not in values:
            fail(f"the test does not know the expression ${{{{ {expr} }}}} in {text!r}")
        return values[expr]
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def run_step(step, cwd, values, env):
    """Runs a `run:` step with bash -e as GitHub does; returns what it wrote to $GITHUB_OUTPUT."""
    out_file = os.path.join(cwd, ".github_output")
    open(out_file, "w").close()
    script = substitute(step["run"], values)
    e = dict(os.environ, GITHUB_OUTPUT=out_file, **env)
    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=e, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"step {step.get('name')!r} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    outputs = {}
    for line in open(out_file).read().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            outputs[k] = v
    return outputs, r


def upload(step, cwd, values):
    """upload-artifact v4: (name, {relative path: absolute file})."""
    w = step["with"]
    name = substitute(w["name"], values)
    patterns = [substitute(p.strip(), values) for p in str(w["path"]).splitlines() if p.strip()]
    files = []
    for p in patterns:
        matched = sorted(glob.glob(os.path.join(cwd, p)))
        if not matched and w.get("if-no-files-found", "warn") == "error":
            fail(f"upload {name}: nothing matches {p}")
        for m in matched:
            if os.path.isdir(m):
                for root, _, fs in os.walk(m):
                    files += [os.path.join(root, f) for f in fs]
            else:
                files.append(m)
    if not files:
        return name, {}
    root = os.path.commonpath([os.path.dirname(f) for f in files])
    return name, {os.path.relpath(f, root): f for f in files}


def main():
    src, archbuild = sys.argv[1], os.path.abspath(sys.argv[2])
    wf = yaml.safe_load(open(os.path.join(src, "examples", "ci", "nightly.yml")))
    jobs = wf["jobs"]
    tmp = tempfile.mkdtemp(prefix="nightly-")
    try:
        artifacts = {}
        # Two build jobs of the matrix, one with a recipe file (its name has a '/').
        matrix_jobs = [
            {"sm": "9.0", "recipe": "examples/minitorch/recipe.toml", "cuda": "13.0", "version": "0.1.0+cu130.sm90"},
            {"sm": "12.0", "recipe": "torch-2.9", "cuda": "13.0", "version": "0.1.0+cu130.sm120"},
        ]
        for i, mj in enumerate(matrix_jobs):
            ws = os.path.join(tmp, f"build-{i}")
            make_wheel(os.path.join(ws, "dist"), "minitorch", mj["version"])
            with open(os.path.join(ws, "wheel.json"), "w") as f:
                f.write('{"ok": true}\n')
            values = {f"matrix.{k}": v for k, v in mj.items()}
            for step in jobs["build"]["steps"]:
                uses = step.get("uses", "")
                if uses.startswith("actions/upload-artifact"):
                    name, files = upload(step, ws, values)
                    if "/" in name or name in artifacts:
                        fail(f"artifact name {name!r}: has a '/' or is not unique")
                    artifacts[name] = files
                elif "run" in step and step.get("id"):
                    # Steps whose outputs name the artifacts (the others build and validate).
                    outputs, _ = run_step(step, ws, values, {})
                    for k, v in outputs.items():
                        values[f"steps.{step['id']}.outputs.{k}"] = v

        # The publish job: download what it asks for, then its Publish step.
        ws = os.path.join(tmp, "publish")
        os.makedirs(ws)
        bundle = os.path.join(tmp, "bundle-src", "archbuild-0-linux-x86_64", "bin")
        os.makedirs(bundle)
        with open(os.path.join(bundle, "archbuild"), "w") as f:
            f.write(f'#!/bin/sh\nexec "{archbuild}" "$@"\n')
        os.chmod(os.path.join(bundle, "archbuild"), 0o755)
        os.makedirs(os.path.join(ws, "bundle"))
        with tarfile.open(os.path.join(ws, "bundle", "archbuild-0-linux-x86_64.tar.gz"), "w:gz") as t:
            t.add(os.path.dirname(bundle), arcname="archbuild-0-linux-x86_64")
        publish_step = None
        for step in jobs["publish"]["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/download-artifact"):
                w = step["with"]
                if "name" in w:
                    continue  # the bundle, made above
                dest = os.path.join(ws, w.get("path", "."))
                for name, files in artifacts.items():
                    if not fnmatch.fnmatchcase(name, w["pattern"]):
                        continue
                    base = dest if w.get("merge-multiple") else os.path.join(dest, name)
                    for rel, f in files.items():
                        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
                        shutil.copy(f, os.path.join(base, rel))
            elif step.get("name") == "Publish":
                publish_step = step
        if publish_step is None:
            fail("the publish job has no step named Publish")
        # No key stored: the night's wheels only (test_nightly_fleet.py publishes stored keys too).
        _, r = run_step(publish_step, ws, {"needs.matrix.outputs.stored": ""}, {})
        mirror_files = sorted(os.listdir(os.path.join(ws, "mirror", "files")))
        want = sorted(f"minitorch-{mj['version']}-py3-none-any.whl" for mj in matrix_jobs)
        if mirror_files != want:
            fail(f"the mirror holds {mirror_files}, expected {want}\n{r.stdout}\n{r.stderr}")
        print(f"ok: {len(want)} wheels through the artifacts into the mirror, --verify passed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
