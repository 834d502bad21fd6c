"""The Pythonic surface over _native: Model, Context, Stream, ChatTemplate."""

import codecs
import ctypes
import enum
import json
import os
import threading
import weakref

from . import _native
from ._native import (ChatMessage, ChatTemplateStruct, ContextParams, Error, Metrics, ModelParams,
                      PIECE_FN, PROGRESS_FN, RequestParams, SamplerParams, c_token)


class Status(enum.IntEnum):
    """infer_status."""
    OK = 0
    IO = 1
    FORMAT = 2
    UNSUPPORTED = 3
    NOMEM = 4
    ARG = 5
    CONTEXT_FULL = 6
    DEVICE = 7
    CANCELLED = 8


class InferError(Exception):
    """An error the library reported: str(e) is infer_error's one-line
    message, e.code its Status. e.text is the text generated before a
    generation failed (None elsewhere)."""

    def __init__(self, message, code=Status.ARG, text=None):
        super().__init__(message)
        self.message = message
        try:
            self.code = Status(code)
        except ValueError:  # a newer library's status: kept as the number
            self.code = code
        self.text = text

    @classmethod
    def _from(cls, err, text=None):
        return cls(err.msg.decode("utf-8", "replace"), err.code, text)


def _b(s):
    """str (UTF-8), bytes or None, as the bytes C takes."""
    if s is None or isinstance(s, bytes):
        return s
    if isinstance(s, str):
        return s.encode("utf-8")
    raise TypeError("expected str or bytes, not %s" % type(s).__name__)


def _snprintf(call, guess=4096):
    """Runs an snprintf-style C call (buf, size, &n_out, &err) -> status
    until the buffer holds it all; raises InferError where it fails."""
    size = max(guess, 64)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = ctypes.c_size_t(0)
        err = Error()
        if call(buf, size, ctypes.byref(n), ctypes.byref(err)) != 0:
            raise InferError._from(err)
        if n.value < size:
            return buf.raw[:n.value]
        size = n.value + 1


def _decoder():
    # Pieces may end inside a UTF-8 character (and synthetic models write
    # invalid bytes): an incremental decoder gives, over all pieces, exactly
    # what decoding the whole text at once would.
    return codecs.getincrementaldecoder("utf-8")("replace")


_DEVICES = {"cpu": 0, "cuda": 1, "auto": 2}
_ROPE = {"file": 0, "none": 1, "linear": 2, "yarn": 3}
_KV_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}
_FULL = {"stop": 0, "shift": 1}
_POOLING = {"mean": 0, "last": 1, "first": 2}


def _choice(table, value, what):
    try:
        return table[value]
    except KeyError:
        raise ValueError("%s must be one of %s, not %r" % (what, ", ".join(table), value)) from None


def json_schema_to_grammar(schema):
    """A JSON schema (a dict, or its JSON text) as a GBNF grammar
    (infer_json_schema_to_grammar). Raises InferError for one it cannot read."""
    lib = _native.lib()
    text = _b(schema if isinstance(schema, (str, bytes)) else json.dumps(schema))
    out = _snprintf(lambda buf, size, n, err: lib.infer_json_schema_to_grammar(text, buf, size, n, err))
    return out.decode("utf-8")


def version():
    """The library's version, INFER_VERSION as it was compiled ("0.25.0")."""
    return _native.lib().infer_version().decode()


def abi_version():
    """infer_abi_version() of the loaded library (checked at load to equal
    the binding's ABI_VERSION)."""
    return _native.lib().infer_abi_version()


def library_path():
    """Where the library was loaded from."""
    return _native.library_path()


# ---- sampling ----------------------------------------------------------------

def _sampler_params(lib, temperature=None, top_k=None, top_p=None, min_p=None, repeat_penalty=None,
                    repeat_last_n=None, seed=None):
    """infer_sampler_params: the library's defaults, then what was given."""
    p = SamplerParams()
    lib.infer_sampler_params_init(ctypes.byref(p))
    for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                        ("repeat_penalty", repeat_penalty), ("repeat_last_n", repeat_last_n), ("seed", seed)):
        if value is not None:
            setattr(p, name, value)
    return p


