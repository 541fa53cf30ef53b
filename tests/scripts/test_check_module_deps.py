#!/usr/bin/env python3
"""check_module_deps.py finds what it is for: run on a temporary copy of src/ and of the map with a
planted fault each, it fails and names the file:line and the edge (or the module). The copy as it
is passes, so each failure is the planted fault's."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
checker = os.path.join(here, 'check_module_deps.py')
src, module_map, doc = sys.argv[1:4]
failures = []


def check(name, tree, map_path, expect_rc, expect_text, doc_path=None):
    args = [sys.executable, checker, '--map', map_path]
    args += ['--doc', doc_path] if doc_path else ['--src', tree]
    r = subprocess.run(args, capture_output=True, text=True)
    out = r.stdout + r.stderr
    ok = r.returncode == expect_rc and all(t in out for t in expect_text)
    print(f'{"ok" if ok else "FAILED"}: {name}')
    if not ok:
        failures.append(name)
        print(f'  exit {r.returncode} (expected {expect_rc}), expected {expect_text!r} in:\n{out}')


def append(path, text):
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    with open(path, 'a', encoding='utf-8') as f:
        f.write(text + '\n')
    return len(lines) + 1  # the planted line's number


with tempfile.TemporaryDirectory(prefix='module-deps-') as tmp:
    with open(module_map, encoding='utf-8') as f:
        real_map = f.read()

    def fresh(name):
        tree = os.path.join(tmp, name, 'src')
        shutil.copytree(src, tree)
        path = os.path.join(tmp, name, 'module-deps.txt')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(real_map)
        return tree, path

    tree, m = fresh('unchanged')
    check('the copy as it is passes', tree, m, 0, ['every #include of src/ is a declared edge'])

    tree, m = fresh('core-to-plan')
    line = append(os.path.join(tree, 'core', 'text.cpp'), '#include "plan/plan.hpp"')
    check('an undeclared edge (core includes plan/) fails, naming file:line and the edge', tree, m, 1,
          [f'src/core/text.cpp:{line}: core -> plan (#include "plan/plan.hpp") is not declared'])

    tree, m = fresh('header-edge')
    line = append(os.path.join(tree, 'store', 'layout.hpp'), '#  include "run/capture.hpp"')
    check('an undeclared edge in a header, spaced "#  include", fails', tree, m, 1,
          [f'src/store/layout.hpp:{line}: store -> run'])

    tree, m = fresh('transitive')
    # Declared directly is the rule: prepare -> binary is refused although stages declares binary.
    line = append(os.path.join(tree, 'prepare', 'prepare.cpp'), '#include "binary/elf.hpp"')
    check('an edge reachable only through another module (prepare -> binary via stages) fails', tree, m, 1,
          [f'src/prepare/prepare.cpp:{line}: prepare -> binary'])

    tree, m = fresh('cli-from-module')
    line = append(os.path.join(tree, 'stages', 'pipeline.cpp'), '#include "cli/common.hpp"')
    check('a module including cli/ fails', tree, m, 1,
          [f'src/stages/pipeline.cpp:{line}: stages -> cli'])

    tree, m = fresh('relative')
    line = append(os.path.join(tree, 'core', 'text.cpp'), '#include "../plan/plan.hpp"')
    check('an include that climbs out of its folder fails', tree, m, 1,
          [f'src/core/text.cpp:{line}: #include "../plan/plan.hpp" climbs out of its folder'])

    tree, m = fresh('cli-uses-all')
    append(os.path.join(tree, 'cli', 'plan.cpp'), '#include "extenv/extenv.hpp"')
    append(os.path.join(tree, 'main.cpp'), '#include "mirror/mirror.hpp"')
    check('cli/ and main.cpp may include every module', tree, m, 0, [])

    # 'newmod': a name no module of the real tree has (the copy holds every real one).
    tree, m = fresh('new-module-without-block')
    os.makedirs(os.path.join(tree, 'newmod'))
    with open(os.path.join(tree, 'newmod', 'build.cpp'), 'w', encoding='utf-8') as f:
        f.write('#include "core/error.hpp"\n')
    check('a folder of src/ with sources and no archbuild_module block fails', tree, m, 1,
          ['src/newmod/ holds sources but is not a module'])

    tree, m = fresh('new-module')
    os.makedirs(os.path.join(tree, 'newmod'))
    with open(os.path.join(tree, 'newmod', 'build.cpp'), 'w', encoding='utf-8') as f:
        f.write('#include "core/error.hpp"\n#include "stages/pipeline.hpp"\n')
    with open(m, 'a', encoding='utf-8') as f:
        f.write('newmod: core\n')
    check('a new module (its line in the map) is checked like the others', tree, m, 1,
          ['src/newmod/build.cpp:2: newmod -> stages'])

    tree, m = fresh('unused-declaration')
    with open(m, 'w', encoding='utf-8') as f:
        f.write(re.sub(r'^store:.*$', r'\g<0> arch', real_map, count=1, flags=re.M))
    check('a declared module no file includes fails', tree, m, 1,
          ['store declares arch in its DEPS but no file of src/store/ includes arch/'])

    tree, m = fresh('cycle')
    line = append(os.path.join(tree, 'core', 'text.cpp'), '#include "arch/arch.hpp"')
    with open(m, 'w', encoding='utf-8') as f:
        f.write(re.sub(r'^core:.*$', 'core: arch', real_map, count=1, flags=re.M))
    check('a cycle among the declarations fails', tree, m, 1, ['form a cycle', 'arch -> core'])

    # The document's two pictures against the map.
    with open(doc, encoding='utf-8') as f:
        text = f.read()
    tree, m = fresh('doc')
    check('docs/architecture.md as it is matches', tree, m, 0, ['matches'], doc)
    bad_doc = os.path.join(tmp, 'doc-edge.md')
    with open(bad_doc, 'w', encoding='utf-8') as f:
        f.write(text.replace('\nplan: ', '\nplan: store ', 1))
    check('an edge in the module-deps block that is not declared fails', tree, m, 1,
          ['in the ```module-deps block, but src/CMakeLists.txt declares "plan: '], bad_doc)
    with open(m, 'a', encoding='utf-8') as f:
        f.write('newmod: core prepare\n')
    check('a declared module the document lacks fails, naming its line and row', tree, m, 1,
          ['module newmod is missing from the ```module-deps block (src/CMakeLists.txt declares "newmod: core prepare")',
           'module newmod is missing from the ```module-layers block (its row: 7)'], doc)

if failures:
    print(f'{len(failures)} case(s) failed')
    sys.exit(1)
print('every planted fault was found')
