#!/usr/bin/env python3
"""Checks a mirror's variant wheels (DIR/variants/) against PEP 825 as read at
python/peps@ba4deeb7969588d937da609008d05bb83a47b1ab:peps/pep-0825.rst (format 0.1.1):

- every variant wheel's name follows the PEP's file name grammar
  {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}-{variant label}.whl
  (label ^[0-9a-z_.]+$, a python tag that does not start with a digit);
- it holds one .dist-info folder, named for the name's version, whose METADATA says that version,
  whose RECORD hashes every member, and whose variant.json validates against the PEP's JSON schema
  (tests/data/pep825/variant-schema-0.1.1.json), maps exactly the file's label, keeps value lists
  sorted, and lists every namespace it uses in default-priorities.namespace;
- each release with a variant wheel has {name}-{version}-variants.json (name and version as the
  wheel name spec normalises them), valid against the schema, mapping every label of the release
  to the same properties as the wheels, with a namespace list consistent with theirs;
- every index page (HTML and PEP 691 JSON) that links a variant wheel links that file too, with
  the right sha256;
- the properties are in the namespace of wheelnext's NVIDIA provider
  (wheelnext/nvidia-variant-provider@ffea5d3bf372d7a3b4504b4ee295282417af767c:nvidia_variant_provider/plugin.py):
  nvidia :: cuda_version_lower_bound :: MAJOR.MINOR and nvidia :: sm_arch :: NN_real / N0_virtual.

Usage: check_pep825.py MIRROR SCHEMA. Exit 0: all hold; 1: what does not, one line each;
77: the jsonschema module is missing (python3-jsonschema).

check_pep825.py --select MIRROR PROJECT VERSION CC DRIVER_CUDA prints the variant wheel a
variant-aware installer would take from DIR/variants/ on a host of compute capability CC whose
driver supports CUDA DRIVER_CUDA (or "none"): the release's -variants.json read, each variant kept
when every feature it lists has a value the host supports, then ordered by PEP 825's "Variant
ordering" (namespace order from default-priorities, features and values in the order the provider
gives them) and the label. The host's supported values are those plugin.py's
get_supported_configs() gives (features cuda_version_lower_bound, cuda_version_upper_bound,
sm_arch, in that order), re-stated here: no variant-aware installer or provider is run.
"""
import base64
import glob
import hashlib
import html.parser
import json
import os
import re
import sys
import zipfile

try:
    import jsonschema
except ImportError:
    jsonschema = None

LABEL = re.compile(r"^[0-9a-z_.]+$")
PROBLEMS = []


def problem(msg):
    PROBLEMS.append(msg)


def parse_name(name):
    """PEP 825's file name grammar: the components, or None."""
    if not name.endswith(".whl"):
        return None
    parts = name[:-4].split("-")
    if len(parts) == 7:
        dist, ver, build, py, abi, plat, label = parts
        if not build[:1].isdigit():
            return None
    elif len(parts) == 6:
        dist, ver, py, abi, plat, label = parts
        build = None
    else:
        return None
    if py[:1].isdigit() or not LABEL.match(label):
        return None
    return {"dist": dist, "version": ver, "build": build, "label": label}


def normalized(dist):
    return re.sub(r"[-_.]+", "_", dist).lower()


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def check_sorted(where, variants):
    for label, namespaces in variants.items():
        for ns, features in namespaces.items():
            for feature, values in features.items():
                if values != sorted(values):
                    problem(f"{where}: {label} {ns} :: {feature}: values not sorted lexically: {values}")
                if ns != "nvidia" or feature not in ("cuda_version_lower_bound", "sm_arch"):
                    problem(f"{where}: {ns} :: {feature} is not a feature of NVIDIA's provider")
                pattern = r"^\d+\.\d+$" if feature == "cuda_version_lower_bound" else r"^\d+_(real|virtual)$"
                for v in values:
                    if not re.match(pattern, v):
                        problem(f"{where}: {ns} :: {feature} :: {v} is not a value of NVIDIA's provider")


def namespaces_of(variants):
    return {ns for namespaces in variants.values() for ns in namespaces}


