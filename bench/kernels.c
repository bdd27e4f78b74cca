/* bench-kernels: decode-shaped matrix-vector products (Qwen3-30B-A3B shapes)
 * for Q4_K, Q6_K, Q8_0 and MXFP4, and on the expert shapes for the grid
 * i-quants and ternary formats (IQ2_XXS ... IQ1_M, TQ1_0, TQ2_0: the
 * formats of the largest MoE files, whose GB/s next to Q4_K's says what the
 * smaller file costs per byte), on 1 and 2 threads, reported as GB/s of
 * weights streamed and as a fraction of the memory bandwidth measured in the
 * same run by a plain streaming read. A benchmark, never a test: it prints a
 * markdown table and checks nothing.
 *
 * Honesty about caches: a matrix read again and again stays in cache when it
 * is smaller than L2 or L3, and then the figure is a cache figure. The "hot"
 * columns run one copy repeatedly; the "cold" columns cycle through enough
 * distinct copies to exceed twice the last-level cache (and at least
 * 256 MiB), so every product streams its weights from memory, as decode does.
 *
 * Then the Gated-DeltaNet recurrence of a Qwen3.5-35B-A3B decode step (32
 * heads of a 128 x 128 float state per layer, the heads on the pool as the
 * engine runs them), cold the same way, as GB/s of state moved: each step
 * reads its state twice and writes it once.
 *
 * Usage: bench-kernels [seconds per measurement, default 0.25]
 * BMOE_ISA=scalar|avx2|avx512|neon picks the kernel set (kernels.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

#define MIB (1024.0 * 1024.0)
#define BANDWIDTH_BUFFER_BYTES ((size_t)1 << 30)
#define COLD_MIN_BYTES ((size_t)256 << 20)
#define TRIALS 3

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t random_state = 0x243f6a8885a308d3ull;

static uint64_t random_next(void)
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return random_state;
}

/* Cache size in bytes from sysfs (level 2 or 3, unified/data), 0 if unknown. */
static size_t cache_bytes(int level)
{
    size_t best = 0;
    for (int index = 0; index < 8; index++) {
        char path[128], text[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *file = fopen(path, "r");
        if (!file)
            break;
        int this_level = 0;
        if (fscanf(file, "%d", &this_level) != 1)
            this_level = 0;
        fclose(file);
        if (this_level != level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        file = fopen(path, "r");
        if (!file)
            continue;
        if (fgets(text, sizeof text, file)) {
            char *end;
            unsigned long value = strtoul(text, &end, 10);
            if (*end == 'K')
                value *= 1024;
            else if (*end == 'M')
                value *= 1024 * 1024;
            if (value > best)
                best = value;
        }
        fclose(file);
    }
    return best;
}

/* Memory for big buffers: page aligned, huge pages where the kernel gives
 * them (fewer TLB misses, as the engine's own buffers will have). */
static void *big_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* ---- memory bandwidth: a plain streaming read ---- */

typedef struct read_step {
    const unsigned char *buffer;
    size_t bytes;
    long long (*read)(const unsigned char *p, size_t bytes);
    long long sink[64]; /* one slot per thread, cache lines apart */
} read_step;

/* Sums the buffer with eight independent accumulators of VECTOR bytes, so the
 * loop is bound by loads in flight, not by the adds. */
#define BENCH_READ_BODY(VECTOR)                                                       \
    typedef long long vector __attribute__((vector_size(VECTOR)));                   \
    const vector *v = (const vector *)p;                                             \
    size_t count = bytes / sizeof(vector);                                           \
    vector a = {0}, b = {0}, c = {0}, d = {0}, e = {0}, f = {0}, g = {0}, h = {0};   \
    for (size_t i = 0; i + 8 <= count; i += 8) {                                     \
        a += v[i];                                                                   \
        b += v[i + 1];                                                               \
        c += v[i + 2];                                                               \
        d += v[i + 3];                                                               \
        e += v[i + 4];                                                               \
        f += v[i + 5];                                                               \
        g += v[i + 6];                                                               \
        h += v[i + 7];                                                               \
    }                                                                                \
    a += b + c + d + e + f + g + h;                                                  \
    long long sum = 0;                                                               \
    for (size_t k = 0; k < sizeof(vector) / sizeof(long long); k++)                  \
        sum += a[k];                                                                 \
    return sum;

static long long read_plain(const unsigned char *p, size_t bytes)
{
    BENCH_READ_BODY(16)
}

#if defined(__x86_64__)
/* The widest loads the CPU has: a plain-C read would understate the
 * bandwidth and so overstate the kernels' fractions of it. */
__attribute__((target("avx2"))) static long long read_avx2(const unsigned char *p, size_t bytes)
{
    BENCH_READ_BODY(32)
}

__attribute__((target("avx512f"))) static long long read_avx512(const unsigned char *p,
                                                                size_t bytes)
{
    BENCH_READ_BODY(64)
}
#endif

static long long (*best_read(const char **name))(const unsigned char *, size_t)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *name = "avx512";
        return read_avx512;
    }
    if (__builtin_cpu_supports("avx2")) {
        *name = "avx2";
        return read_avx2;
    }
#endif
    *name = "128-bit";
    return read_plain;
}

