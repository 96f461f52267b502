/* The matrix products of ember's CPU workloads, timed alone through one oneDNN library.
 *
 * bench/onednn_versions.sh builds this file twice, against Debian's oneDNN 2.6 (the one ember
 * opens) and against PyPI's oneDNN 3.x, and runs both with and without DNNL_MAX_CPU_ISA=AVX2,
 * to choose between the libraries by measurement. Each product is the shape and layout ember
 * hands oneDNN: the forward products with their bias and ReLU fused, the backward ones on
 * transposed views. Prints one line per product: the implementation oneDNN chose and the median
 * and tenth percentile of its runs, after 20 untimed ones.
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                            \
    do {                                                                       \
        dnnl_status_t status = (call);                                         \
        if (status != dnnl_success) {                                          \
            fprintf(stderr, "onednn_matmul: %s failed: status %d\n", #call,   \
                    (int)status);                                              \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

struct product {
    const char *name;
    int m, k, n;
    int transposed_a, transposed_b, bias_relu;
};

static const struct product PRODUCTS[] = {
    {"mlp x.w1+b", 256, 784, 256, 0, 0, 1},
    {"mlp xT.dz1", 784, 256, 256, 1, 0, 0},
    {"mlp h.w2+b", 256, 256, 10, 0, 0, 1},
    {"chapter x.w1+b", 1024, 512, 2048, 0, 0, 1},
    {"chapter h.w2+b", 1024, 2048, 512, 0, 0, 1},
    {"chapter hT.dz2", 2048, 1024, 512, 1, 0, 0},
    {"chapter dz2.w2T", 1024, 512, 2048, 0, 1, 0},
    {"chapter xT.dz1", 512, 1024, 2048, 1, 0, 0},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A row-major [rows, cols] matrix, or its transposed view. */
static void matrix(dnnl_memory_desc_t *md, int rows, int cols, int transposed) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {transposed ? 1 : cols, transposed ? rows : 1};
#if DNNL_VERSION_MAJOR >= 3
    CHECK(dnnl_memory_desc_create_with_strides(md, 2, dims, dnnl_f32, strides));
#else
    CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides));
#endif
}

static dnnl_primitive_desc_t product_desc(dnnl_engine_t engine, const struct product *p,
                                          dnnl_memory_desc_t *a, dnnl_memory_desc_t *b,
                                          dnnl_memory_desc_t *bias, dnnl_memory_desc_t *c) {
    dnnl_primitive_attr_t attr;
    CHECK(dnnl_primitive_attr_create(&attr));
    if (p->bias_relu) {
        dnnl_post_ops_t ops;
        CHECK(dnnl_post_ops_create(&ops));
#if DNNL_VERSION_MAJOR >= 3
        CHECK(dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_relu, 0.0f, 0.0f));
#else
        CHECK(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
#endif
        CHECK(dnnl_primitive_attr_set_post_ops(attr, ops));
    }
    dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
    CHECK(dnnl_matmul_primitive_desc_create(&pd, engine, *a, *b, p->bias_relu ? *bias : NULL,
                                            *c, attr));
#else
    dnnl_matmul_desc_t desc;
    CHECK(dnnl_matmul_desc_init(&desc, a, b, p->bias_relu ? bias : NULL, c));
    CHECK(dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL));
#endif
    return pd;
}

static dnnl_memory_t memory(dnnl_memory_desc_t *md, dnnl_engine_t engine, float *data) {
    dnnl_memory_t m;
#if DNNL_VERSION_MAJOR >= 3
    CHECK(dnnl_memory_create(&m, *md, engine, data));
#else
    CHECK(dnnl_memory_create(&m, md, engine, data));
#endif
    return m;
}

int main(void) {
    const size_t most = 2048 * 2048;
    float *a_data = malloc(most * sizeof(float)), *b_data = malloc(most * sizeof(float));
    float *c_data = malloc(most * sizeof(float)), *bias_data = malloc(4096 * sizeof(float));
    srand(1);
    for (size_t i = 0; i < most; i++) {
        a_data[i] = (float)(rand() % 2001) / 1000.0f - 1.0f;
        b_data[i] = (float)(rand() % 2001) / 1000.0f - 1.0f;
    }
    for (int i = 0; i < 4096; i++) bias_data[i] = 0.1f;

    dnnl_engine_t engine;
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    dnnl_stream_t stream;
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    printf("oneDNN %d.%d\n", dnnl_version()->major, dnnl_version()->minor);

    for (size_t i = 0; i < sizeof PRODUCTS / sizeof PRODUCTS[0]; i++) {
        const struct product *p = &PRODUCTS[i];
        dnnl_memory_desc_t a, b, bias, c;
        matrix(&a, p->m, p->k, p->transposed_a);
        matrix(&b, p->k, p->n, p->transposed_b);
        matrix(&bias, 1, p->n, 0);
        matrix(&c, p->m, p->n, 0);
        dnnl_primitive_desc_t pd = product_desc(engine, p, &a, &b, &bias, &c);
        const char *implementation = "?";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &implementation);
        dnnl_primitive_t primitive;
        CHECK(dnnl_primitive_create(&primitive, pd));
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, memory(&a, engine, a_data)},
            {DNNL_ARG_WEIGHTS, memory(&b, engine, b_data)},
            {DNNL_ARG_DST, memory(&c, engine, c_data)},
            {DNNL_ARG_BIAS, p->bias_relu ? memory(&bias, engine, bias_data) : NULL},
        };
        int nargs = p->bias_relu ? 4 : 3;

        double flop = 2.0 * p->m * p->k * p->n;
        int runs = flop > 1e9 ? 200 : 1500;
        double *times = malloc(runs * sizeof(double));
        for (int r = -20; r < runs; r++) {
            double start = now();
            CHECK(dnnl_primitive_execute(primitive, stream, nargs, args));
            CHECK(dnnl_stream_wait(stream));
            if (r >= 0) times[r] = now() - start;
        }
        qsort(times, runs, sizeof(double), by_value);
        double median = times[runs / 2];
        printf("%-16s %-24s median %8.3f ms  %4.0f GFLOP/s  p10 %8.3f ms\n", p->name,
               implementation, median * 1e3, flop / median / 1e9, times[runs / 10] * 1e3);
        free(times);
    }
    return 0;
}
