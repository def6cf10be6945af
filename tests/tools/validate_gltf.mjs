// Validates a .glb with the Khronos glTF validator (the npm package pinned in
// package.json) and prints its issue counts as one JSON line:
//   node validate_gltf.mjs FILE.glb  ->  {"errors":0,"warnings":0,"infos":0,"hints":0,"messages":[...]}
// Exit status 0 when the report was produced (the caller judges the counts).
import { readFile } from 'node:fs/promises';
import validator from 'gltf-validator';

const path = process.argv[2];
const bytes = new Uint8Array(await readFile(path));
const report = await validator.validateBytes(bytes, { maxIssues: 100 });
const issues = report.issues;
console.log(JSON.stringify({
  errors: issues.numErrors,
  warnings: issues.numWarnings,
  infos: issues.numInfos,
  hints: issues.numHints,
  messages: issues.messages.map((m) => `${m.severity} ${m.code} ${m.pointer ?? ''}: ${m.message}`),
  counts: report.info ? { drawCalls: report.info.drawCallCount, vertices: report.info.totalVertexCount } : {},
}));