def _grammar_text(grammar, json_schema):
    if grammar is not None and json_schema is not None:
        raise ValueError("give grammar or json_schema, not both")
    if json_schema is not None:
        return json_schema_to_grammar(json_schema)
    return grammar


# ---- chat templates ------------------------------------------------------------

def _messages(messages):
    """Messages as dicts {"role", "content"}, (role, content) pairs or objects
    with those attributes: the C array and the bytes it points to (which
    must stay alive while it is used)."""
    keep = []
    arr = (ChatMessage * max(len(messages), 1))()
    for i, m in enumerate(messages):
        if isinstance(m, dict):
            role, content = m.get("role"), m.get("content")
        elif isinstance(m, (tuple, list)) and len(m) == 2:
            role, content = m
        else:
            role, content = getattr(m, "role", None), getattr(m, "content", None)
        if role is None:
            raise ValueError("message %d has no role" % i)
        r, c = _b(role), _b(content if content is not None else "")
        keep += [r, c]
        arr[i].role, arr[i].content = r, c
    return arr, keep


class ChatTemplate:
    """A conversation format infer.h writes (infer_chat_template), as
    detected from a model's tokenizer.chat_template or made from a
    template's text or a format's name."""

    def __init__(self, _struct):
        self._t = _struct

    @classmethod
    def from_text(cls, text, bos=None, eos=None):
        """From a Jinja template's text or a format's name ("chatml",
        "llama3", ...); bos/eos default to "<s>" and "</s>"."""
        lib = _native.lib()
        t = ChatTemplateStruct()
        lib.infer_chat_template_from_text_into(_b(text), _b(bos), _b(eos), ctypes.byref(t))
        return cls(t)

    @property
    def name(self):
        return _native.lib().infer_chat_template_name(self._t.kind).decode()

    @property
    def fallback(self):
        """True where the model has no template or one not recognized (ChatML is used)."""
        return bool(self._t.fallback)

    @property
    def bos(self):
        return self._t.bos.decode("utf-8", "replace")

    @property
    def eos(self):
        return self._t.eos.decode("utf-8", "replace")

    def _set_text(self, field, value, size):
        b = _b(value)
        if len(b) >= size:
            raise ValueError("%s is longer than the %d bytes infer_chat_template holds" % (field, size - 1))
        setattr(self._t, field, b)

    @property
    def default_system(self):
        return self._t.default_system.decode("utf-8", "replace")

    @default_system.setter
    def default_system(self, value):
        self._set_text("default_system", value, 256)

    @property
    def date(self):
        return self._t.date.decode("utf-8", "replace")

    @date.setter
    def date(self, value):
        self._set_text("date", value, 32)

    @property
    def no_think(self):
        return bool(self._t.no_think)

    @no_think.setter
    def no_think(self, value):
        self._t.no_think = int(bool(value))

    def format(self, messages, add_assistant_prompt=True, start=0):
        """messages[start:] of the conversation as this format writes them
        (infer_chat_format), then with add_assistant_prompt the text that
        opens the assistant's reply. Tokenize with special=True."""
        lib = _native.lib()
        arr, keep = _messages(messages)
        n = len(messages)
        guess = 1024 + 2 * sum(len(k) for k in keep)
        out = _snprintf(lambda buf, size, n_out, err: lib.infer_chat_format(
            ctypes.byref(self._t), arr, n, start, int(bool(add_assistant_prompt)), buf, size, n_out, err), guess)
        return out.decode("utf-8", "replace")

    @property
    def end_of_turn(self):
        """The text that closes an assistant turn (infer_chat_end_of_turn)."""
        lib = _native.lib()
        out = _snprintf(lambda buf, size, n, err: lib.infer_chat_end_of_turn(ctypes.byref(self._t), buf, size, n, err),
                        64)
        return out.decode("utf-8", "replace")

    def __repr__(self):
        return "ChatTemplate(%r%s)" % (self.name, ", fallback" if self.fallback else "")


# ---- model ----------------------------------------------------------------------

