'use strict';
// The TypeScript types (index.d.ts) checked by the compiler: test/types/
// usage.ts, what a service writes (README.md's examples, typed), must
// compile with --strict, each of its @ts-expect-error lines must be an
// error, and the values index.d.ts exports must be exactly those index.js
// exports.  Needs TypeScript: npm's typescript, or Debian's node-typescript
// (/usr/share/nodejs/typescript).  Run: node test/types.check.js
const fs = require('node:fs');
const path = require('node:path');

function load(names) {
  for (const n of names) {
    try {
      return { mod: require(n), file: require.resolve(n) };
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err;
    }
  }
  return null;
}

const found = load(['typescript', '/usr/share/nodejs/typescript']);
const ts = found && found.mod;
if (!ts) {
  console.error('not ok: no TypeScript (npm install --no-save typescript, or apt install node-typescript)');
  process.exit(1);
}

const root = path.resolve(__dirname, '..');
const files = [path.join(__dirname, 'types', 'usage.ts')];
// @types/node where it is installed (npm's, or Debian's nodejs package's
// beside its node-typescript: /usr/share/nodejs/@types/node); else the few
// 'node:http' types named
let nodeTypes = null;
try {
  nodeTypes = path.dirname(require.resolve('@types/node/package.json'));
} catch {
  const beside = path.join(path.dirname(found.file), '..', '..', '@types', 'node');
  if (fs.existsSync(path.join(beside, 'package.json'))) nodeTypes = path.resolve(beside);
}
if (!nodeTypes) files.push(path.join(__dirname, 'types', 'node-http.d.ts'));
const options = {
  strict: true,
  noEmit: true,
  noUnusedLocals: true,
  skipLibCheck: false,
  target: ts.ScriptTarget.ES2020,
  lib: ['lib.es2020.d.ts'],
  module: ts.ModuleKind.CommonJS,
  moduleResolution: ts.ModuleResolutionKind.NodeJs,
  types: nodeTypes ? ['node'] : [],
  typeRoots: nodeTypes ? [path.dirname(nodeTypes)] : [],
  baseUrl: root,
  paths: { 'pg-idempotency': ['index.d.ts'] },
};
const program = ts.createProgram(files, options);
const diagnostics = ts.getPreEmitDiagnostics(program);
let failed = 0;
for (const d of diagnostics) {
  const where = d.file ? `${path.relative(root, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
  console.log(`not ok: ${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
  failed++;
}
const dts = program.getSourceFile(path.join(root, 'index.d.ts'));
if (!dts) {
  console.log('not ok: index.d.ts was not part of the program (usage.ts does not import it)');
  process.exit(1);
}
if (!failed) console.log(`ok: usage.ts compiles with --strict against index.d.ts (TypeScript ${ts.version}, ${nodeTypes ? '@types/node' : 'node:http stubs'}), ${program.getSourceFiles().length} files`);

// the values index.d.ts exports, against index.js's exports
const checker = program.getTypeChecker();
const declared = checker.getExportsOfModule(checker.getSymbolAtLocation(dts))
  .filter((s) => s.flags & ts.SymbolFlags.Value)
  .map((s) => s.getName())
  .sort();
const actual = Object.keys(require(root)).sort();
const missing = actual.filter((n) => !declared.includes(n));
const extra = declared.filter((n) => !actual.includes(n));
if (missing.length || extra.length) {
  console.log(`not ok: exports differ: in index.js only: [${missing}], in index.d.ts only: [${extra}]`);
  failed++;
} else {
  console.log(`ok: index.d.ts declares exactly index.js's ${actual.length} exports (${actual.join(', ')})`);
}
process.exit(failed ? 1 : 0);