def consistent(a, b):
    """PEP 825: one namespace list is the other's prefix."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return long[: len(short)] == short


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href"]


def main():
    if jsonschema is None:
        print("jsonschema is not installed (python3-jsonschema)")
        sys.exit(77)
    mirror, schema_path = sys.argv[1], sys.argv[2]
    with open(schema_path) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    files = os.path.join(mirror, "variants", "files")
    wheels = sorted(glob.glob(os.path.join(files, "*.whl")))
    if not wheels:
        problem("no variant wheel in variants/files")
    releases = {}  # (name, version) -> {label: properties}, namespace lists
    for path in wheels:
        name = os.path.basename(path)
        parsed = parse_name(name)
        if not parsed:
            problem(f"{name}: not PEP 825's variant wheel file name grammar")
            continue
        with zipfile.ZipFile(path) as z:
            members = z.namelist()
            dist_infos = {m.split("/")[0] for m in members if "/" in m and m.split("/")[0].endswith(".dist-info")}
            want_di = f"{parsed['dist']}-{parsed['version']}.dist-info"
            if dist_infos != {want_di}:
                problem(f"{name}: .dist-info folders {sorted(dist_infos)}, expected {want_di}")
                continue
            meta = z.read(f"{want_di}/METADATA").decode()
            version = re.search(r"^Version: *(.*?)\r?$", meta, re.M)
            if not version or version.group(1) != parsed["version"]:
                problem(f"{name}: METADATA's Version is {version and version.group(1)}, the name's {parsed['version']}")
            rows = {}
            for line in z.read(f"{want_di}/RECORD").decode().splitlines():
                p, h, size = line.rsplit(",", 2)
                rows[p] = h
            for m in members:
                if m.endswith("/") or m == f"{want_di}/RECORD":
                    continue
                if rows.get(m) != record_hash(z.read(m)):
                    problem(f"{name}: RECORD's hash of {m} is wrong or missing")
            if f"{want_di}/variant.json" not in members:
                problem(f"{name}: no {want_di}/variant.json")
                continue
            vj = json.loads(z.read(f"{want_di}/variant.json"))
        for e in validator.iter_errors(vj):
            problem(f"{name}: variant.json: {e.message}")
        if list(vj.get("variants", {})) != [parsed["label"]]:
            problem(f"{name}: variant.json maps {list(vj.get('variants', {}))}, not exactly the label {parsed['label']}")
        ns_list = vj.get("default-priorities", {}).get("namespace", [])
        if not namespaces_of(vj.get("variants", {})) <= set(ns_list):
            problem(f"{name}: default-priorities.namespace {ns_list} leaves out a namespace it uses")
        check_sorted(name, vj.get("variants", {}))
        key = (normalized(parsed["dist"]), parsed["version"])
        rel = releases.setdefault(key, {"variants": {}, "namespaces": []})
        for label, props in vj.get("variants", {}).items():
            if label in rel["variants"] and rel["variants"][label] != props:
                problem(f"{name}: label {label} maps to other properties than in another wheel of the release")
            rel["variants"][label] = props
        rel["namespaces"].append(ns_list)

    index_names = {}
    for (dist, version), rel in sorted(releases.items()):
        index_name = f"{dist}-{version}-variants.json"
        index_names[(dist, version)] = index_name
        path = os.path.join(files, index_name)
        if not os.path.isfile(path):
            problem(f"{index_name}: missing (a release with variant wheels)")
            continue
        with open(path) as f:
            ij = json.load(f)
        for e in validator.iter_errors(ij):
            problem(f"{index_name}: {e.message}")
        for label, props in rel["variants"].items():
            if ij.get("variants", {}).get(label) != props:
                problem(f"{index_name}: label {label} is not mapped as its wheel maps it")
        for ns_list in rel["namespaces"]:
            if not consistent(ns_list, ij.get("default-priorities", {}).get("namespace", [])):
                problem(f"{index_name}: namespace list inconsistent with a wheel's {ns_list}")
        check_sorted(index_name, ij.get("variants", {}))

    # The pages that link variant wheels link their release's index-level file too, hashes right.
    def sha(p):
        with open(p, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    for page in sorted(glob.glob(os.path.join(mirror, "**", "index.html"), recursive=True)):
        parser = Links()
        with open(page) as f:
            parser.feed(f.read())
        linked = {}
        for href in parser.hrefs:
            base, _, frag = href.partition("#sha256=")
            linked[os.path.normpath(os.path.join(os.path.dirname(page), base))] = frag
        rel_page = os.path.relpath(page, mirror)
        for target, frag in linked.items():
            parsed = parse_name(os.path.basename(target))
            if not parsed or not target.endswith(".whl") or len(os.path.basename(target)[:-4].split("-")) < 6:
                continue
            if frag != sha(target):
                problem(f"{rel_page}: link to {os.path.basename(target)} has sha256 {frag or '(none)'}")
            index_name = index_names.get((normalized(parsed["dist"]), parsed["version"]))
            want = os.path.normpath(os.path.join(files, index_name)) if index_name else None
            if not want or want not in linked:
                problem(f"{rel_page}: links {os.path.basename(target)} but not {index_name}")
            elif linked[want] != sha(want):
                problem(f"{rel_page}: link to {index_name} has the wrong sha256")
    for page in sorted(glob.glob(os.path.join(mirror, "variants", "simple", "*", "index.json"))):
        with open(page) as f:
            pj = json.load(f)
        names = {f["filename"] for f in pj["files"]}
        if any(n.endswith(".whl") for n in names) and not any(n.endswith("-variants.json") for n in names):
            problem(f"{os.path.relpath(page, mirror)}: lists variant wheels but no -variants.json")

    for p in PROBLEMS:
        print(p)
    if PROBLEMS:
        sys.exit(1)
    print(f"PEP 825: {len(wheels)} variant wheel(s), {len(releases)} release file(s), all valid")


def provider_supported(cc, driver):
    """plugin.py's get_supported_configs() for a host: feature -> values, best first (ordered)."""
    major, minor = (int(x) for x in cc.split("."))
    umd_major, umd_minor = (int(x) for x in driver.split("."))
    majors, minors = range(11, 16), range(21)
    lower = []
    for m in range(umd_major, min(majors) - 1, -1):
        for n in ([*range(max(minors), -1, -1), None] if m < umd_major else [*range(umd_minor, -1, -1), None]):
            lower.append(f"{m}.{n}" if n is not None else f"{m}")
    upper = []
    for m in range(max(majors), umd_major - 1, -1):
        for n in ([*range(max(minors), -1, -1), None] if m > umd_major else range(max(minors), umd_minor, -1)):
            upper.append(f"{m}.{n}" if n is not None else f"{m}")
    sm = [f"{major}{n}_real" for n in range(minor, -1, -1)] + [f"{major}0_virtual"]
    return {"nvidia": {"cuda_version_lower_bound": lower, "cuda_version_upper_bound": upper, "sm_arch": sm}}