class Model:
    """A loaded GGUF model (infer_model_load). Read-only once loaded: any
    number of Contexts may share it. close() (or leaving a with block)
    frees it once no Context uses it any more; a Context keeps its model's
    weights alive until it is closed itself."""

    _handle = None  # class defaults: __del__ runs even when __init__ failed
    _n_users = 0
    _closed = True
    _lock = None

    def __init__(self, path, *, vocab_only=False, device="auto", rope_scaling=None, rope_scale=None,
                 progress=None):
        """progress(fraction) is called while loading; returning True cancels
        the load. An exception it raises cancels the load too and is
        raised here."""
        lib = _native.lib()
        self._lib = lib
        self._free_fn = lib.infer_model_free  # held: module globals may be gone when __del__ runs
        self._lock = threading.Lock()
        self.path = os.fspath(path)
        p = ModelParams()
        lib.infer_model_params_init(ctypes.byref(p))
        p.vocab_only = int(bool(vocab_only))
        p.device = _choice(_DEVICES, device, "device")
        if rope_scaling is not None:
            p.rope_scaling = _choice(_ROPE, rope_scaling, "rope_scaling")
        if rope_scale is not None:
            p.rope_scale = rope_scale
        caught = []
        if progress is not None:
            def on_progress(fraction, _user):
                try:
                    return 1 if progress(fraction) else 0
                except BaseException as e:  # never let it unwind through C
                    caught.append(e)
                    return 1
            callback = PROGRESS_FN(on_progress)  # lives until the load returns
            p.progress = callback
        err = Error()
        handle = lib.infer_model_load(os.fsencode(self.path), ctypes.byref(p), ctypes.byref(err))
        if caught:
            if handle:
                lib.infer_model_free(handle)
            raise caught[0]
        if not handle:
            raise InferError._from(err)
        self._handle = handle
        self._closed = False

    # lifetime

    def _h(self):
        if self._closed:
            raise ValueError("the Model is closed")
        return self._handle

    def _acquire(self):
        with self._lock:
            h = self._h()
            self._n_users += 1
            return h

    def _release(self):
        with self._lock:
            self._n_users -= 1
        self._free_if_unused()

    def _free_if_unused(self):
        with self._lock:
            if not self._closed or self._n_users or not self._handle:
                return
            handle, self._handle = self._handle, None
        self._free_fn(handle)

    def close(self):
        """No further use of this object; the C model is freed now, or when
        the last Context made from it is closed."""
        if self._lock is None:
            return
        with self._lock:
            self._closed = True
        self._free_if_unused()

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        self._h()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # facts

    @property
    def n_vocab(self):
        return self._lib.infer_model_n_vocab(self._h())

    @property
    def n_embd(self):
        """Length of an embedding (the hidden size)."""
        return self._lib.infer_model_n_embd(self._h())

    @property
    def n_ctx_train(self):
        return self._lib.infer_model_n_ctx_train(self._h())

    @property
    def bos(self):
        """The BOS token's id, or None."""
        t = self._lib.infer_model_bos(self._h())
        return None if t < 0 else t

    @property
    def eos(self):
        t = self._lib.infer_model_eos(self._h())
        return None if t < 0 else t

    @property
    def add_bos(self):
        return bool(self._lib.infer_model_add_bos(self._h()))

    @property
    def device(self):
        """Where the forward pass runs: "cpu" or "cuda"."""
        lib = self._lib
        return lib.infer_device_name(lib.infer_model_device(self._h())).decode()

    @property
    def description(self):
        """One line: architecture, dims, layers, heads, vocab."""
        h = self._h()
        return _snprintf(lambda buf, size, n, err: self._lib.infer_model_describe(h, buf, size, n, err),
                         256).decode("utf-8", "replace")

    @property
    def warning(self):
        """infer_model_warning's line, or None."""
        w = self._lib.infer_model_warning(self._h())
        return None if w is None else w.decode("utf-8", "replace")

    def is_eog(self, token):
        return bool(self._lib.infer_model_is_eog(self._h(), token))

    # tokenizer

    def tokenize(self, text, add_bos=None, special=False):
        """Token ids of text (str or bytes). add_bos None: as the model asks.
        special: text like "<|im_end|>" becomes its special token."""
        h = self._h()
        data = _b(text)
        if add_bos is None:
            add_bos = self.add_bos
        size = len(data) + 8
        err = Error()
        n = ctypes.c_int()
        while True:
            out = (c_token * size)()
            st = self._lib.infer_tokenize(h, data, len(data), out, size, int(bool(add_bos)), int(bool(special)),
                                          ctypes.byref(n), ctypes.byref(err))
            if st != 0:
                raise InferError._from(err)
            if n.value <= size:
                return list(out[:n.value])
            size = n.value

    def token_bytes(self, token):
        """The bytes of one token's text (infer_token_to_piece)."""
        h = self._h()
        return _snprintf(lambda buf, size, n, err: self._lib.infer_token_to_piece(h, token, buf, size, n, err), 64)

    def detokenize(self, tokens):
        """The text of tokens, their pieces put together (invalid UTF-8
        replaced by U+FFFD)."""
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", "replace")

    # chat

    @property
    def chat_template(self):
        """The model's conversation format (infer_chat_template_detect); a
        fresh copy each time, which may be changed and passed to chat()."""
        t = ChatTemplateStruct()
        self._lib.infer_chat_template_detect_into(self._h(), ctypes.byref(t))
        return ChatTemplate(t)

    @property
    def chat_template_text(self):
        """The model's Jinja chat template (tokenizer.chat_template), or None."""
        err = Error()
        p = self._lib.infer_model_chat_template_text(self._h(), None, 0, None, 0, ctypes.byref(err))
        if not p:
            if err.code != Status.OK:
                raise InferError._from(err)
            return None
        try:
            return ctypes.string_at(p).decode("utf-8", "replace")
        finally:
            self._lib.infer_free(p)  # the library's allocator, not Python's

    def format_chat(self, messages, add_assistant_prompt=True):
        """The conversation as the model's template writes it."""
        return self.chat_template.format(messages, add_assistant_prompt)

    def context(self, **kwargs):
        """Context(self, **kwargs)."""
        return Context(self, **kwargs)

    def __repr__(self):
        return "<infer.Model %r%s>" % (self.path, " closed" if self._closed else "")


