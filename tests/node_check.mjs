// node_check.mjs - the WebAssembly module under Node.js: both builds (one
// thread, and threads on pthreads: Node's worker_threads) load a model,
// generate greedily, and must choose the tokens the native CLI chooses
// (infer run --temp 0), which the test runs for the same prompt with the
// plain C kernels (INFER_ISA=scalar): SIMD128's kernels sum in their order,
// so the two agree bit for bit. The native default kernels (AVX2, NEON)
// have an exp and an activation rounding of their own, whose last-bit
// differences can flip a near-tie some tokens on: that comparison is
// printed, not asserted. The kernels are the SIMD128 table (the model's
// description names it).
//   usage: node node_check.mjs WEB_DIR INFER_CLI MODEL [MODEL...]
// (WEB_DIR: build-wasm/web, made by sh scripts/wasm.sh.) Exits 77, CTest's
// skip, when WEB_DIR has no module or no model exists, saying why.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(import.meta.url);
const [webDir, cli, ...models] = process.argv.slice(2);
const N_PREDICT = 24;
const PROMPTS = { stories260K: 'Once upon a time, there was a', default: 'The capital of France is' };

function skip(why) {
    console.log('SKIPPED: ' + why);
    process.exit(77);
}
if (!webDir || !cli || !models.length) {
    console.error('usage: node node_check.mjs WEB_DIR INFER_CLI MODEL [MODEL...]');
    process.exit(2);
}
for (const f of ['infer_web.js', 'infer_web_st.js', 'infer_engine.js'])
    if (!fs.existsSync(path.join(webDir, f))) skip(`${webDir}/${f} is missing (sh scripts/wasm.sh builds the module)`);
if (!fs.existsSync(cli)) skip(`${cli}, the native CLI to compare with, is absent (build it: cmake --build build --target infer_cli)`);
const present = models.filter((m) => fs.existsSync(m));
for (const m of models) if (!present.includes(m)) console.log(`${m}: absent, left out`);
if (!present.length) skip('none of the models is here (../shared/models, models/)');

const { InferEngine } = require(path.resolve(webDir, 'infer_engine.js'));

function nativeTokens(model, prompt, isa) {
    const env = { ...process.env };
    if (isa) env.INFER_ISA = isa; else delete env.INFER_ISA;
    const out = execFileSync(cli, ['run', '-m', model, '-p', prompt, '-n', String(N_PREDICT), '--temp', '0', '--json',
        '-t', '1'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env });
    return JSON.parse(out).tokens;
}

async function startModule(name, threads) {
    // Emscripten 3.1.6 would fetch() the .wasm by its file name under
    // Node 18+, which fails: its bytes are handed over instead
    const factory = require(path.resolve(webDir, name + '.js'));
    const wasmBinary = fs.readFileSync(path.join(webDir, name + '.wasm'));
    return { engine: await InferEngine.create(factory, { wasmBinary }), threads };
}

let failures = 0;
function check(ok, what) {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
    if (!ok) failures++;
}

const builds = [await startModule('infer_web_st', 1), await startModule('infer_web', 2)];
for (const model of present) {
    const base = path.basename(model, '.gguf');
    const prompt = PROMPTS[base] || PROMPTS.default;
    const want = nativeTokens(model, prompt, 'scalar');
    const fast = nativeTokens(model, prompt, null);
    const agree = fast.findIndex((t, i) => t !== want[i]);
    console.log(`info ${base}: native default kernels' greedy tokens ` +
        (agree < 0 ? `equal the plain C ones' (${fast.length})` : `leave the plain C ones' at token ${agree}`));
    const bytes = fs.readFileSync(model);
    for (const { engine, threads } of builds) {
        const label = `${base}, ${threads} thread(s)`;
        const described = engine.load(bytes, { nCtx: 512, threads });
        check(/kernels wasm/.test(described), `${label}: SIMD128 kernels (${described})`);
        const t0 = performance.now();
        const r = await engine.complete(prompt, { nPredict: N_PREDICT, temperature: 0 });
        const ms = performance.now() - t0;
        // a reply that ends at end of generation lists that token too; the
        // CLI's does not always: compare what both have
        const got = r.tokens.slice(0, want.length);
        check(got.length === want.length && got.every((t, i) => t === want[i]) && r.tokens.length >= want.length,
            `${label}: ${r.tokens.length} greedy tokens as native plain C's ${want.length} ` +
            `(${(r.tokens.length * 1000 / ms).toFixed(1)} tokens/s in all)` +
            (got.every((t, i) => t === want[i]) ? '' : `\n     wasm   ${r.tokens.join(' ')}\n     native ${want.join(' ')}`));
        check(!r.cancelled && r.text.length > 0, `${label}: text ${JSON.stringify(r.text.slice(0, 60))}`);
        // a cancel from the token callback stops the reply at once
        let pieces = 0;
        const c = await engine.complete(prompt, { nPredict: N_PREDICT, temperature: 0,
            onToken: () => { if (++pieces === 3) engine.cancel(); } });
        check(c.cancelled && c.tokens.length < N_PREDICT, `${label}: cancelled after ${c.tokens.length} tokens`);
        engine.free();
    }
}
// bad input: one clear error, and the engine still works
try {
    builds[0].engine.load(new Uint8Array([71, 71, 85, 70, 9, 9, 9, 9]));
    check(false, 'a truncated GGUF was refused');
} catch (e) {
    check(/load:/.test(e.message) && !/\n/.test(e.message), `a truncated GGUF was refused: ${e.message}`);
}
console.log(failures ? `${failures} check(s) failed` : 'node_check: all passed');
process.exit(failures ? 1 : 0);