def select(mirror, project, version, cc, driver):
    files = os.path.join(mirror, "variants", "files")
    with open(os.path.join(files, f"{normalized(project)}-{version}-variants.json")) as f:
        meta = json.load(f)
    supported = provider_supported(cc, driver)
    ns_order = meta["default-priorities"]["namespace"]

    def key(label):
        props = meta["variants"][label]
        keys = []
        for ns, features in props.items():
            if ns not in supported or ns not in ns_order:
                return None
            feature_order = list(supported[ns])
            for feature, values in features.items():
                have = [v for v in supported[ns].get(feature, []) if v in values]
                if not have:
                    return None  # no value of this feature is supported: incompatible
                keys.append((ns_order.index(ns), feature_order.index(feature), supported[ns][feature].index(have[0])))
        return sorted(keys)

    compatible = [(key(label), label) for label in meta["variants"] if key(label) is not None]

    def better(a, b):  # PEP 825 step 7: first differing key, then more keys, then the label
        for x, y in zip(a[0], b[0]):
            if x != y:
                return x < y
        if len(a[0]) != len(b[0]):
            return len(a[0]) > len(b[0])
        return a[1] < b[1]

    best = None
    for c in compatible:
        if best is None or better(c, best):
            best = c
    if best is None:
        print("none")
        return
    for w in sorted(glob.glob(os.path.join(files, "*.whl"))):
        parsed = parse_name(os.path.basename(w))
        if parsed and normalized(parsed["dist"]) == normalized(project) and parsed["version"] == version and parsed["label"] == best[1]:
            print(w)
            return
    print("none")


if __name__ == "__main__":
    if sys.argv[1] == "--select":
        select(*sys.argv[2:7])
    else:
        main()
