/* cuda_emu.h - just enough of CUDA, on the CPU, to run infer_cuda.cu's
   kernels where there is no GPU (tests/cuda_emu.cpp compiles the .cu file
   as C++ with it; test_cuda_emu runs test_cuda.c against the result).

   Not a general emulator: one device, one block at a time; every thread of
   a block is a fiber (ucontext for its stack, _setjmp/_longjmp to switch),
   run until it finishes or waits. __syncthreads waits for the block's
   live threads, a warp shuffle for its warp's (both sides of every
   exchange), so divergence between warps works as on a GPU, and a
   barrier some threads never reach is reported, not hung. __shared__
   variables are statics (blocks run one after another). Streams run
   their work at once, except while capturing, when it is recorded into
   the graph that a graph launch replays. Memory is host memory. */
#ifndef INFER_CUDA_EMU_H
#define INFER_CUDA_EMU_H
#define INFER_CUDA_EMULATE 1
/* a fortified _longjmp refuses to jump to another stack (must come before
   the first system header) */
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

/* ---- the language ---- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __shared__ static
#define INFER_DYNAMIC_SHARED(type, name) type *name = (type *)emu_dynamic_shared()

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct emu_uint3 {
    unsigned x, y, z;
};
static emu_uint3 emu_thread, emu_block;
static dim3 emu_block_dim, emu_grid_dim;
#define threadIdx emu_thread
#define blockIdx emu_block
#define blockDim emu_block_dim
#define gridDim emu_grid_dim

static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- half precision (IEEE binary16, round to nearest even) ---- */
struct __half {
    unsigned short bits;
};
static inline float __half2float(__half h) {
    unsigned s = (h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1f, m = h.bits & 0x3ff;
    if (e == 0x1f) return __uint_as_float(s | 0x7f800000u | m << 13);
    if (e == 0) return (s ? -1.0f : 1.0f) * ldexpf((float)m, -24);
    return __uint_as_float(s | (e + 112) << 23 | m << 13);
}
static inline __half __float2half_rn(float f) {
    unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    __half h;
    if (a >= 0x7f800000u) { /* inf, nan */
        h.bits = (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    } else if (a >= 0x477ff000u) { /* rounds to >= 65520: inf */
        h.bits = (unsigned short)(s | 0x7c00u);
    } else if (a < 0x38800000u) { /* below the smallest normal: a multiple of 2^-24 */
        float q = nearbyintf(__uint_as_float(a) * 16777216.0f); /* ties to even */
        h.bits = (unsigned short)(s | (unsigned)q);
    } else {
        unsigned m = a + 0xfff + ((a >> 13) & 1); /* round the 13 dropped bits, ties to even */
        h.bits = (unsigned short)(s | ((m - 0x38000000u) >> 13));
    }
    return h;
}
static inline __half __ushort_as_half(unsigned short b) {
    __half h;
    h.bits = b;
    return h;
}

/* ---- threads of a block as fibers ---- */
enum { EMU_RUN, EMU_WARP_WAIT, EMU_BLOCK_WAIT, EMU_DONE };
struct emu_fiber {
    ucontext_t uc;
    jmp_buf jb;
    int state, started;
    char *stack;
};
#define EMU_MAX_THREADS 1024
#define EMU_STACK (64 * 1024)
static emu_fiber emu_fibers[EMU_MAX_THREADS];
static emu_fiber *emu_cur;
static jmp_buf emu_sched;
static std::function<void()> *emu_body;
static float emu_slots[EMU_MAX_THREADS];
static std::vector<unsigned char> emu_shared_mem;

static inline void *emu_dynamic_shared() { return emu_shared_mem.data(); }

/* A fiber's whole life: run the kernel for a thread, park, and run it
   again for the next block when resumed (so a context is made once per
   fiber, not once per thread of every block). */
static void emu_trampoline() {
    for (;;) {
        (*emu_body)();
        emu_cur->state = EMU_DONE;
        if (!_setjmp(emu_cur->jb)) _longjmp(emu_sched, 1);
    }
}

static inline void emu_wait(int kind) {
    emu_cur->state = kind;
    if (!_setjmp(emu_cur->jb)) _longjmp(emu_sched, 1);
}

static inline void __syncthreads() { emu_wait(EMU_BLOCK_WAIT); }

static inline float emu_exchange(float v, int src) {
    int tid = (int)emu_thread.x, base = tid & ~31;
    float r;
    emu_slots[tid] = v;
    emu_wait(EMU_WARP_WAIT);
    r = emu_slots[base + (src & 31)];
    emu_wait(EMU_WARP_WAIT);
    return r;
}
static inline float __shfl_xor_sync(unsigned, float v, int o) { return emu_exchange(v, ((int)emu_thread.x & 31) ^ o); }
static inline float __shfl_sync(unsigned, float v, int src) { return emu_exchange(v, src); }

/* Runs f until it finishes or waits (its own frame: nothing here lives
   across the jump back). */
static __attribute__((noinline)) void emu_resume(emu_fiber *f) {
    if (!_setjmp(emu_sched)) {
        if (!f->started) {
            f->started = 1;
            setcontext(&f->uc);
        }
        _longjmp(f->jb, 1);
    }
}

/* (its own frame: getcontext returns twice) */
static __attribute__((noinline)) void emu_fiber_init(emu_fiber *f) {
    f->stack = (char *)malloc(EMU_STACK);
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = EMU_STACK;
    f->uc.uc_link = NULL; /* the trampoline never returns */
    makecontext(&f->uc, emu_trampoline, 0);
}

static void emu_run_block(int n) {
    for (int t = 0; t < n; t++) {
        if (!emu_fibers[t].stack) emu_fiber_init(&emu_fibers[t]);
        emu_fibers[t].state = EMU_RUN;
    }
    for (;;) {
        int ran = 0, done = 0, released = 0;
        for (int t = 0; t < n; t++) {
            emu_fiber *f = &emu_fibers[t];
            if (f->state != EMU_RUN) continue;
            emu_cur = f;
            emu_thread.x = (unsigned)t;
            emu_thread.y = emu_thread.z = 0;
            ran = 1;
            emu_resume(f);
        }
        for (int t = 0; t < n; t++) done += emu_fibers[t].state == EMU_DONE;
        if (done == n) return;
        for (int w = 0; w < n; w += 32) { /* a warp whose live threads all wait at a shuffle goes on */
            int waiting = 0, live = 0;
            for (int t = w; t < w + 32 && t < n; t++)
                if (emu_fibers[t].state != EMU_DONE) live++, waiting += emu_fibers[t].state == EMU_WARP_WAIT;
            if (live && waiting == live) {
                for (int t = w; t < w + 32 && t < n; t++)
                    if (emu_fibers[t].state == EMU_WARP_WAIT) emu_fibers[t].state = EMU_RUN;
                released = 1;
            }
        }
        {
            int waiting = 0;
            for (int t = 0; t < n; t++) waiting += emu_fibers[t].state == EMU_BLOCK_WAIT;
            if (waiting && waiting == n - done) {
                for (int t = 0; t < n; t++)
                    if (emu_fibers[t].state == EMU_BLOCK_WAIT) emu_fibers[t].state = EMU_RUN;
                released = 1;
            }
        }
        if (!ran && !released) {
            fprintf(stderr, "cuda_emu: deadlock: threads wait at a barrier others never reach\n");
            abort();
        }
    }
}

/* ---- the runtime ---- */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum { cudaStreamNonBlocking = 1 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeThreadLocal };
struct emu_stream {
    int capturing;
    std::vector<std::function<void()> > ops;
};
struct emu_graph {
    std::vector<std::function<void()> > ops;
};
typedef emu_stream *cudaStream_t;
typedef emu_graph *cudaGraph_t;
typedef emu_graph *cudaGraphExec_t;
struct cudaDeviceProp {
    char name[256];
    int major, minor;
};

static inline const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    snprintf(p->name, sizeof p->name, "CPU emulation (tests/cuda_emu.h)");
    p->major = 0, p->minor = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaMalloc(void **p, size_t n) {
    *p = calloc(1, n);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
static inline cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    memcpy(d, s, n);
    return cudaSuccess;
}
static inline void emu_submit(cudaStream_t s, const std::function<void()> &op) {
    if (s && s->capturing) s->ops.push_back(op);
    else op();
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, cudaMemcpyKind, cudaStream_t s) {
    emu_submit(s, [=]() { memcpy(d, src, n); });
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = new emu_stream();
    (*s)->capturing = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    s->capturing = 1;
    s->ops.clear();
    return cudaSuccess;
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    *g = new emu_graph();
    (*g)->ops.swap(s->ops);
    s->capturing = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) {
    *e = new emu_graph(*g);
    return cudaSuccess;
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
    for (size_t i = 0; i < e->ops.size(); i++) e->ops[i]();
    return cudaSuccess;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    delete e;
    return cudaSuccess;
}

/* INFER_LAUNCH(grid, block, shared, stream, kernel)(args...) */
template <typename... P> struct emu_launcher {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    void (*kernel)(P...);
    template <typename... A> void operator()(A... args) const {
        dim3 g = grid, b = block;
        size_t sh = shared;
        void (*k)(P...) = kernel;
        emu_submit(stream, [=]() {
            std::function<void()> body = [&]() { k(args...); };
            if (b.x * b.y * b.z > EMU_MAX_THREADS || b.y != 1 || b.z != 1) {
                fprintf(stderr, "cuda_emu: blocks of %u x %u x %u threads are not emulated\n", b.x, b.y, b.z);
                abort();
            }
            emu_shared_mem.assign(sh + 16, 0xAB); /* not zeroed on a GPU either */
            emu_body = &body;
            emu_grid_dim = g;
            emu_block_dim = b;
            for (unsigned z = 0; z < g.z; z++)
                for (unsigned y = 0; y < g.y; y++)
                    for (unsigned x = 0; x < g.x; x++) {
                        emu_block.x = x, emu_block.y = y, emu_block.z = z;
                        emu_run_block((int)b.x);
                    }
            emu_body = NULL;
        });
    }
};
template <typename... P>
static emu_launcher<P...> emu_launch(dim3 g, dim3 b, size_t sh, cudaStream_t s, void (*k)(P...)) {
    emu_launcher<P...> l;
    l.grid = g, l.block = b, l.shared = sh, l.stream = s, l.kernel = k;
    return l;
}
#define INFER_LAUNCH(grid, block, shared, stream, ...) emu_launch(grid, block, shared, stream, __VA_ARGS__)

#endif
