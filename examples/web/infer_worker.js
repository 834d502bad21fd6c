/* infer_worker.js - the Web Worker the model runs in (infer.js starts it),
   so that loading and generating never hold up the page. Messages in:
   { id, type, ... } with type init, load, complete, chat, cancel, bench,
   metrics, free; out: { id, type: 'token', piece } while a reply streams,
   then { id, result } or { id, error }. */
'use strict';
importScripts('infer_engine.js');

let engine = null;

async function init(m) {
    // threads need SharedArrayBuffer, which only a cross-origin isolated
    // page (COOP/COEP headers) has; else the one-thread module
    const threaded = m.threads > 1 && self.crossOriginIsolated === true;
    const script = threaded ? 'infer_web.js' : 'infer_web_st.js';
    importScripts(script);
    // the threaded module's own workers load it by this address
    const args = threaded ? { mainScriptUrlOrBlob: new URL(script, self.location.href).href } : {};
    engine = await InferEngine.create(self.createInferModule, args);
    return { threads: threaded ? m.threads : 1, module: script };
}

async function load(m) {
    let bytes;
    if (m.file) bytes = await m.file.arrayBuffer();
    else if (m.buffer) bytes = m.buffer;
    else {
        const r = await fetch(m.url);
        if (!r.ok) throw new Error('load: ' + m.url + ': HTTP ' + r.status);
        bytes = await r.arrayBuffer();
    }
    const described = engine.load(bytes, { nCtx: m.nCtx, threads: m.threads });
    return { described, memoryBytes: engine.memoryBytes() };
}

self.onmessage = async (e) => {
    const m = e.data;
    const onToken = (piece) => self.postMessage({ id: m.id, type: 'token', piece });
    try {
        let result = null;
        if (m.type !== 'init' && !engine) throw new Error(m.type + ': the module is not started (init)');
        switch (m.type) {
        case 'init': result = await init(m); break;
        case 'load': result = await load(m); break;
        case 'complete': result = await engine.complete(m.prompt, { ...m.options, onToken }); break;
        case 'chat': result = await engine.chat(m.messages, { ...m.options, onToken }); break;
        case 'cancel': engine.cancel(); break;
        case 'bench': result = engine.bench(m.nPrompt, m.nGen); break;
        case 'metrics': result = engine.metrics(); break;
        case 'free': engine.free(); break;
        default: throw new Error('unknown request ' + m.type);
        }
        self.postMessage({ id: m.id, result });
    } catch (err) {
        self.postMessage({ id: m.id, error: String((err && err.message) || err) });
    }
};