static void read_task(void *context, int thread_index, int n_threads)
{
    read_step *step = context;
    size_t share = step->bytes / (size_t)n_threads / 512 * 512;
    step->sink[(thread_index * 8) % 64] =
        step->read(step->buffer + share * (size_t)thread_index, share);
}

/* Best of TRIALS reads of the whole buffer, in GB/s (1e9 bytes). */
static double measure_bandwidth(thread_pool *pool, const unsigned char *buffer, size_t bytes)
{
    const char *name;
    read_step step = {.buffer = buffer, .bytes = bytes, .read = best_read(&name)};
    thread_pool_run(pool, read_task, &step); /* warm-up: page tables, TLB */
    double best = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        double start = now_seconds();
        thread_pool_run(pool, read_task, &step);
        double rate = (double)bytes / (now_seconds() - start) / 1e9;
        if (rate > best)
            best = rate;
    }
    return best;
}

/* ---- matrices ---- */

/* Random blocks with sane scales: the kernels' speed does not depend on the
 * values, but finite outputs keep the run honest. */
static void fill_random_weights(uint32_t type, unsigned char *data, size_t bytes)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t v = random_next();
        memcpy(data + i, &v, 8);
    }
    const quant_format *format = quant_format_of(type);
    size_t block_bytes = (size_t)format->block_bytes;
    for (size_t at = 0; at + block_bytes <= bytes; at += block_bytes) {
        unsigned char *block = data + at;
        uint16_t scale = fp32_to_fp16(0.001f * (float)(1 + random_next() % 16));
        switch (type) {
        case TYPE_Q4_K: /* d, dmin */
            memcpy(block, &scale, 2);
            memcpy(block + 2, &scale, 2);
            break;
        case TYPE_Q6_K: /* d at the end */
            memcpy(block + 208, &scale, 2);
            break;
        case TYPE_Q8_0:
            memcpy(block, &scale, 2);
            break;
        case TYPE_MXFP4: /* E8M0 exponent near 2^-7 */
            block[0] = (unsigned char)(120 + random_next() % 8);
            break;
        case TYPE_IQ1_M: /* the scale in the top nibbles of the words at 48-55 */
            for (int k = 0; k < 4; k++)
                block[49 + 2 * k] = (unsigned char)((block[49 + 2 * k] & 0x0f) | ((scale >> (4 * k)) & 0x0f) << 4);
            break;
        case TYPE_IQ2_XXS: /* the other grid i-quants: d in front */
        case TYPE_IQ2_XS:
        case TYPE_IQ2_S:
        case TYPE_IQ3_XXS:
        case TYPE_IQ3_S:
        case TYPE_IQ1_S:
            memcpy(block, &scale, 2);
            break;
        case TYPE_TQ1_0: /* the ternary formats: d last */
        case TYPE_TQ2_0:
            memcpy(block + block_bytes - 2, &scale, 2);
            break;
        default:
            break;
        }
    }
}

typedef struct product_timing {
    double hot_rate, cold_rate; /* GB/s of weights */
    double cold_microseconds;   /* per product */
    float checksum;
} product_timing;

/* Best-of-TRIALS rate of products over `copies` matrices cycled in turn. */
static double time_products(thread_pool *pool, const kernel_set *kernels, matmul_job *job,
                            const unsigned char *arena, size_t matrix_bytes, int copies,
                            double seconds, double *microseconds)
{
    /* Warm-up pass over every copy: faults in pages, fills the TLB. */
    for (int c = 0; c < copies; c++) {
        job->weights = arena + (size_t)c * matrix_bytes;
        matmul_run(pool, kernels, job, 1);
    }
    double best = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        long runs = 0;
        int copy = 0;
        double start = now_seconds(), elapsed;
        do {
            for (int k = 0; k < 8; k++) {
                job->weights = arena + (size_t)copy * matrix_bytes;
                matmul_run(pool, kernels, job, 1);
                copy = copy + 1 == copies ? 0 : copy + 1;
                runs++;
            }
            elapsed = now_seconds() - start;
        } while (elapsed < seconds / TRIALS);
        double rate = (double)matrix_bytes * (double)runs / elapsed / 1e9;
        if (rate > best) {
            best = rate;
            *microseconds = elapsed / (double)runs * 1e6;
        }
    }
    return best;
}

