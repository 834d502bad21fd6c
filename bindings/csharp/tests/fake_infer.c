/* A stand-in for libinfer.so that the tests load instead of the real one,
   to see the binding refuse a library it was not written for:
   infer_abi_version() is FAKE_INFER_ABI (999 unless set), and every struct
   is 0 bytes, which no mirrored struct is. */
#include <stddef.h>
#include <stdlib.h>

int infer_abi_version(void) {
    const char *v = getenv("FAKE_INFER_ABI");
    return v ? atoi(v) : 999;
}

size_t infer_struct_size(int id) {
    (void)id;
    return 0;
}
