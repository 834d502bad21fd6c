"""The C side: finding libinfer, checking that it is the one this binding
was written for, the structs mirrored from infer.h and every prototype.

Nothing here passes or returns a struct by value (ctypes cannot do that
portably): params are filled by the *_params_init functions and results
written through the *_into ones, as infer.h's "For bindings" section asks.
"""

import ctypes
import ctypes.util
import os
import sys
import threading

# INFER_ABI_VERSION of the infer.h these declarations were written against.
ABI_VERSION = 2


class LibraryError(OSError):
    """libinfer could not be found or loaded, or is not the one this binding
    was written for (ABI version or struct sizes differ)."""


c_token = ctypes.c_int32
c_enum = ctypes.c_int  # C enums here are plain ints on every supported compiler

PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_float, ctypes.c_void_p)
# The piece is not NUL-terminated: a void pointer, read with string_at(p, len).
PIECE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)


# ---- structs, field for field as in src/infer_api.h ----------------------

class Error(ctypes.Structure):
    _fields_ = [("code", c_enum), ("msg", ctypes.c_char * 256)]


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("vocab_only", ctypes.c_int),
        ("device", c_enum),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
        ("rope_scaling", c_enum),
        ("rope_scale", ctypes.c_float),
    ]


class ContextParams(ctypes.Structure):
    _fields_ = [
        ("n_ctx", ctypes.c_int),
        ("n_batch", ctypes.c_int),
        ("n_threads", ctypes.c_int),
        ("n_seq", ctypes.c_int),
        ("kv_type", c_enum),
        ("match_llama", ctypes.c_int),
        ("full_policy", c_enum),
        ("n_keep", ctypes.c_int),
    ]


class SamplerParams(ctypes.Structure):
    _fields_ = [
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int),
        ("seed", ctypes.c_uint64),
    ]


class TokenProb(ctypes.Structure):
    _fields_ = [("id", c_token), ("p", ctypes.c_float)]


class Metrics(ctypes.Structure):
    _fields_ = [
        ("load_ms", ctypes.c_double),
        ("n_prompt_tokens", ctypes.c_int),
        ("prompt_ms", ctypes.c_double),
        ("prompt_tps", ctypes.c_double),
        ("ttft_ms", ctypes.c_double),
        ("n_gen_tokens", ctypes.c_int),
        ("n_gen_intervals", ctypes.c_int),
        ("gen_ms", ctypes.c_double),
        ("gen_tps", ctypes.c_double),
        ("token_ms_min", ctypes.c_double),
        ("token_ms_avg", ctypes.c_double),
        ("token_ms_max", ctypes.c_double),
        ("n_draft_tokens", ctypes.c_int),
        ("n_draft_accepted", ctypes.c_int),
        ("model_bytes", ctypes.c_size_t),
        ("context_bytes", ctypes.c_size_t),
        ("peak_rss_bytes", ctypes.c_size_t),
    ]


