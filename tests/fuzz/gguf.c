/* Fuzzes the GGUF reader on a buffer: the header, every key and value
   (rendered into a short and a long buffer), and the tensor table. */
#include "fuzz_common.h"
#include "tests/status_calls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    infer_error err;
    infer_gguf *g = infer_gguf_open_memory(data, size, &err);
    int64_t i, n;
    char small[8], line[512];
    if (!g) {
        FUZZ_CHECK(err.code != INFER_OK && err.msg[0], "a refused file must say why");
        return 0;
    }
    (void)infer_gguf_version(g);
    n = infer_gguf_n_kv(g);
    for (i = 0; i < n; i++) {
        const char *key = infer_gguf_key(g, i);
        FUZZ_CHECK(key != NULL, "key %lld of %lld is NULL", (long long)i, (long long)n);
        (void)infer_gguf_kv_type(g, i);
        /* a key found by name is one with that name (duplicates: the first) */
        FUZZ_CHECK(infer_gguf_find_key(g, key) >= 0, "key '%s' not found by name", key);
        infer_gguf_kv_to_string(g, i, small, sizeof small, NULL, NULL);
        infer_gguf_kv_to_string(g, i, line, sizeof line, NULL, NULL);
    }
    n = infer_gguf_n_tensors(g);
    for (i = 0; i < n; i++) {
        infer_tensor_info t;
        if (!sc_gguf_tensor(g, i, &t)) continue;
        (void)infer_type_name(t.type);
        if (t.name) (void)infer_gguf_find_tensor(g, t.name);
        /* the data, where given, lies inside the buffer */
        if (t.data && t.nbytes)
            FUZZ_CHECK((const uint8_t *)t.data >= data && (const uint8_t *)t.data + t.nbytes <= data + size,
                       "tensor %s's data lies outside the file", t.name ? t.name : "?");
    }
    infer_gguf_find_key(g, "general.architecture");
    infer_gguf_close(g);
    return 0;
}