# ---- context ----------------------------------------------------------------------

class Context:
    """A KV cache and scratch for a model (infer_context_new). One call at a
    time: a second call while one runs (from another thread, from inside
    its own callback, or while a Stream of it is open) raises RuntimeError
    instead of corrupting it. Holds its Model alive until closed."""

    _handle = None
    _model = None

    def __init__(self, model, *, n_ctx=0, n_batch=0, n_threads=None, n_seq=1, kv_type=None,
                 full_policy="stop", n_keep=0, match_llama=None):
        """n_ctx 0: min(model's, 4096); n_threads None: the library's default
        (1); kv_type "f16" (default), "q8_0" or "q4_0"; full_policy "stop"
        (InferError CONTEXT_FULL) or "shift"; match_llama None: decided by
        the model, True/False: always/never."""
        if not isinstance(model, Model):
            raise TypeError("Context needs a Model")
        lib = model._lib
        self._lib = lib
        self._free_fn = lib.infer_context_free
        self._busy = threading.Lock()
        self._stream = None  # weak reference to the open Stream
        # its request: owned here, so that close() can free it even where
        # the Stream is already unreachable (collected in the same cycle)
        self._active_req = None
        p = ContextParams()
        lib.infer_context_params_init(ctypes.byref(p))
        p.n_ctx, p.n_batch, p.n_seq, p.n_keep = n_ctx, n_batch, n_seq, n_keep
        p.n_threads = 0 if n_threads is None else n_threads
        if kv_type is not None:
            p.kv_type = _choice(_KV_TYPES, kv_type, "kv_type")
        p.full_policy = _choice(_FULL, full_policy, "full_policy")
        if match_llama is not None:
            p.match_llama = 1 if match_llama else -1
        self._n_threads = p.n_threads or 1  # the library has no getter; 0 means 1
        mh = model._acquire()
        err = Error()
        handle = lib.infer_context_new(mh, ctypes.byref(p), ctypes.byref(err))
        if not handle:
            model._release()
            raise InferError._from(err)
        self._model = model
        self._handle = handle

    # lifetime

    def _h(self):
        if not self._handle:
            raise ValueError("the Context is closed")
        return self._handle

    def _enter(self):
        h = self._h()
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("this Context is in use (an open Stream, another thread, or its own callback); "
                               "it serves one call at a time")
        return h

    def _leave(self):
        self._busy.release()

    def close(self):
        """Frees the C context (closing an open Stream first), then lets the
        model go."""
        stream = self._stream() if self._stream is not None else None
        if stream is not None:
            stream.close()
        if self._active_req:  # a request must go before its context
            req, self._active_req = self._active_req, None
            self._lib.infer_request_free(req)
            self._stream = None
            self._leave()
        if not self._handle:
            return
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("cannot close a Context while a call on it is running")
        handle, self._handle = self._handle, None
        self._busy.release()
        self._free_fn(handle)
        model, self._model = self._model, None
        model._release()

    @property
    def closed(self):
        return not self._handle

    def __enter__(self):
        self._h()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # facts

    @property
    def model(self):
        return self._model

    @property
    def n_ctx(self):
        return self._lib.infer_context_n_ctx(self._h())

    @property
    def n_seq(self):
        return self._lib.infer_context_n_seq(self._h())

    @property
    def n_threads(self):
        """The kernel threads asked for (1 where the library's default was taken)."""
        return self._n_threads

    @property
    def n_past(self):
        """Positions sequence 0 holds."""
        return self._lib.infer_seq_n_past(self._h(), 0)

    @property
    def isa(self):
        """The CPU kernels used: scalar, avx2, avx512, neon or wasm."""
        return self._lib.infer_context_isa(self._h()).decode()

    def metrics(self):
        """infer_context_metrics as a dict."""
        m = Metrics()
        self._lib.infer_context_metrics_into(self._h(), ctypes.byref(m))
        return {name: getattr(m, name) for name, _ in Metrics._fields_}

    def reset(self):
        """Forgets sequence 0 (its cache and tokens)."""
        h = self._enter()
        try:
            self._lib.infer_seq_truncate(h, 0, 0, None, None)
        finally:
            self._leave()

    def _tokens(self, fn):
        n = ctypes.c_int(0)
        p = fn(self._h(), ctypes.byref(n))
        return list(p[:n.value]) if p and n.value > 0 else []

    def prompt_tokens(self):
        """The prompt's ids the last generate() read (BOS included)."""
        return self._tokens(self._lib.infer_context_prompt_tokens)

    def generated_tokens(self):
        """The ids the last generate() wrote (an end-of-generation token included)."""
        return self._tokens(self._lib.infer_context_generated_tokens)

    # generation

    def generate(self, prompt, n_predict=128, *, temperature=None, top_k=None, top_p=None, min_p=None,
                 repeat_penalty=None, repeat_last_n=None, seed=None, grammar=None, json_schema=None,
                 on_piece=None, reset=True):
        """The text generated after prompt (infer_generate): up to n_predict
        tokens, ending at end of generation. Sampling options left None take
        the library's defaults (temperature 0.8, top_k 40, top_p 0.95, min_p
        0.05, seed 42); temperature 0 is greedy. grammar: GBNF text (root
        rule "root"); json_schema: a dict or its JSON text. on_piece(text) is
        called with each piece as it is generated; returning True stops
        generation, and an exception it raises stops it and is raised here.
        reset: start from an empty sequence 0 (else continue after what it
        holds). The prompt is tokenized with special tokens parsed."""
        lib = self._lib
        h = self._enter()
        sampler = None
        try:
            gbnf = _grammar_text(grammar, json_schema)
            sp = _sampler_params(lib, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed)
            mh = self._model._handle  # alive while this context is (even after Model.close())
            err = Error()
            sampler = lib.infer_sampler_new(ctypes.byref(sp), lib.infer_model_n_vocab(mh), ctypes.byref(err))
            if not sampler:
                raise InferError._from(err)
            if gbnf is not None:
                st = lib.infer_sampler_set_grammar(sampler, mh, _b(gbnf), None, ctypes.byref(err))
                if st != Status.OK:
                    raise InferError._from(err)
            decoder = _decoder()
            pieces = []
            caught = []

            def piece_cb(ptr, n, _user):
                try:
                    text = decoder.decode(ctypes.string_at(ptr, n)) if n > 0 else ""
                    if text:
                        pieces.append(text)
                        if on_piece is not None and on_piece(text):
                            return 1
                    return 0
                except BaseException as e:  # an exception must not unwind through C: stop, raise later
                    caught.append(e)
                    return 1

            callback = PIECE_FN(piece_cb)  # referenced until infer_generate returns
            if reset:
                lib.infer_seq_truncate(h, 0, 0, None, None)
            st = lib.infer_generate(h, sampler, _b(prompt), n_predict, callback, None, ctypes.byref(err))
            if caught:
                raise caught[0]
            tail = decoder.decode(b"", final=True)
            if tail:
                pieces.append(tail)
            text = "".join(pieces)
            if st != Status.OK:
                raise InferError._from(err, text)
            if tail and on_piece is not None:
                on_piece(tail)
            return text
        finally:
            if sampler:
                lib.infer_sampler_free(sampler)
            self._leave()

    def stream(self, prompt, n_predict=128, *, temperature=None, top_k=None, top_p=None, min_p=None,
               repeat_penalty=None, repeat_last_n=None, seed=None, grammar=None, json_schema=None, stop=None,
               reset=True, cache_prompt=False):
        """A Stream: an iterator over the pieces of the reply, one forward
        pass per step (the request API, infer_request_start and
        infer_context_step). Options as generate(); stop: strings that end
        the reply (not included). cache_prompt (with reset): keep the part
        of sequence 0's cache that the prompt starts with and feed only the
        rest; faster for a growing chat, but the prompt's last positions are
        then computed in another split of passes, which can turn a near-tie
        the other way: off by default, so a prompt always gives the same
        reply. The Context is busy until the Stream ends or is closed (break
        out of a for loop over it, then close() it, or use it in a with
        block)."""
        lib = self._lib
        h = self._enter()
        try:
            if grammar is not None and json_schema is not None:
                raise ValueError("give grammar or json_schema, not both")
            p = RequestParams()
            lib.infer_request_params_init(ctypes.byref(p))
            keep = [_b(prompt)]
            p.prompt = keep[0]
            p.n_predict = n_predict
            p.n_past = 0 if reset else -1
            p.cache_prompt = int(bool(cache_prompt))
            p.sampling = _sampler_params(lib, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
                                         seed)
            if grammar is not None:
                keep.append(_b(grammar))
                p.grammar = keep[-1]
            if json_schema is not None:
                keep.append(_b(json_schema if isinstance(json_schema, (str, bytes)) else json.dumps(json_schema)))
                p.json_schema = keep[-1]
            if stop:
                if isinstance(stop, (str, bytes)):
                    stop = [stop]
                arr = (ctypes.c_char_p * len(stop))(*[_b(s) for s in stop])
                keep.append(arr)
                p.stop = arr
                p.n_stop = len(stop)
            err = Error()
            r = lib.infer_request_start(h, ctypes.byref(p), ctypes.byref(err))  # copies all of p
            if not r:
                raise InferError._from(err)
        except BaseException:
            self._leave()
            raise
        self._active_req = r
        s = Stream(self, r)
        self._stream = weakref.ref(s)
        return s

    def chat(self, messages, n_predict=256, *, template=None, stream=False, **options):
        """The assistant's reply to a conversation (a list of {"role",
        "content"} dicts), written in the model's own format (or template,
        a ChatTemplate) with the assistant prompt. stream=True returns a
        Stream; other options as generate()."""
        tpl = template if template is not None else self._model.chat_template
        prompt = tpl.format(messages, add_assistant_prompt=True)
        if stream:
            return self.stream(prompt, n_predict, **options)
        return self.generate(prompt, n_predict, **options)

    # embeddings

    def embed(self, text, *, pooling="mean", normalize=True, seq=0):
        """The embedding of text (infer_embed): a list of n_embd floats, the
        final hidden states pooled ("mean", "last" or "first") and, with
        normalize, of unit length. Clears sequence seq before and after."""
        lib = self._lib
        pool = _choice(_POOLING, pooling, "pooling")
        h = self._enter()
        try:
            n = lib.infer_model_n_embd(self._model._handle)
            out = (ctypes.c_float * n)()
            err = Error()
            st = lib.infer_embed(h, seq, _b(text), pool, int(bool(normalize)), out, ctypes.byref(err))
            if st != Status.OK:
                raise InferError._from(err)
            return list(out)
        finally:
            self._leave()

    def __repr__(self):
        return "<infer.Context n_ctx=%s%s>" % (self.n_ctx if self._handle else "?",
                                                "" if self._handle else " closed")