/* The 1-minute load average, or -1: a busy machine makes every figure here
 * low and noisy, so the report says how busy it was. */
static double load_average(void)
{
    double load = -1;
    FILE *file = fopen("/proc/loadavg", "r");
    if (file) {
        if (fscanf(file, "%lf", &load) != 1)
            load = -1;
        fclose(file);
    }
    return load;
}

static const char *fits_in(size_t bytes, size_t l2, size_t l3)
{
    if (l2 && bytes <= l2)
        return "L2";
    if (l3 && bytes <= l3)
        return "L3";
    return "no";
}

/* ---- the Gated-DeltaNet recurrence ---- */

enum { DELTANET_HEADS = 32, DELTANET_DIM = 128 };

typedef struct deltanet_layer {
    float *states; /* DELTANET_HEADS states of DELTANET_DIM^2 */
    const float *q, *k, *v;
    float *out;
} deltanet_layer;

static void deltanet_task(void *context, int thread_index, int n_threads)
{
    const deltanet_layer *layer = context;
    int64_t state = (int64_t)DELTANET_DIM * DELTANET_DIM;
    for (int h = DELTANET_HEADS * thread_index / n_threads; h < DELTANET_HEADS * (thread_index + 1) / n_threads; h++)
        deltanet_step(layer->states + h * state, layer->q + h * DELTANET_DIM, layer->k + h * DELTANET_DIM,
                      layer->v + h * DELTANET_DIM, 0.5f, 0.97f, DELTANET_DIM, DELTANET_DIM,
                      layer->out + h * DELTANET_DIM);
}

/* Best-of-TRIALS GB/s of state moved (3 x the state bytes per step) over
 * `copies` layers' states cycled in turn. */
static double time_deltanet(thread_pool *pool, float *states, int copies, const float *qkv, float *out,
                            double seconds)
{
    size_t layer_floats = (size_t)DELTANET_HEADS * DELTANET_DIM * DELTANET_DIM;
    deltanet_layer layer = {.q = qkv, .k = qkv + DELTANET_HEADS * DELTANET_DIM,
                            .v = qkv + 2 * DELTANET_HEADS * DELTANET_DIM, .out = out};
    for (int c = 0; c < copies; c++) { /* warm-up: page tables, TLB */
        layer.states = states + (size_t)c * layer_floats;
        thread_pool_run(pool, deltanet_task, &layer);
    }
    double best = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        long steps = 0;
        double start = now_seconds(), elapsed;
        do {
            layer.states = states + (size_t)(steps % copies) * layer_floats;
            thread_pool_run(pool, deltanet_task, &layer);
            steps++;
            elapsed = now_seconds() - start;
        } while (elapsed < seconds / TRIALS || steps < copies);
        double rate = 3.0 * (double)steps * (double)(layer_floats * sizeof(float)) / elapsed / 1e9;
        if (rate > best)
            best = rate;
    }
    return best;
}

/* ---- thread pool handshake cost ---- */

static void empty_task(void *context, int thread_index, int n_threads)
{
    (void)context;
    (void)thread_index;
    (void)n_threads;
}

