#!/usr/bin/env python3
"""Serves the page (a folder such as build-wasm/web) on 127.0.0.1 with the
headers that make it cross-origin isolated (Cross-Origin-Opener-Policy:
same-origin, Cross-Origin-Embedder-Policy: require-corp), without which a
browser gives no SharedArrayBuffer and the page runs one thread. --models
DIR serves DIR's files at /models/ too (the page's "from this site").

    python3 examples/web/serve.py build-wasm/web [--port 8080] [--models models]
"""
import argparse
import functools
import http.server
import os


class Handler(http.server.SimpleHTTPRequestHandler):
    models_dir = None
    extensions_map = dict(http.server.SimpleHTTPRequestHandler.extensions_map,
                          **{".wasm": "application/wasm", ".js": "text/javascript"})

    def translate_path(self, path):
        if self.models_dir and path.startswith("/models/"):
            name = os.path.basename(path.split("?", 1)[0])
            return os.path.join(self.models_dir, name)
        return super().translate_path(path)

    def end_headers(self):
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        super().end_headers()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--models")
    a = ap.parse_args()
    Handler.models_dir = os.path.abspath(a.models) if a.models else None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), functools.partial(Handler, directory=a.site))
    print("serving %s at http://127.0.0.1:%d/ (cross-origin isolated)" % (a.site, a.port))
    server.serve_forever()


if __name__ == "__main__":
    main()