class Stream:
    """The pieces of one reply as they are generated (from Context.stream or
    Context.chat(stream=True)). Iterate it; text and tokens say what came so
    far. A reply that ends in an error raises InferError from the iteration
    after its last piece. close() (or the end of a with block) cancels an
    unfinished reply and frees the Context for other calls."""

    _req = None

    def __init__(self, ctx, req):
        self._ctx = ctx
        self._lib = ctx._lib
        self._free_fn = self._lib.infer_request_free
        self._req = req
        self._pos = 0  # bytes of the request's text taken so far
        self._decoder = _decoder()
        self._pieces = []
        self._error = None
        self._done = False
        self._tokens = None
        self._cached = 0
        self._metrics = None

    def __iter__(self):
        return self

    def __next__(self):
        lib = self._lib
        while not self._done:
            r = self._req
            if r is None or r != self._ctx._active_req:  # closed, or its context closed
                self._done, self._req = True, None
                raise StopIteration
            lib.infer_context_step(self._ctx._handle, 0.0)  # one forward pass
            piece = self._take()
            if lib.infer_request_done(r):
                piece += self._decoder.decode(b"", final=True)
                err = Error()
                if lib.infer_request_status(r, ctypes.byref(err)) != Status.OK:
                    self._error = InferError._from(err)
                self._finish()
            if piece:
                self._pieces.append(piece)
                return piece
        if self._error is not None:
            e, self._error = self._error, None
            e.text = self.text
            raise e
        raise StopIteration

    def _take(self):
        lib, r = self._lib, self._req
        n = lib.infer_request_text(r, self._pos, None, 0)
        if not n:
            return ""
        buf = ctypes.create_string_buffer(n + 1)
        lib.infer_request_text(r, self._pos, buf, n + 1)
        self._pos += n
        return self._decoder.decode(buf.raw[:n])

    def _read_tokens(self, r):
        n = ctypes.c_int(0)
        self._lib.infer_request_tokens(r, None, 0, ctypes.byref(n), None)
        out = (c_token * max(n.value, 1))()
        got = ctypes.c_int(0)
        self._lib.infer_request_tokens(r, out, n.value, ctypes.byref(got), None)
        return list(out[:min(got.value, n.value)])

    def _finish(self):
        """Frees the request (cancelled if unfinished) and the Context."""
        self._done = True
        r, self._req = self._req, None
        ctx = self._ctx
        if r is None or r != ctx._active_req:  # the context freed it already
            return
        try:
            self._tokens = self._read_tokens(r)
            self._cached = self._lib.infer_request_cached_tokens(r)
            self._metrics = self._read_metrics(r)
        finally:
            ctx._active_req = None
            ctx._stream = None
            self._free_fn(r)
            ctx._leave()

    def _read_metrics(self, r):
        m = Metrics()
        self._lib.infer_request_metrics_into(r, ctypes.byref(m))
        return {name: getattr(m, name) for name, _ in Metrics._fields_}

    @property
    def cached_tokens(self):
        """Prompt tokens taken from the cache instead of fed (cache_prompt)."""
        return self._lib.infer_request_cached_tokens(self._req) if self._req is not None else self._cached

    def metrics(self):
        """infer_request_metrics as a dict."""
        return self._read_metrics(self._req) if self._req is not None else dict(self._metrics or {})

    @property
    def text(self):
        """The text so far."""
        return "".join(self._pieces)

    @property
    def tokens(self):
        """The generated ids so far (an end-of-generation token included)."""
        if self._req is not None:
            return self._read_tokens(self._req)
        return list(self._tokens or [])

    @property
    def done(self):
        return self._done

    def close(self):
        if self._req is not None:
            self._finish()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
