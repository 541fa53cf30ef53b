#!/usr/bin/env python3
"""examples/ci/nightly.yml's data path, run here step by step as the workflow writes it (issue 43 §3).

GitHub's runners cannot be reached from here, so the workflow's own `run:` steps are run with
bash, in one workspace per job, with the example project (examples/minitorch, built with nvcc)
in place of PyTorch through the workflow's ARCHBUILD_RECIPE / ARCHBUILD_SOURCE_URL, and the
host's one CUDA release through ARCHBUILD_CUDA:

  0. another host builds the sm 9.0 job and pushes it, signed, to the build store (Debian's
     docker-registry on 127.0.0.1);
  1. the matrix job's `expand` step: its `matrix` output must hold only the sm 12.0 job and its
     `stored` output the key the other host pushed;
  2. each build job's steps (the bundle unpacked, the store's credentials and signing key, `wheel`
     with --store, `validate`, the artifact names) and its upload-artifact steps, laid out as
     upload-artifact v4 lays them out (test_nightly_artifacts.upload);
  3. the publish job's download-artifact steps (pattern, merge-multiple), its credentials step and
     its Publish step, which publishes the night's wheel and the stored key (`publish --key`);
  4. pip (a venv of /usr/bin/python3) downloads minitorch==0.1.0, and plain minitorch, from each
     GPU view of the mirror: the build made for that GPU.

Steps the test provides instead of running (they need sudo, GitHub's cache or a Debian root):
the bundle is made from the archbuild under test, CUDA is the host's /usr/local/cuda-13.0, and
actions/cache restores nothing. Any other step the test does not know fails it, as does an
expression it cannot evaluate: the workflow and this test read the same commands.

Usage: test_nightly_fleet.py SOURCE_DIR ARCHBUILD
"""
import fnmatch
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_nightly_artifacts import fail, upload  # noqa: E402  (skips itself without python3-yaml)

import yaml  # noqa: E402

PROVIDED = {
    "Make the archbuild bundle (in a Debian 11 root; glibc floor 2.28)",  # the bundle is made below
}


def skip(why):
    print("##archbuild-skip## " + why)
    sys.exit(0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_registry(tmp):
    port = free_port()
    os.makedirs(os.path.join(tmp, "registry", "storage"))
    config = os.path.join(tmp, "registry", "config.yml")
    with open(config, "w") as f:
        f.write(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {tmp}/registry/storage\n"
                f"http:\n  addr: 127.0.0.1:{port}\n  secret: archbuild-test\n")
    proc = subprocess.Popen(["/usr/bin/docker-registry", "serve", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.025)
    proc.kill()
    fail("docker-registry did not start")


class Expressions:
    """${{ expr }} from a table; an expression not in it fails the test."""

    def __init__(self, values):
        self.values = values

    def __call__(self, text):
        def one(m):
            expr = m.group(1).strip()
            if expr not in self.values:
                fail(f"the test does not know the expression ${{{{ {expr} }}}} in {text!r}")
            return self.values[expr]
        return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))