class RequestParams(ctypes.Structure):
    _fields_ = [
        ("prompt", ctypes.c_char_p),
        ("seq", ctypes.c_int),
        ("n_past", ctypes.c_int),
        ("n_predict", ctypes.c_int),
        ("sampling", SamplerParams),
        ("grammar", ctypes.c_char_p),
        ("json_schema", ctypes.c_char_p),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop", ctypes.c_int),
        ("n_probs", ctypes.c_int),
        ("bias_ids", ctypes.POINTER(c_token)),
        ("bias", ctypes.POINTER(ctypes.c_float)),
        ("n_bias", ctypes.c_int),
        ("prompt_tokens", ctypes.POINTER(c_token)),
        ("n_prompt_tokens", ctypes.c_int),
        ("cache_prompt", ctypes.c_int),
        ("progress", PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
        ("grammar_triggers", ctypes.POINTER(ctypes.c_char_p)),
        ("n_grammar_triggers", ctypes.c_int),
        ("copy_to", ctypes.POINTER(ctypes.c_int)),
        ("n_copy_to", ctypes.c_int),
        ("reasoning_budget", ctypes.c_int),
        ("reasoning_open", ctypes.c_int),
        ("reasoning_end", ctypes.c_char_p),
        ("lookup", ctypes.c_int),
        ("draft", ctypes.c_void_p),
        ("draft_n", ctypes.c_int),
    ]


class ChatTemplateStruct(ctypes.Structure):
    _fields_ = [
        ("kind", c_enum),
        ("fallback", ctypes.c_int),
        ("bos", ctypes.c_char * 64),
        ("eos", ctypes.c_char * 64),
        ("default_system", ctypes.c_char * 256),
        ("date", ctypes.c_char * 32),
        ("no_think", ctypes.c_int),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


# Every struct mirrored here, with its infer_struct_id and C name: each one
# is checked against infer_struct_size() when the library loads.
STRUCTS = [
    (0, "infer_error", Error),
    (1, "infer_model_params", ModelParams),
    (2, "infer_context_params", ContextParams),
    (4, "infer_sampler_params", SamplerParams),
    (5, "infer_token_prob", TokenProb),
    (6, "infer_metrics", Metrics),
    (7, "infer_request_params", RequestParams),
    (10, "infer_chat_template", ChatTemplateStruct),
    (11, "infer_chat_message", ChatMessage),
]

# ---- prototypes ------------------------------------------------------------

_p = ctypes.POINTER
_vp, _int, _cp, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t

PROTOTYPES = {
    "infer_version": (_cp, []),
    "infer_abi_version": (_int, []),
    "infer_struct_size": (_sz, [c_enum]),
    "infer_free": (None, [_vp]),
    # model
    "infer_model_params_init": (None, [_p(ModelParams)]),
    "infer_model_load": (_vp, [_cp, _p(ModelParams), _p(Error)]),
    "infer_model_free": (None, [_vp]),
    "infer_model_n_vocab": (_int, [_vp]),
    "infer_model_n_embd": (_int, [_vp]),
    "infer_model_n_ctx_train": (_int, [_vp]),
    "infer_model_bos": (c_token, [_vp]),
    "infer_model_eos": (c_token, [_vp]),
    "infer_model_is_eog": (_int, [_vp, c_token]),
    "infer_model_add_bos": (_int, [_vp]),
    "infer_model_warning": (_cp, [_vp]),
    "infer_model_describe": (_int, [_vp, _cp, _sz, _p(_sz), _p(Error)]),
    "infer_model_device": (c_enum, [_vp]),
    "infer_device_name": (_cp, [c_enum]),
    "infer_device_from_name": (_int, [_cp]),
    "infer_model_chat_template_text": (_vp, [_vp, _cp, _sz, _cp, _sz, _p(Error)]),
    # tokenizer
    "infer_tokenize": (c_enum, [_vp, _cp, _sz, _p(c_token), _int, _int, _int, _p(_int), _p(Error)]),
    "infer_token_to_piece": (_int, [_vp, c_token, _cp, _sz, _p(_sz), _p(Error)]),
    # context
    "infer_context_params_init": (None, [_p(ContextParams)]),
    "infer_context_new": (_vp, [_vp, _p(ContextParams), _p(Error)]),
    "infer_context_free": (None, [_vp]),
    "infer_context_n_ctx": (_int, [_vp]),
    "infer_context_n_seq": (_int, [_vp]),
    "infer_seq_n_past": (_int, [_vp, _int]),
    "infer_context_isa": (_cp, [_vp]),
    "infer_seq_truncate": (_int, [_vp, _int, _int, _p(_int), _p(Error)]),
    "infer_context_metrics_into": (None, [_vp, _p(Metrics)]),
    "infer_context_reset_metrics": (None, [_vp]),
    "infer_context_generated_tokens": (_p(c_token), [_vp, _p(_int)]),
    "infer_context_prompt_tokens": (_p(c_token), [_vp, _p(_int)]),
    # sampling and generation
    "infer_sampler_params_init": (None, [_p(SamplerParams)]),
    "infer_sampler_new": (_vp, [_p(SamplerParams), _int, _p(Error)]),
    "infer_sampler_free": (None, [_vp]),
    "infer_sampler_set_grammar": (c_enum, [_vp, _vp, _cp, _cp, _p(Error)]),
    "infer_json_schema_to_grammar": (_int, [_cp, _cp, _sz, _p(_sz), _p(Error)]),
    "infer_generate": (c_enum, [_vp, _vp, _cp, _int, PIECE_FN, _vp, _p(Error)]),
    # requests (the streaming iterator)
    "infer_request_params_init": (None, [_p(RequestParams)]),
    "infer_request_start": (_vp, [_vp, _p(RequestParams), _p(Error)]),
    "infer_context_step": (_int, [_vp, ctypes.c_double]),
    "infer_request_done": (_int, [_vp]),
    "infer_request_status": (c_enum, [_vp, _p(Error)]),
    "infer_request_text": (_sz, [_vp, _sz, _cp, _sz]),
    "infer_request_tokens": (_int, [_vp, _p(c_token), _int, _p(_int), _p(Error)]),
    "infer_request_metrics_into": (None, [_vp, _p(Metrics)]),
    "infer_request_cached_tokens": (_int, [_vp]),
    "infer_request_cancel": (None, [_vp]),
    "infer_request_free": (None, [_vp]),
    # embeddings
    "infer_embed": (c_enum, [_vp, _int, _cp, c_enum, _int, _p(ctypes.c_float), _p(Error)]),
    # chat templates
    "infer_chat_template_detect_into": (None, [_vp, _p(ChatTemplateStruct)]),
    "infer_chat_template_from_text_into": (None, [_cp, _cp, _cp, _p(ChatTemplateStruct)]),
    "infer_chat_template_name": (_cp, [c_enum]),
    "infer_chat_format": (_int, [_p(ChatTemplateStruct), _p(ChatMessage), _int, _int, _int, _cp, _sz, _p(_sz),
                                  _p(Error)]),
    "infer_chat_end_of_turn": (_int, [_p(ChatTemplateStruct), _cp, _sz, _p(_sz), _p(Error)]),
}

# ---- finding and loading ---------------------------------------------------

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def library_file_names(platform=None):
    """The file names libinfer has on this platform, as CMake writes them."""
    platform = platform or sys.platform
    if platform.startswith("win") or platform == "cygwin":
        return ["infer.dll"]
    if platform == "darwin":
        return ["libinfer.dylib"]
    return ["libinfer.so"]


def locate(environ=None, package_dir=PACKAGE_DIR, find_library=ctypes.util.find_library, platform=None):
    """The library to load, in this order: $INFER_LIBRARY (a path; when set
    it is the only candidate, so a wrong path is never hidden by another
    copy), a copy beside this package's files, then the system's search
    (ctypes.util.find_library("infer"), which finds an installed one).
    Raises LibraryError saying where it looked."""
    environ = os.environ if environ is None else environ
    env = environ.get("INFER_LIBRARY")
    if env:
        if os.path.isfile(env):
            return env
        raise LibraryError("INFER_LIBRARY is set to %s, which is not a file" % env)
    looked = ["INFER_LIBRARY (not set)"]
    for name in library_file_names(platform):
        path = os.path.join(package_dir, name)
        if os.path.isfile(path):
            return path
        looked.append(path + " (absent)")
    found = find_library("infer")
    if found:
        return found
    looked.append('ctypes.util.find_library("infer") (found nothing)')
    raise LibraryError(
        "libinfer not found; looked at: %s. Build it (cmake --build build --target infer_shared) and set "
        "INFER_LIBRARY to its path, copy it beside the package, or cmake --install it" % "; ".join(looked))


def check_abi(lib, path="libinfer"):
    """Refuses a library whose ABI version, or the size of any struct
    mirrored here, differs from what this binding was written for: a
    mismatch would otherwise corrupt memory silently."""
    try:
        version_fn = lib.infer_abi_version
    except AttributeError:
        raise LibraryError("%s has no infer_abi_version(): it is older than this binding (which needs ABI "
                           "version %d)" % (path, ABI_VERSION)) from None
    version_fn.restype = ctypes.c_int
    version_fn.argtypes = []
    got = version_fn()
    if got != ABI_VERSION:
        raise LibraryError("%s has ABI version %d but this binding was written for version %d: use the "
                           "binding of that library's source tree" % (path, got, ABI_VERSION))
    size_fn = lib.infer_struct_size
    size_fn.restype = ctypes.c_size_t
    size_fn.argtypes = [c_enum]
    for sid, name, cls in STRUCTS:
        want, have = ctypes.sizeof(cls), size_fn(sid)
        if want != have:
            raise LibraryError("%s: struct %s is %d bytes there but %d in this binding (ABI version %d on both "
                               "sides: the library was built with different settings or a changed header)"
                               % (path, name, have, want, ABI_VERSION))


def declare(lib):
    """Sets restype and argtypes of every function used; a missing one is
    reported by name."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryError("libinfer lacks %s (built from an older source?)" % name) from None
        fn.restype = restype
        fn.argtypes = argtypes


_lock = threading.Lock()
_lib = None
_lib_path = None


def lib():
    """The loaded, checked library (loaded on first use, once)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = locate()
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                raise LibraryError("cannot load %s: %s" % (path, e)) from None
            check_abi(handle, path)
            declare(handle)
            _lib_path = path
            _lib = handle
    return _lib


def library_path():
    """The path (or name) the library was loaded from; loads it if needed."""
    lib()
    return _lib_path
