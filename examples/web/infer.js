/* infer.js - infer.h in a web page: the model runs in a Web Worker
   (infer_worker.js), this is the page's side. Plain script, no build step:

     <script src="infer.js"></script>
     const llm = await Infer.create({ threads: 4 });     // 1: no threads
     await llm.load(fileInput.files[0]);                  // or a same-origin URL, or an ArrayBuffer
     const r = await llm.complete('Once upon a time', { nPredict: 64, onToken: (t) => out.textContent += t });
     const c = await llm.chat([{ role: 'user', content: 'Hi!' }], { jsonSchema: '{"type":"object"}' });
     llm.cancel();                                        // the reply in progress ends, cancelled: true
     await llm.free();  llm.terminate();

   Every method returns a Promise; failures reject with the library's
   one-line message. Threads need a cross-origin isolated page (served
   with Cross-Origin-Opener-Policy: same-origin and
   Cross-Origin-Embedder-Policy: require-corp); elsewhere the one-thread
   module is used whatever threads says (see threads on the result of
   create()). */
(function (root) {
    'use strict';

    class Infer {
        /* options: threads (kernel threads, default the CPU's cores, at most
           4), base (the URL of the folder holding the module files, default
           this page's). */
        static async create(options = {}) {
            const base = options.base || '';
            const cores = (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 1;
            const llm = new Infer(new Worker(base + 'infer_worker.js'));
            const started = await llm.request({ type: 'init', threads: options.threads || Math.min(cores, 4) });
            llm.threads = started.threads;
            llm.moduleName = started.module;
            return llm;
        }

        constructor(worker) {
            this.worker = worker;
            this.nextId = 1;
            this.pending = new Map();
            this.threads = 1;
            worker.onmessage = (e) => {
                const m = e.data, p = this.pending.get(m.id);
                if (!p) return;
                if (m.type === 'token') {
                    if (p.onToken) p.onToken(m.piece);
                    return;
                }
                this.pending.delete(m.id);
                if (m.error !== undefined) p.reject(new Error(m.error));
                else p.resolve(m.result);
            };
            worker.onerror = (e) => {
                const why = new Error('the worker failed: ' + (e.message || 'unknown error'));
                for (const p of this.pending.values()) p.reject(why);
                this.pending.clear();
            };
        }

        request(message, onToken) {
            const id = this.nextId++;
            return new Promise((resolve, reject) => {
                this.pending.set(id, { resolve, reject, onToken });
                this.worker.postMessage({ ...message, id });
            });
        }

        /* source: a File or Blob (file input), an ArrayBuffer, or a URL
           fetched by the worker. options: nCtx (default 2048). Resolves to
           { described, memoryBytes }. */
        load(source, options = {}) {
            const m = { type: 'load', nCtx: options.nCtx || 2048, threads: this.threads };
            if (typeof source === 'string') m.url = new URL(source, location.href).href;
            else if (source instanceof ArrayBuffer) m.buffer = source;
            else m.file = source;
            return this.request(m);
        }

        /* options: nPredict, temperature (0: greedy), seed, grammar (GBNF),
           jsonSchema (text), onToken(piece). Resolves to { text, tokens,
           cancelled, metrics: { promptTps, genTps, genTokens, memoryBytes, ... } }. */
        complete(prompt, options = {}) {
            const { onToken, ...rest } = options;
            return this.request({ type: 'complete', prompt, options: rest }, onToken);
        }

        /* messages: [{ role, content }], written by the model's chat template. */
        chat(messages, options = {}) {
            const { onToken, ...rest } = options;
            return this.request({ type: 'chat', messages, options: rest }, onToken);
        }

        cancel() {
            return this.request({ type: 'cancel' });
        }
        metrics() {
            return this.request({ type: 'metrics' });
        }
        /* tokens/s: nPrompt tokens in one batch, or (nPrompt 0) nGen one at a time */
        bench(nPrompt, nGen) {
            return this.request({ type: 'bench', nPrompt, nGen });
        }
        free() {
            return this.request({ type: 'free' });
        }
        terminate() {
            this.worker.terminate();
        }
    }

    root.Infer = Infer;
})(typeof window !== 'undefined' ? window : self);