def run_step(step, ws, expr, env):
    """A `run:` step as GitHub runs it (bash -e), with its `env:`; returns its $GITHUB_OUTPUT and
    adds what it wrote to $GITHUB_ENV to `env` for the next steps."""
    out_file, env_file = os.path.join(ws, ".github_output"), os.path.join(ws, ".github_env")
    open(out_file, "w").close()
    open(env_file, "w").close()
    e = dict(env, GITHUB_OUTPUT=out_file, GITHUB_ENV=env_file)
    for k, v in (step.get("env") or {}).items():
        e[k] = expr(v)
    r = subprocess.run(["bash", "-e", "-c", expr(step["run"])], cwd=ws, env=e, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"step {step.get('name')!r} exited {r.returncode}:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    for line in open(env_file).read().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    outputs = {}
    for line in open(out_file).read().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            outputs[k] = v
    return outputs, r


def workspace(tmp, name, src, bundle_tar, pub):
    """A job's workspace after actions/checkout (the signing key's public half at ci/) and its
    HOME and RUNNER_TEMP."""
    ws = os.path.join(tmp, name)
    os.makedirs(os.path.join(ws, "ci"))
    shutil.copy(pub, os.path.join(ws, "ci", "store-signing.pub.pem"))
    os.makedirs(os.path.join(tmp, name + "-home"))
    os.makedirs(os.path.join(tmp, name + "-temp"))
    return ws


def main():
    src, archbuild = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for tool, why in [("/usr/bin/docker-registry", "Debian package docker-registry"), ("/usr/local/cuda/bin/nvcc", "CUDA"),
                      ("/usr/bin/openssl", "openssl"), ("/usr/bin/git", "git")]:
        if not os.path.exists(tool):
            skip(f"no {tool} ({why})")
    if subprocess.run(["/usr/bin/python3", "-c", "import venv, ensurepip"], capture_output=True).returncode != 0:
        skip("python3 has no venv/ensurepip")
    wf = yaml.safe_load(open(os.path.join(src, "examples", "ci", "nightly.yml")))
    jobs = wf["jobs"]
    tmp = tempfile.mkdtemp(prefix="nightly-fleet-")
    registry = None
    try:
        registry, port = start_registry(tmp)
        store = f"oci+http://127.0.0.1:{port}/builds/minitorch"
        r = subprocess.run(["bash", os.path.join(src, "tests", "support", "make-example-repos"), os.path.join(tmp, "repos")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("make-example-repos: " + r.stderr)
        priv, pub = os.path.join(tmp, "sign.pem"), os.path.join(tmp, "sign.pub.pem")
        subprocess.run(["/usr/bin/openssl", "genpkey", "-algorithm", "ed25519", "-out", priv], check=True)
        subprocess.run(["/usr/bin/openssl", "pkey", "-in", priv, "-pubout", "-out", pub], check=True)
        # The bundle: bin/archbuild is the archbuild under test.
        root = os.path.join(tmp, "bundle-src", "archbuild-0-linux-x86_64")
        os.makedirs(os.path.join(root, "bin"))
        with open(os.path.join(root, "bin", "archbuild"), "w") as f:
            f.write(f'#!/bin/sh\nexec "{archbuild}" "$@"\n')
        os.chmod(os.path.join(root, "bin", "archbuild"), 0o755)
        bundle_tar = os.path.join(tmp, "archbuild-0-linux-x86_64.tar.gz")
        with tarfile.open(bundle_tar, "w:gz") as t:
            t.add(root, arcname="archbuild-0-linux-x86_64")

        recipe = os.path.join(src, "examples", "minitorch", "recipe.toml")
        source_url = "file://" + os.path.join(tmp, "repos", "minitorch")
        base_env = {k: v for k, v in os.environ.items()
                    if k not in ("ARCHBUILD_STORE", "ARCHBUILD_STORE_TRUST", "ARCHBUILD_STORE_SIGN_KEY", "CCACHE_DIR",
                                 "ARCHBUILD_REMOTE_CACHE", "ARCHBUILD_MIRROR", "DOCKER_CONFIG", "ARCHBUILD_CACHE_DIR",
                                 "XDG_CACHE_HOME")}
        # The self-hosted runner's archbuild cache, shared by the matrix and build jobs as the
        # workflow's comments say (git mirrors, build venvs, the compiler cache).
        runner_cache = os.path.join(tmp, "runner-cache")

        def job_env(ws, overrides):
            values = {"github.workspace": ws, "github.event.inputs.sm || '90,100,120'": "90,120"}
            expr = Expressions(values)
            env = dict(base_env, HOME=ws + "-home", RUNNER_TEMP=ws + "-temp")
            for k, v in wf["env"].items():
                env[k] = expr(v)
            env.update(ARCHBUILD_CACHE=runner_cache, ARCHBUILD_STORE=store, ARCHBUILD_RECIPE=recipe,
                       ARCHBUILD_SOURCE_URL=source_url, ARCHBUILD_CUDA="13.0")
            env.update(overrides)
            return env, values

        # 0. Another host's build of the sm 9.0 job, pushed signed before the night.
        other = subprocess.run([archbuild, "--cache-dir", os.path.join(tmp, "other-host"), "wheel", "--sm", "90", "--recipe",
                                recipe, "--source-url", source_url, "--cuda", "13.0", "--store", store, "--store-sign-key",
                                priv, "--out", os.path.join(tmp, "other-out"), "--json"],
                               env=dict(base_env, HOME=os.path.join(tmp, "other-home")), capture_output=True, text=True)
        if other.returncode != 0:
            fail(f"the other host's build exited {other.returncode}:\n{other.stdout}\n{other.stderr[-4000:]}")
        other_key = json.loads(other.stdout)["key"]

        # 1. The matrix job's expand step.
        ws = workspace(tmp, "matrix", src, bundle_tar, pub)
        with tarfile.open(bundle_tar) as t:
            t.extractall(ws)
        os.rename(os.path.join(ws, "archbuild-0-linux-x86_64"), os.path.join(ws, "archbuild"))
        env, values = job_env(ws, {})
        expand = [s for s in jobs["matrix"]["steps"] if s.get("id") == "expand"]
        if len(expand) != 1:
            fail("the matrix job has no step with id expand")
        outputs, _ = run_step(expand[0], ws, Expressions(values), env)
        matrix = json.loads(outputs["matrix"])
        stored = outputs.get("stored", "")
        if stored != other_key:
            fail(f"matrix's stored output is {stored!r}, expected the other host's key {other_key}")
        if [j["sm"] for j in matrix["include"]] != ["12.0"]:
            fail(f"matrix's jobs are {matrix['include']}, expected the sm 12.0 job only")

        # 2. Each build job, its steps as written.
        artifacts = {}
        for i, mj in enumerate(matrix["include"]):
            ws = workspace(tmp, f"build-{i}", src, bundle_tar, pub)
            env, values = job_env(ws, {})
            values.update({f"matrix.{k}": str(v) for k, v in mj.items() if not isinstance(v, (dict, list))})
            values.update({"secrets.GITHUB_TOKEN": "token-never-used", "secrets.ARCHBUILD_STORE_SIGN_KEY": open(priv).read(),
                           "github.actor": "ci", "github.run_id": "1", "env.ARCHBUILD_CACHE": runner_cache})
            expr = Expressions(values)
            for step in jobs["build"]["steps"]:
                uses, name = step.get("uses", ""), step.get("name", "")
                if uses.startswith("actions/checkout"):
                    continue  # the workspace is made as a checkout leaves it
                if uses.startswith("actions/download-artifact"):
                    dest = os.path.join(ws, step["with"]["path"])
                    os.makedirs(dest, exist_ok=True)
                    shutil.copy(bundle_tar, dest)  # the only artifact a build job downloads: the bundle
                elif uses.startswith("actions/cache"):
                    continue  # nothing restored
                elif uses.startswith("actions/upload-artifact"):
                    art, files = upload(step, ws, values)
                    if "/" in art or art in artifacts:
                        fail(f"artifact name {art!r}: has a '/' or is not unique")
                    artifacts[art] = files
                elif name.startswith("Install CUDA"):
                    env["CUDA_HOME"] = "/usr/local/cuda-13.0"  # the host's toolkit, as the step would say
                elif "run" in step:
                    outputs, r = run_step(step, ws, expr, env)
                    if step.get("id"):
                        for k, v in outputs.items():
                            values[f"steps.{step['id']}.outputs.{k}"] = v
                    if name == "Build the wheel":
                        doc = json.load(open(os.path.join(ws, "wheel.json")))
                        if doc.get("store", {}).get("pushed") is not True or doc["store"].get("signed") is not True:
                            fail(f"the build job did not push its key signed: {doc.get('store')}")
                else:
                    fail(f"build step {name or uses!r}: the test does not know it")

        # 3. The publish job.
        ws = workspace(tmp, "publish", src, bundle_tar, pub)
        env, values = job_env(ws, {})
        values.update({"needs.matrix.outputs.stored": stored, "secrets.GITHUB_TOKEN": "token-never-used",
                       "github.actor": "ci", "github.run_id": "1"})
        expr = Expressions(values)
        published = False
        for step in jobs["publish"]["steps"]:
            uses, name = step.get("uses", ""), step.get("name", "")
            if uses.startswith("actions/checkout") or uses.startswith("actions/cache") or uses.startswith("actions/upload-artifact"):
                continue
            if uses.startswith("actions/download-artifact"):
                w = step["with"]
                dest = os.path.join(ws, w.get("path", "."))
                os.makedirs(dest, exist_ok=True)
                if "name" in w:
                    shutil.copy(bundle_tar, dest)
                    continue
                for art, files in artifacts.items():
                    if not fnmatch.fnmatchcase(art, w["pattern"]):
                        continue
                    base = dest if w.get("merge-multiple") else os.path.join(dest, art)
                    for rel, f in files.items():
                        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
                        shutil.copy(f, os.path.join(base, rel))
            elif "run" in step:
                _, r = run_step(step, ws, expr, env)
                if name == "Publish":
                    published = True
                    try:  # publish --json's document, then --verify's line
                        doc, _ = json.JSONDecoder().raw_decode(r.stdout.lstrip())
                    except ValueError:
                        doc = None
                    if not doc or [k["key"] for k in doc.get("keys", [])] != [other_key]:
                        fail(f"publish did not take the stored key {other_key}:\n{r.stdout}\n{r.stderr}")
            else:
                fail(f"publish step {name or uses!r}: the test does not know it")
        if not published:
            fail("the publish job has no step named Publish")
        mirror = os.path.join(ws, "mirror")
        files = sorted(os.listdir(os.path.join(mirror, "files")))
        if len(files) != 2 or not any(".sm90-" in f for f in files) or not any(".sm120-" in f for f in files):
            fail(f"the mirror holds {files}, expected the sm90 build (by key) and the sm120 build (an artifact)")

        # 4. pip from each GPU view gets the build made for that GPU.
        venv = os.path.join(tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True, capture_output=True)
        pip_env = {k: v for k, v in base_env.items() if not k.startswith("PIP_")}
        pip_env.update(PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
        for view, label in [("sm_90", ".sm90-"), ("sm_120", ".sm120-")]:
            for spec in ["minitorch==0.1.0", "minitorch"]:
                dest = os.path.join(tmp, "dl", view, spec)
                r = subprocess.run([os.path.join(venv, "bin", "pip"), "download", "--no-deps", "--only-binary=:all:",
                                    "--index-url", f"file://{mirror}/gpu/{view}/simple", spec, "-d", dest],
                                   env=pip_env, capture_output=True, text=True)
                got = glob.glob(os.path.join(dest, "*.whl"))
                if r.returncode != 0 or len(got) != 1 or label not in os.path.basename(got[0]):
                    fail(f"pip download {spec} from gpu/{view}: {got}\n{r.stdout}\n{r.stderr}")
        print(f"ok: matrix -> wheel --store -> artifacts -> publish (a wheel and key {other_key[:16]}) -> pip from sm_90 and sm_120")
    finally:
        if registry:
            registry.kill()
            registry.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