static double pool_run_nanoseconds(thread_pool *pool)
{
    const int runs = 20000;
    for (int i = 0; i < 1000; i++)
        thread_pool_run(pool, empty_task, NULL);
    double start = now_seconds();
    for (int i = 0; i < runs; i++)
        thread_pool_run(pool, empty_task, NULL);
    return (now_seconds() - start) / runs * 1e9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.25;
    if (!(seconds > 0) || seconds > 60) {
        fprintf(stderr, "bench-kernels: seconds per measurement must be in (0, 60], got '%s'\n",
                argv[1]);
        return 2;
    }
    const kernel_set *kernels = kernels_best();
    size_t l2 = cache_bytes(2), l3 = cache_bytes(3);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    bmoe_error err;
    thread_pool *pools[3] = {NULL, NULL, NULL};
    for (int n = 1; n <= 2; n++) {
        pools[n] = thread_pool_create(n, &err);
        if (!pools[n]) {
            fprintf(stderr, "bench-kernels: %s\n", err.message);
            return 1;
        }
    }

    static const uint32_t types[] = {TYPE_Q4_K,  TYPE_Q6_K,    TYPE_Q8_0,  TYPE_MXFP4, TYPE_IQ2_XXS,
                                     TYPE_IQ2_XS, TYPE_IQ2_S,   TYPE_IQ3_XXS, TYPE_IQ3_S, TYPE_IQ1_S,
                                     TYPE_IQ1_M, TYPE_TQ1_0,   TYPE_TQ2_0};
    static const int64_t shapes[][2] = {{2048, 768}, {768, 2048}, {2048, 4096}, {2048, 151936}};
    enum { N_TYPES = 13, N_SHAPES = 4, N_EXPERT_SHAPES = 2, FIRST_EXPERT_ONLY_TYPE = 4 };

    /* One arena serves the bandwidth read and every cold cycle. */
    size_t cold_target = 2 * l3 > COLD_MIN_BYTES ? 2 * l3 : COLD_MIN_BYTES;
    size_t arena_bytes = BANDWIDTH_BUFFER_BYTES;
    for (int t = 0; t < N_TYPES; t++)
        for (int s = 0; s < N_SHAPES; s++) {
            size_t bytes = quant_row_bytes(types[t], shapes[s][0]) * (size_t)shapes[s][1];
            size_t copies = (cold_target + bytes - 1) / bytes;
            if (copies < 2)
                copies = 2;
            if (copies * bytes > arena_bytes)
                arena_bytes = copies * bytes;
        }
    unsigned char *arena = big_alloc(arena_bytes);
    if (!arena) {
        fprintf(stderr, "bench-kernels: cannot allocate %.0f MiB\n", (double)arena_bytes / MIB);
        return 1;
    }
    memset(arena, 1, arena_bytes);

    double bandwidth[3] = {0, 0, 0};
    for (int n = 1; n <= 2; n++)
        bandwidth[n] = measure_bandwidth(pools[n], arena, BANDWIDTH_BUFFER_BYTES);

    double load_start = load_average();
    printf("# bench-kernels\n\n");
    printf("kernel set: %s; %ld CPUs online; L2 %.1f MiB, L3 %.1f MiB (per sysfs, cpu0); "
           "load average %.2f at start\n\n",
           kernels->name, cpus, (double)l2 / MIB, (double)l3 / MIB, load_start);
    const char *read_name;
    best_read(&read_name);
    printf("Streaming read of %.0f MiB (%s loads): %.1f GB/s on 1 thread, %.1f GB/s on 2 threads.\n",
           (double)BANDWIDTH_BUFFER_BYTES / MIB, read_name, bandwidth[1], bandwidth[2]);
    printf("Thread pool handshake (empty job): %.0f ns on 2 threads.\n\n",
           pool_run_nanoseconds(pools[2]));
    printf("Hot: one copy of the matrix, repeated (a cache figure when it fits). "
           "Cold: cycling through copies totalling >= %.0f MiB (memory streaming).\n\n",
           (double)cold_target / MIB);
    printf("| type | in x out | MiB | fits in cache | threads | hot GB/s | hot %% of BW | "
           "cold GB/s | cold %% of BW | cold us/product |\n");
    printf("|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);

    float *x = malloc(sizeof(float) * 2048);
    float *out = malloc(sizeof(float) * 151936);
    /* Room for the activation row of any type benchmarked here. */
    unsigned char *activation = malloc(activation_row_bytes(TYPE_Q8_0, 2048) +
                                       activation_row_bytes(TYPE_Q4_K, 2048));
    if (!x || !out || !activation)
        return 1;
    for (int i = 0; i < 2048; i++)
        x[i] = (float)((double)(random_next() >> 11) / 9007199254740992.0 * 2 - 1);

    for (int t = 0; t < N_TYPES; t++) {
        uint32_t type = types[t];
        if (!kernels_dot_rows(kernels, type)) {
            printf("| %s | no dot kernel | | | | | | | | |\n", quant_format_of(type)->name);
            continue;
        }
        /* the i-quants are the experts' formats: the expert shapes only */
        int n_shapes = t >= FIRST_EXPERT_ONLY_TYPE ? N_EXPERT_SHAPES : N_SHAPES;
        for (int s = 0; s < n_shapes; s++) {
            int64_t n_in = shapes[s][0], n_out = shapes[s][1];
            size_t row_bytes = quant_row_bytes(type, n_in);
            size_t matrix_bytes = row_bytes * (size_t)n_out;
            int copies = (int)((cold_target + matrix_bytes - 1) / matrix_bytes);
            if (copies < 2)
                copies = 2;
            fill_random_weights(type, arena, matrix_bytes);
            for (int c = 1; c < copies; c++)
                memcpy(arena + (size_t)c * matrix_bytes, arena, matrix_bytes);
            activation_convert(NULL, type, x, n_in, activation);
            matmul_job job = {
                .weights = arena,
                .type = type,
                .n_in = n_in,
                .n_out = n_out,
                .weight_row_bytes = row_bytes,
                .activations = activation,
                .activation_stride = 0,
                .n_tokens = 1,
                .out = out,
                .out_stride = n_out,
            };
            for (int n = 1; n <= 2; n++) {
                double hot_us, cold_us;
                double hot = time_products(pools[n], kernels, &job, arena, matrix_bytes, 1, seconds,
                                           &hot_us);
                double cold = time_products(pools[n], kernels, &job, arena, matrix_bytes, copies,
                                            seconds, &cold_us);
                int finite = 1;
                for (int64_t r = 0; r < n_out; r++)
                    finite &= isfinite(out[r]);
                printf("| %s | %lldx%lld | %.2f | %s | %d | %.1f | %.0f %% | %.1f | %.0f %% | %.1f |%s\n",
                       quant_format_of(type)->name, (long long)n_in, (long long)n_out,
                       (double)matrix_bytes / MIB, fits_in(matrix_bytes, l2, l3), n, hot,
                       100 * hot / bandwidth[n], cold, 100 * cold / bandwidth[n], cold_us,
                       finite ? "" : " (non-finite outputs!)");
                fflush(stdout);
            }
        }
    }

    /* The recurrence: a unit-length k keeps the decayed state bounded over
     * any number of steps. */
    size_t layer_bytes = sizeof(float) * DELTANET_HEADS * DELTANET_DIM * DELTANET_DIM;
    int state_copies = (int)((cold_target + layer_bytes - 1) / layer_bytes);
    if ((size_t)state_copies * layer_bytes > arena_bytes)
        state_copies = (int)(arena_bytes / layer_bytes);
    float *states = (float *)arena, *qkv = malloc(sizeof(float) * 3 * DELTANET_HEADS * DELTANET_DIM);
    float *state_out = malloc(sizeof(float) * DELTANET_HEADS * DELTANET_DIM);
    if (!qkv || !state_out)
        return 1;
    memset(states, 0, (size_t)state_copies * layer_bytes);
    for (int i = 0; i < 3 * DELTANET_HEADS * DELTANET_DIM; i++)
        qkv[i] = (float)((double)(random_next() >> 11) / 9007199254740992.0 * 2 - 1);
    for (int h = 0; h < 2 * DELTANET_HEADS; h++) /* the q and k rows */
        l2norm(qkv + h * DELTANET_DIM, DELTANET_DIM, 1e-6f);
    printf("\nGated-DeltaNet step, Qwen3.5-35B-A3B decode: %d heads of a %dx%d float state per layer "
           "(%.0f MiB); cold: %d layers' states cycled.\n\n",
           DELTANET_HEADS, DELTANET_DIM, DELTANET_DIM, (double)layer_bytes / MIB, state_copies);
    printf("| threads | hot GB/s of state | hot %% of BW | cold GB/s of state | cold %% of BW | cold us/layer |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    for (int n = 1; n <= 2; n++) {
        double hot = time_deltanet(pools[n], states, 1, qkv, state_out, seconds);
        double cold = time_deltanet(pools[n], states, state_copies, qkv, state_out, seconds);
        printf("| %d | %.1f | %.0f %% | %.1f | %.0f %% | %.1f |\n", n, hot, 100 * hot / bandwidth[n], cold,
               100 * cold / bandwidth[n], 3.0 * (double)layer_bytes / (cold * 1e9) * 1e6);
        fflush(stdout);
    }
    free(qkv);
    free(state_out);

    /* Bandwidth again: if the machine got quieter or busier meanwhile, the
     * fractions above (against the first figures) are off by that much. */
    double again[3] = {0, 0, 0};
    for (int n = 1; n <= 2; n++)
        again[n] = measure_bandwidth(pools[n], arena, BANDWIDTH_BUFFER_BYTES);
    double load_end = load_average();
    printf("\nStreaming read again at the end: %.1f GB/s on 1 thread, %.1f GB/s on 2 threads; "
           "load average %.2f.\n",
           again[1], again[2], load_end);
    if (load_start > (double)cpus * 0.5 || load_end > (double)cpus * 0.5)
        printf("WARNING: other processes were running (load average above %.1f); "
               "figures are low and noisy.\n",
               (double)cpus * 0.5);

    free(x);
    free(out);
    free(activation);
    munmap(arena, arena_bytes);
    thread_pool_destroy(pools[1]);
    thread_pool_destroy(pools[2]);
    return 0;
}
