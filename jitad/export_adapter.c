/* The C adapter of the jitad export `${name}`: what compiled code expects from
   jitad's runtime, without Python. Generated; see ${name}.h. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "${name}.h"

${lapack_calls}

struct jitad_ctx {      /* the layout `jitad.lower.llvm.CTX` */
    uint64_t stack_limit;
    int32_t status;
    char *arena_top, *arena_end;
    const int64_t *stop;
    int64_t polls_left;
};

static const int64_t never_stop = 0;
static const int64_t *volatile stop_word = &never_stop;   /* nonzero: running calls stop (error ${stop_code}) */
static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static __thread char *arena_base, *arena_end;
static __thread uint64_t stack_limit;

static void make_key(void) { pthread_key_create(&arena_key, free); }

/* Stack kept free below the last recursion check, for one frame of compiled code (under
   4 KiB) and what it calls there (libm: under 1 KiB with the frame, measured; LAPACK: more):
   a quarter of the thread's stack, at least ${margin_min_kib} KiB and at most ${margin_kib} KiB. */
static uint64_t jitad_margin(size_t bytes) {
    size_t quarter = bytes / 4;
    return quarter < (${margin_min_kib} << 10) ? (${margin_min_kib} << 10)
         : quarter > (${margin_kib} << 10) ? (${margin_kib} << 10) : quarter;
}

/* Whether `pointers` (n entries) or one of its entries is NULL. */
static int jitad_null(const void *const *pointers, int n) {
    if (!n) return 0;
    if (!pointers) return 1;
    for (int k = 0; k < n; k++) if (!pointers[k]) return 1;
    return 0;
}

void ${name}_set_stop(const int64_t *word) { stop_word = word ? word : &never_stop; }

static int jitad_enter(struct jitad_ctx *ctx) {
    if (!arena_base) {          /* this thread's tensor arena, freed when the thread exits */
        const char *mb = getenv("JITAD_ARENA_MB");
        long long size = (mb && atoll(mb) > 0 ? atoll(mb) : 256) << 20;
        pthread_once(&arena_once, make_key);
        arena_base = malloc((size_t)size);
        if (!arena_base) return ${arena_code};
        arena_end = arena_base + size - 64;   /* its last 64 bytes: the high-water word */
        pthread_setspecific(arena_key, arena_base);
        pthread_attr_t attr;   /* recursion stops (error ${stack_code}) a margin above the stack's end */
        void *low; size_t bytes;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &low, &bytes) == 0) stack_limit = (uint64_t)low + jitad_margin(bytes);
            pthread_attr_destroy(&attr);
        }
        if (!stack_limit) { char here; stack_limit = (uint64_t)&here - (1 << 20); }
    }
    ctx->stack_limit = stack_limit;
    ctx->status = 0;
    ctx->arena_top = (char *)(((uintptr_t)arena_base + 63) & ~(uintptr_t)63);
    ctx->arena_end = arena_end;
    ctx->stop = stop_word;
    ctx->polls_left = 1 << 30;
    return 0;
}

/* A tree's descriptor: size, root, left, right, the count and post-order of the nodes
   reachable from the root (made here, in the arena), then the fields. Error ${tree_code}: not a
   tree (a child index out of range, a node reached twice). */
static int jitad_tree(struct jitad_ctx *ctx, const void *arg, int n_fields, int64_t *d) {
    const int64_t *t = arg;
    int64_t n = t[0], root = t[1], count = 0, top = 0;
    const int64_t *left = (const int64_t *)t[2], *right = (const int64_t *)t[3];
    if (n < 0 || root < -1 || root >= n) return ${tree_code};
    /* the order (n), a stack (each node pushed once by its parent, once as done: 3n + 1
       entries however many parents a node claims) and a byte per node */
    if ((uint64_t)n > ((uint64_t)(ctx->arena_end - ctx->arena_top) - 128) / 33) return ${arena_code};
    int64_t *order = (int64_t *)ctx->arena_top, *stack = order + n;
    unsigned char *seen = (unsigned char *)(stack + 3 * n + 1);
    ctx->arena_top += ((size_t)n * 33 + 8 + 63) & ~(size_t)63;
    for (int64_t v = 0; v < n; v++) seen[v] = 0;
    if (root >= 0) stack[top++] = root;
    while (top) {             /* ~v: v's children are done */
        int64_t v = stack[--top];
        if (v < 0) { order[count++] = ~v; continue; }
        if (seen[v]) return ${tree_code};
        seen[v] = 1;
        stack[top++] = ~v;
        int64_t l = left[v], r = right[v];
        if (l < -1 || l >= n || r < -1 || r >= n) return ${tree_code};
        if (r >= 0) stack[top++] = r;
        if (l >= 0) stack[top++] = l;
    }
    d[0] = n; d[1] = root; d[2] = (int64_t)left; d[3] = (int64_t)right; d[4] = count; d[5] = (int64_t)order;
    for (int k = 0; k < n_fields; k++) d[${first_field} + k] = t[4 + k];
    return 0;
}

const char *${name}_error(int code) {
    switch (code) {
        case 0: return "no error";
        case ${tree_code}: return "a tree argument is not a tree (a child index out of range, or a node reached twice)";
        case ${stack_code}: return "the stack ran out (recursion too deep for this thread's stack: run it on a thread with a larger stack)";
        case ${arena_code}: return "the tensor arena ran out (set JITAD_ARENA_MB to more than 256, in MiB, before the first call of a thread)";
        case ${stop_code}: return "stopped: the word given to ${name}_set_stop became nonzero (Ctrl-C)";
        case ${null_code}: return "a NULL pointer: `in`, `out` or one of their entries (pass one pointer per input and output)";
${checks}        default: return code >= ${check_failed} ? "a runtime check of the program failed" : "unknown error code";
    }
}

${calls}
