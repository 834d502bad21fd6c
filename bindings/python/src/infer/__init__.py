"""infer: Python bindings for infer.h (ctypes over libinfer / infer.dll).

    import infer
    with infer.Model("model.gguf") as m, m.context(n_threads=4) as c:
        print(c.generate("Once upon a time", 32, temperature=0))
        for piece in c.stream("Tell me a story", 64):
            print(piece, end="", flush=True)
        print(c.chat([{"role": "user", "content": "Hi!"}]))

The library is loaded on first use: $INFER_LIBRARY, else a copy beside
this package, else the system's search (ctypes.util.find_library).
"""

from ._api import (ChatTemplate, Context, InferError, Model, Status, Stream, abi_version, json_schema_to_grammar,
                   library_path, version)
from ._native import ABI_VERSION, LibraryError

__version__ = "0.25.0"

__all__ = ["ABI_VERSION", "ChatTemplate", "Context", "InferError", "LibraryError", "Model", "Status", "Stream",
           "abi_version", "json_schema_to_grammar", "library_path", "version"]
