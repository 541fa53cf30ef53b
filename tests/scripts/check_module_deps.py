#!/usr/bin/env python3
"""The module map is true: every #include "<module>/..." in src/ is an edge its module declares.

Reads the map CMake built with (src/CMakeLists.txt's archbuild_module(NAME ... DEPS ...) calls,
written at generate time to <build>/src/module-deps.txt as "name: dep dep" lines) and every
`#include "..."` under src/. A module is the first path component (src/plan/x.cpp is `plan`);
src/cli/ and src/main.cpp may include every module. An edge counts as declared only when it is
declared directly: a module lists every module it includes (core too), so the DEPS are the map,
read without following anything. Fails (exit 1), naming file:line and the edge, on:
  - an include of another module that its DEPS do not list;
  - an include of cli/ from a module (nothing below the command line uses it);
  - a folder of src/ with sources and no archbuild_module block;
  - a declared dependency no file of the module includes (the map would claim an edge that is not);
  - a cycle among the declarations;
  - with --doc, a ```module-deps block ("module: dep dep") or a ```module-layers block (the rows of
    the layer picture: a module one row above its highest dependency) of docs/architecture.md that
    differs from the declarations.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_SUFFIXES = ('.cpp', '.hpp', '.h', '.c', '.cc', '.inc')
# May use every module: the command line and the executable's main.
TOP = 'cli'


def read_map_lines(lines, where):
    deps = {}
    problems = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        name, sep, rest = line.partition(':')
        name = name.strip()
        if not sep or not name:
            problems.append(f'{where}:{n}: expected "module: dep dep ...", got {line!r}')
            continue
        if name in deps:
            problems.append(f'{where}:{n}: module {name} listed twice')
        deps[name] = set(rest.split())
    return deps, problems


def read_map(path):
    with open(path, encoding='utf-8') as f:
        return read_map_lines(f.read().splitlines(), path)


def read_block(path, lines, info):
    """The lines of the document's ```<info> fenced block, blank before it so numbers stay the file's."""
    start = next((i for i, l in enumerate(lines) if l.strip() == '```' + info), None)
    if start is None:
        return None, [f'{path}: no ```{info} block']
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == '```'), None)
    if end is None:
        return None, [f'{path}:{start + 1}: the ```{info} block is not closed']
    return [''] * (start + 1) + lines[start + 1:end], []


def layers(deps):
    """Each module's row in the layer picture: 0 with no dependency, else one above its highest one."""
    row = {}

    def of(m):
        if m not in row:
            row[m] = 0  # a cycle (reported elsewhere) must not recurse forever
            row[m] = 1 + max((of(d) for d in deps[m] if d in deps), default=-1)
        return row[m]

    for m in deps:
        of(m)
    return row


def owner_of(rel):
    parts = rel.split('/')
    return TOP if len(parts) == 1 else parts[0]


def scan(src, modules):
    """Yields (file relative to src's parent, line, owner, target, include text) per cross-module include."""
    base = os.path.basename(os.path.normpath(src))
    folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src).replace(os.sep, '/')
            owner = owner_of(rel)
            with open(path, encoding='utf-8', errors='replace') as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or '/' not in m.group(1):
                        continue  # a header next to the file: its own module
                    if m.group(1).startswith('../'):
                        yield f'{base}/{rel}', n, owner, '..', m.group(1)
                        continue
                    target = m.group(1).split('/')[0]
                    # A quoted include of something not under src/ is a library's, not a module's.
                    if target == owner or target not in folders:
                        continue
                    yield f'{base}/{rel}', n, owner, target, m.group(1)


