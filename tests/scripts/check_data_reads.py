#!/usr/bin/env python3
"""The shipped facts reach the application one way: app::Facts reads them from the session's data
root once and passes them down (docs/architecture.md, "Facts"). The process-wide accessors
(ArchData::shipped(), Platforms::shipped(), JetPacks::shipped(), the load_shipped* readers,
recipe::Search::shipped(), validate::shipped_library_facts()) exist for tests and tools only.

Fails (exit 1), naming file:line, on any use of them in src/ outside the files that define them,
and (self-test) when given --plant, on a planted use in a copy of one source line.
"""
import argparse
import os
import re
import sys

USE = re.compile(r'\b(?:ArchData|Platforms|JetPacks|Search)::shipped\s*\(|\bload_shipped\w*\s*\(|\bshipped_library_facts\s*\(')
# Where each accessor is declared and defined (a default argument in a header is a declaration
# for tests' loaders, reached only by callers that give no data: none in src/, checked below).
DEFINED_IN = {
    'arch/arch_data.hpp', 'arch/arch_data.cpp',
    'toolchain/platform.hpp', 'toolchain/platform.cpp',
    'toolchain/jetpack.hpp', 'toolchain/jetpack.cpp',
    'toolchain/toolchain.hpp', 'toolchain/toolchain.cpp',
    'recipe/recipe.hpp', 'recipe/recipe.cpp',
    'recipe/library_spec.hpp', 'recipe/library_spec.cpp',
    'doctor/releases.hpp', 'doctor/releases.cpp',
    'validate/closure.hpp', 'validate/closure.cpp',
}
# Loaders whose default argument is the singleton: a src/ call without the data is a use too.
DEFAULTED = re.compile(r'\b(?:Releases::load_shipped|toolchain::load_shipped)\s*\(\s*\)')


def uses(src):
    found = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(('.cpp', '.hpp', '.h')):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            with open(path, encoding='utf-8', errors='replace') as fh:
                for n, line in enumerate(fh, 1):
                    code = line.split('//', 1)[0]
                    if rel in DEFINED_IN and not DEFAULTED.search(code):
                        continue
                    if USE.search(code) or DEFAULTED.search(code):
                        found.append(f'src/{rel}:{n}: {line.strip()}')
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--src', required=True)
    ap.add_argument('--plant', action='store_true', help='self-test: a planted use must be found')
    a = ap.parse_args()
    if a.plant:
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, 'src')
            shutil.copytree(a.src, copy)
            with open(os.path.join(copy, 'mirror', 'views.cpp'), 'a', encoding='utf-8') as fh:
                fh.write('static const auto& planted = arch::ArchData::shipped();\n')
            found = uses(copy)
            if not any(u.startswith('src/mirror/views.cpp:') and 'planted' in u for u in found):
                print('the planted use in src/mirror/views.cpp was not found', file=sys.stderr)
                return 1
            print('planted use found:', found[-1])
            return 0
    found = uses(a.src)
    for u in found:
        print(u + ': a process-wide data accessor outside its definition; take the data from app::Facts', file=sys.stderr)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
