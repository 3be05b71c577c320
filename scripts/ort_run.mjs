// ort_run.mjs runs an ONNX model with ONNX Runtime (onnxruntime-node, CPU)
// on seeded random inputs and writes the inputs and outputs for tapml's
// tests to compare against:
//
//   node scripts/ort_run.mjs MODEL OUTDIR SEED NAME=D0,D1,...[:text] [NAME=...]
//
// Each input NAME gets the given shape and float32 values uniform in
// [-1, 1) from a xorshift32 generator seeded with SEED (inputs in the order
// given). With ":text", an [N, C, H, W] input is instead a page of
// text-like marks: a light background (1.5) with lines of dark (-1.5)
// random glyph blocks, plus noise of ±0.1, the same in every channel (what
// a text detector reacts to). OUTDIR receives one little-endian raw file per tensor
// (input_K.f32, output_K.f32) and manifest.json listing name, shape, dtype
// and file of each. ONNX Runtime is found in tools/npm (scripts/setup.sh
// installs it) or wherever Node resolves onnxruntime-node.
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [model, outDir, seedArg, ...specs] = process.argv.slice(2);
if (!model || !outDir || !seedArg || specs.length === 0) {
  console.error('usage: node scripts/ort_run.mjs MODEL OUTDIR SEED NAME=D0,D1,... [NAME=...]');
  process.exit(2);
}

function loadOrt() {
  for (const base of [join(here, '..', 'tools', 'npm', 'package.json'), join(process.cwd(), 'package.json')]) {
    try {
      return createRequire(base)('onnxruntime-node');
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  throw new Error('onnxruntime-node not found: run scripts/setup.sh');
}

// xorshift32, mapped to [-1, 1).
let state = (Number(seedArg) >>> 0) || 1;
function next() {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state / 2147483648 - 1;
}

// textPage fills an [N, C, H, W] tensor with lines of glyph-like blocks.
function textPage(data, [n, c, h, w]) {
  const img = new Float32Array(h * w).fill(1.5);
  const lineH = Math.max(8, Math.floor(h / 8));
  for (let y0 = Math.floor(lineH / 2); y0 + lineH <= h; y0 += 2 * lineH) {
    let x = Math.floor(w / 16) + Math.floor((next() + 1) * w / 16);
    const end = w - Math.floor((next() + 1) * w / 8);
    while (x < end) {
      const gw = Math.max(3, Math.floor(lineH * (0.5 + (next() + 1) / 4)));
      // a glyph: a few strokes inside a gw × lineH cell
      for (let s = 0; s < 3; s++) {
        const vertical = next() > 0;
        const sx = x + Math.floor((next() + 1) / 2 * (gw - 2));
        const sy = y0 + Math.floor((next() + 1) / 2 * (lineH - 2));
        const len = Math.floor(lineH * (0.4 + (next() + 1) / 4));
        for (let k = 0; k < len; k++) {
          for (let t = 0; t < 2; t++) {
            const yy = vertical ? y0 + Math.floor(k * (lineH - 1) / len) : sy + t;
            const xx = vertical ? sx + t : x + Math.floor(k * (gw - 1) / len);
            if (yy < h && xx < w) img[yy * w + xx] = -1.5;
          }
        }
      }
      x += gw + 2;
      if (next() > 0.8) x += gw; // a space
    }
  }
  for (let i = 0; i < n * c; i++) {
    for (let j = 0; j < h * w; j++) data[i * h * w + j] = img[j] + 0.1 * next();
  }
}

const ort = loadOrt();
const session = await ort.InferenceSession.create(resolve(model), { executionProviders: ['cpu'], graphOptimizationLevel: 'all' });
mkdirSync(outDir, { recursive: true });
const manifest = { model: resolve(model), seed: Number(seedArg), ort: ort.env?.versions?.common ?? '', inputs: [], outputs: [] };
const feeds = {};
specs.forEach((spec, k) => {
  const [name, rest] = spec.split('=');
  const [dims, pattern] = rest.split(':');
  const shape = dims.split(',').map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  if (pattern === 'text') {
    textPage(data, shape);
  } else {
    for (let i = 0; i < n; i++) data[i] = next();
  }
  feeds[name] = new ort.Tensor('float32', data, shape);
  const file = `input_${k}.f32`;
  writeFileSync(join(outDir, file), Buffer.from(data.buffer));
  manifest.inputs.push({ name, shape, dtype: 'float32', file });
});
const results = await session.run(feeds);
session.outputNames.forEach((name, k) => {
  const t = results[name];
  if (t.type !== 'float32') throw new Error(`output ${name} is ${t.type}; only float32 is written`);
  const file = `output_${k}.f32`;
  writeFileSync(join(outDir, file), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  manifest.outputs.push({ name, shape: t.dims.map(Number), dtype: 'float32', file });
});
writeFileSync(join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 1) + '\n');