def find_cycle(deps):
    state = {}
    stack = []

    def visit(m):
        state[m] = 'open'
        stack.append(m)
        for d in sorted(deps.get(m, ())):
            if state.get(d) == 'open':
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[m] = 'done'
        return None

    for m in sorted(deps):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def check(src, deps):
    problems = []
    used = {m: set() for m in deps}
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if folder == TOP or not os.path.isdir(path) or folder in deps:
            continue
        has_sources = any(f.endswith(SOURCE_SUFFIXES) for _, _, fs in os.walk(path) for f in fs)
        if has_sources:
            problems.append(f'src/{folder}/ holds sources but is not a module: add an '
                            f'archbuild_module({folder} SOURCES ... DEPS ...) block to src/CMakeLists.txt')
    for m, ds in sorted(deps.items()):
        for d in sorted(ds - set(deps)):
            problems.append(f'{m} declares {d}, which is not a module')
    for where, line, owner, target, text in scan(src, deps):
        if target == '..':
            problems.append(f'{where}:{line}: #include "{text}" climbs out of its folder: name the module '
                            f'("module/header.hpp"), so the edge is seen and checked')
            continue
        if owner == TOP:
            continue
        if owner not in deps:
            continue  # reported above
        if target == TOP:
            problems.append(f'{where}:{line}: {owner} -> cli (#include "{text}"): nothing below the '
                            f'command line may include cli/')
            continue
        used[owner].add(target)
        if target not in deps[owner]:
            problems.append(f'{where}:{line}: {owner} -> {target} (#include "{text}") is not declared: '
                            f'add archbuild_{target} to the DEPS of archbuild_module({owner} ...) in '
                            f'src/CMakeLists.txt, or remove the include')
    for m in sorted(deps):
        for d in sorted((deps[m] & set(deps)) - used[m]):
            problems.append(f'{m} declares {d} in its DEPS but no file of src/{m}/ includes {d}/: '
                            f'remove it from the DEPS (the map lists the edges there are)')
    cycle = find_cycle(deps)
    if cycle:
        problems.append('the declared modules form a cycle: ' + ' -> '.join(cycle))
    return problems


def compare_doc(doc, deps):
    """The document's two pictures of the map: ```module-layers (rows, top first: "N  module module")
    and ```module-deps ("module: dep dep"), each compared with the declarations."""
    with open(doc, encoding='utf-8') as f:
        lines = f.read().splitlines()
    problems = []
    block, missing = read_block(doc, lines, 'module-deps')
    problems += missing
    if block is not None:
        doc_deps, bad = read_map_lines(block, doc)
        problems += bad
        for m in sorted(set(deps) | set(doc_deps)):
            want = f'{m}: {" ".join(sorted(deps.get(m, ())))}'.rstrip()
            if m not in doc_deps:
                problems.append(f'{doc}: module {m} is missing from the ```module-deps block '
                                f'(src/CMakeLists.txt declares "{want}")')
            elif m not in deps:
                problems.append(f'{doc}: the ```module-deps block lists {m}, which src/CMakeLists.txt '
                                f'does not declare')
            elif doc_deps[m] != deps[m]:
                problems.append(f'{doc}: "{m}: {" ".join(sorted(doc_deps[m]))}" in the ```module-deps block, '
                                f'but src/CMakeLists.txt declares "{want}"')
    block, missing = read_block(doc, lines, 'module-layers')
    problems += missing
    if block is not None:
        want = layers(deps)
        seen = {}
        for n, line in enumerate(block, 1):
            words = line.split()
            if not words:
                continue
            if not words[0].isdigit():
                problems.append(f'{doc}:{n}: expected "ROW  module module ..." in the ```module-layers block')
                continue
            for m in words[1:]:
                if m in seen:
                    problems.append(f'{doc}:{n}: {m} is on two rows of the ```module-layers block')
                seen[m] = (int(words[0]), n)
        for m in sorted(set(want) | set(seen)):
            if m not in seen:
                problems.append(f'{doc}: module {m} is missing from the ```module-layers block '
                                f'(its row: {want[m]})')
            elif m not in want:
                problems.append(f'{doc}:{seen[m][1]}: the ```module-layers block shows {m}, which '
                                f'src/CMakeLists.txt does not declare')
            elif seen[m][0] != want[m]:
                problems.append(f'{doc}:{seen[m][1]}: {m} is on row {seen[m][0]} of the ```module-layers block; '
                                f'its row is {want[m]}, one above its highest dependency')
    return problems


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--map', required=True, help='module-deps.txt that CMake generated (name: deps)')
    p.add_argument('--src', help='the src/ folder (checks its includes)')
    p.add_argument('--doc', help='docs/architecture.md: compare its ```module-deps block instead')
    a = p.parse_args(argv)
    if not a.doc and not a.src:
        p.error('give --src (check the includes) or --doc (compare the document)')
    deps, problems = read_map(a.map)
    if not deps and not problems:
        problems.append(f'{a.map}: no module declared')
    if not problems:
        problems = compare_doc(a.doc, deps) if a.doc else check(a.src, deps)
    for line in problems:
        print(line)
    if problems:
        print(f'{len(problems)} problem(s) with the module map')
        return 1
    what = f'{a.doc} matches' if a.doc else 'every #include of src/ is a declared edge of'
    print(f'{what} the {len(deps)} modules of src/CMakeLists.txt')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
