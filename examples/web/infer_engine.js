/* infer_engine.js - the JavaScript API of the WebAssembly module, where the
   module runs: in a Web Worker (infer_worker.js loads it there for the
   page) or in Node.js (require it). Wraps infer_web.c's exports:

     const engine = await InferEngine.create(createInferModule);
     engine.load(ggufBytes, { nCtx: 2048, threads: 2 });
     const r = await engine.complete("Once upon a time", {
         nPredict: 64, temperature: 0, onToken: (piece) => ... });
     // r: { text, tokens, cancelled, metrics }
     engine.cancel();  // from a callback or another event: stops the reply
     engine.free();

   A reply is made a forward pass at a time (or more: stepMs), the event
   loop getting a turn in between, so a cancel (a worker's message) is
   seen mid-reply. */
(function (root) {
    'use strict';

    // A turn of the event loop without setTimeout's clamping to 4 ms
    // (which would cap generation near 250 tokens/s).
    let yieldToEventLoop;
    if (typeof setImmediate === 'function') {
        yieldToEventLoop = () => new Promise((resolve) => setImmediate(resolve));
    } else {
        const channel = new MessageChannel();
        const waiting = [];
        channel.port1.onmessage = () => waiting.shift()();
        yieldToEventLoop = () => new Promise((resolve) => {
            waiting.push(resolve);
            channel.port2.postMessage(0);
        });
    }

    class InferEngine {
        /* factory: createInferModule from infer_web.js (threads) or
           infer_web_st.js (one thread); moduleArgs go to it. */
        static async create(factory, moduleArgs) {
            return new InferEngine(await factory(moduleArgs || {}));
        }

        constructor(mod) {
            this.mod = mod;
            this.session = 0;
            this.running = false;
            this.cancelRequested = false;
        }

        // the module's memory as it is now (it grows, maybe on another thread)
        memory() {
            const m = this.mod.wasmMemory || (this.mod.asm && this.mod.asm.memory);
            return m ? m.buffer : this.mod.HEAPU8.buffer;
        }
        /* Bytes of memory the module holds (weights, cache, scratch). */
        memoryBytes() {
            return this.memory().byteLength;
        }

        error() {
            return this.mod.UTF8ToString(this.mod._iw_error());
        }
        string(s) {
            const n = this.mod.lengthBytesUTF8(s) + 1;
            const p = this.mod._iw_alloc(n);
            if (!p) throw new Error('out of memory');
            this.mod.stringToUTF8(s, p, n);
            return p;
        }
        need(what) {
            if (!this.session) throw new Error(what + ': no model loaded');
        }

        /* Loads a GGUF from its bytes (ArrayBuffer or Uint8Array). nCtx:
           positions of cache (0: the model's, at most 4096); threads: kernel
           threads (only the threaded module has more than 1). Returns a line
           describing the model. Throws with the library's message. */
        load(bytes, { nCtx = 2048, threads = 1 } = {}) {
            if (this.running) throw new Error('load: a reply is being generated');
            if (this.session) this.free();
            const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
            const p = this.mod._iw_alloc(data.byteLength) >>> 0;
            if (!p) throw new Error('load: out of memory for ' + data.byteLength + ' bytes (wasm32 stops at 4 GiB)');
            new Uint8Array(this.memory(), p, data.byteLength).set(data);
            this.session = this.mod._iw_load(p, data.byteLength, nCtx, threads); // owns p from here
            if (!this.session) throw new Error(this.error());
            return this.describe();
        }

        describe() {
            this.need('describe');
            return this.mod.UTF8ToString(this.mod._iw_describe(this.session));
        }

        /* Generates a reply to prompt (the model's special tokens parsed).
           Options: nPredict (256), temperature (0: greedy), seed, grammar
           (GBNF) or jsonSchema (a JSON schema's text), onToken(piece) with
           each new piece of text, stepMs: how long the model runs before
           the event loop gets a turn (0, the default: one forward pass,
           so a token a piece and a cancel seen within a token). Resolves to { text, tokens, cancelled,
           metrics }; rejects with the library's message. */
        async complete(prompt, opts = {}) {
            const { nPredict = 256, temperature = 0, seed = 0, grammar = '', jsonSchema = '', onToken = null, stepMs = 0 } = opts;
            this.need('complete');
            if (this.running) throw new Error('complete: a reply is already being generated');
            const args = [this.string(prompt), this.string(grammar), this.string(jsonSchema)];
            const ok = this.mod._iw_start(this.session, args[0], nPredict, temperature, seed, args[1], args[2]);
            args.forEach((p) => this.mod._iw_dealloc(p));
            if (!ok) throw new Error(this.error());
            this.running = true;
            this.cancelRequested = false;
            let text = '';
            try {
                for (;;) {
                    if (this.cancelRequested) this.mod._iw_cancel(this.session);
                    const more = this.mod._iw_step(this.session, stepMs);
                    const piece = this.mod.UTF8ToString(this.mod._iw_text(this.session));
                    if (piece) {
                        text += piece;
                        if (onToken) onToken(piece);
                    }
                    if (!more) break;
                    await yieldToEventLoop();
                }
            } finally {
                this.running = false;
            }
            const status = this.mod._iw_status(this.session);
            if (status === 2) throw new Error(this.error());
            return { text, tokens: this.tokens(), cancelled: status === 1, metrics: this.metrics() };
        }

        /* complete() on a conversation, written by the model's chat
           template: messages is [{ role: 'system'|'user'|'assistant',
           content }], the assistant's reply comes next. */
        async chat(messages, opts = {}) {
            this.need('chat');
            const records = messages.map((m) => String(m.role) + '\x1f' + String(m.content)).join('\x1e');
            const p = this.string(records);
            const prompt = this.mod._iw_chat_prompt(this.session, p);
            this.mod._iw_dealloc(p);
            if (!prompt) throw new Error(this.error());
            return this.complete(this.mod.UTF8ToString(prompt), opts);
        }

        /* Stops the reply being generated (it resolves with cancelled: true). */
        cancel() {
            if (this.running) this.cancelRequested = true;
        }

        /* The last reply's token ids. */
        tokens(max = 4096) {
            if (!this.session) return [];
            const p = this.mod._iw_alloc(4 * max) >>> 0;
            const n = Math.min(this.mod._iw_tokens(this.session, p, max), max);
            const ids = Array.from(new Int32Array(this.memory(), p, n));
            this.mod._iw_dealloc(p);
            return ids;
        }

        /* The last reply's figures, and memory. */
        metrics() {
            if (!this.session) return null;
            const p = this.mod._iw_metrics(this.session) >>> 0;
            const m = new Float64Array(this.memory(), p, 6);
            return {
                promptTokens: m[0], promptTps: m[1], genTokens: m[2], genTps: m[3],
                modelBytes: m[4], contextBytes: m[5], memoryBytes: this.memoryBytes(),
            };
        }

        /* infer bench's figures: tokens/s of nPrompt tokens in one batch
           (pp), or with nPrompt 0 of nGen tokens one at a time (tg). */
        bench(nPrompt, nGen) {
            this.need('bench');
            const tps = this.mod._iw_bench(this.session, nPrompt, nGen);
            if (tps < 0) throw new Error(this.error());
            return tps;
        }

        /* Frees the model and its context; the engine can load another. */
        free() {
            if (this.running) throw new Error('free: a reply is being generated (cancel it first)');
            if (this.session) this.mod._iw_free(this.session);
            this.session = 0;
        }
    }

    if (typeof module !== 'undefined' && module.exports) module.exports = { InferEngine };
    else root.InferEngine = InferEngine;
})(typeof self !== 'undefined' ? self : this);
