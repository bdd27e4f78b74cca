/* bmoe-analyze io and compute on small hand-written --io-trace and
 * --compute-trace files whose answers are worked out in the comments. */
#include <math.h>

#include "analyze_run.h"

/* The numbers on the first line at or after FROM that starts with KEY. */
static int row_numbers(const char *from, const char *key, double *values, int capacity)
{
    const char *line = from ? an_line(from, key) : NULL;
    if (!line)
        return 0;
    line += strlen(key);
    int n = 0;
    while (n < capacity) {
        while (*line == ' ')
            line++;
        if (*line == '\n' || !*line)
            break; /* strtod would read on into the next line */
        char *end;
        double v = strtod(line, &end);
        if (end == line)
            break;
        values[n++] = v;
        line = end;
    }
    return n;
}

static bool close_to(double value, double target, double tolerance)
{
    return fabs(value - target) <= tolerance;
}

#define IO_HEADER "turn,phase,step,layer,expert,proj,lane,spec,offset,req_bytes,read_bytes,latency_ns\n"

/* Ten reads. Prefill (phase 0, step 28): two 4 KiB reads on lane 0, 1 ms
 * each. Decode step 29, lane 0: four demand reads of 60000 bytes asked,
 * 65536 read, 100/200/300/400 us. Decode step 30, lane 1: two demand reads of
 * 65536 (500, 600 us) and two speculative of 131072 asked, 135168 read
 * (700, 800 us). */
static const char io_trace[] = "# io_trace v1\n" IO_HEADER
                               "0,0,28,0,1,0,0,0,0,4096,4096,1000000\n"
                               "0,0,28,0,2,0,0,0,4096,4096,4096,1000000\n"
                               "0,1,29,0,3,0,0,0,8192,60000,65536,100000\n"
                               "0,1,29,0,3,1,0,0,73728,60000,65536,200000\n"
                               "0,1,29,1,4,0,0,0,139264,60000,65536,300000\n"
                               "0,1,29,1,4,1,0,0,204800,60000,65536,400000\n"
                               "0,1,30,0,5,0,1,0,270336,65536,65536,500000\n"
                               "0,1,30,0,5,1,1,0,335872,65536,65536,600000\n"
                               "0,1,30,1,6,0,1,1,401408,131072,135168,700000\n"
                               "0,1,30,1,6,1,1,1,536576,131072,135168,800000\n";

static void test_io(void)
{
    const char *path = an_path("io.csv");
    an_write(path, io_trace);
    CHECK_MSG(an_run("io '%s'", path) == 0, "%s", an_err);
    double v[8];
    /* All ten, in us: 100 200 300 400 500 600 700 800 1000 1000.
     * mean 5600 / 10 = 560; p50 at rank 4.5: (500 + 600) / 2 = 550; p90 at
     * rank 8.1 and p99 at 8.91 fall between the two 1000s: 1000. */
    CHECK(row_numbers(an_out, "all ", v, 8) == 6);
    CHECK(v[0] == 10 && close_to(v[1], 560, 0.05) && close_to(v[2], 550, 0.05));
    CHECK(v[3] == 1000 && v[4] == 1000 && v[5] == 1000);
    /* Demand, eight: 100 200 300 400 500 600 1000 1000: mean 4100 / 8 =
     * 512.5, p50 at rank 3.5: 450, p90 at rank 6.3: 1000. */
    CHECK(row_numbers(an_out, "demand ", v, 8) == 6);
    CHECK(v[0] == 8 && close_to(v[1], 512.5, 0.05) && close_to(v[2], 450, 0.05) && v[3] == 1000);
    /* Speculative, two: 700 800: p50 750, p90 at rank 0.9: 790, p99 799. */
    CHECK(row_numbers(an_out, "spec ", v, 8) == 6);
    CHECK(v[0] == 2 && close_to(v[2], 750, 0.05) && close_to(v[3], 790, 0.05) &&
          close_to(v[4], 799, 0.05) && v[5] == 800);
    /* Asked 4 x 60000 + 2 x 65536 + 2 x 131072 + 2 x 4096 = 641408 bytes;
     * read 4 x 65536 + 2 x 65536 + 2 x 135168 + 2 x 4096 = 671744; the
     * waste, 30336 bytes, is 4.52 % of what was read. */
    CHECK(strstr(an_out, "requested 0.61 MiB, read 0.64 MiB") != NULL);
    CHECK(strstr(an_out, "alignment waste 0.03 MiB = 4.52 %") != NULL);
    /* Lane 0: 6 reads, 270336 bytes (0.26 MiB) in 3 ms: 85.9 MiB/s.
     * Lane 1: 4 reads, 401408 bytes (0.38 MiB) in 2.6 ms: 147.2 MiB/s.
     * All: 0.640625 MiB in 5.6 ms: 114.4 MiB/s; both at once 233.2. */
    const char *lanes = an_line(an_out, "bandwidth per lane");
    CHECK(row_numbers(lanes, "0 ", v, 8) == 5);
    CHECK(v[0] == 6 && close_to(v[2], 3.0, 0.005) && close_to(v[3], 85.9, 0.05) &&
          close_to(v[4], 40.24, 0.005));
    CHECK(row_numbers(lanes, "1 ", v, 8) == 5);
    CHECK(v[0] == 4 && close_to(v[2], 2.6, 0.005) && close_to(v[3], 147.2, 0.05));
    CHECK(row_numbers(lanes, "all ", v, 8) == 5);
    CHECK(v[0] == 10 && close_to(v[3], 114.4, 0.05));
    CHECK(strstr(an_out, "at most 233.2 MiB/s") != NULL);
    /* Demand: 8 reads (80 %), 401408 bytes (59.76 %); spec 2 (20 %),
     * 270336 bytes (40.24 %). */
    const char *classes = an_line(an_out, "speculative vs demand");
    CHECK(row_numbers(classes, "demand ", v, 8) == 5);
    CHECK(v[0] == 8 && close_to(v[1], 80, 0.005) && close_to(v[3], 59.76, 0.005));
    CHECK(row_numbers(classes, "spec ", v, 8) == 5);
    CHECK(v[0] == 2 && close_to(v[3], 40.24, 0.005) && close_to(v[4], 750, 0.05));
    /* Three decodes (steps 28, 29, 30). */
    CHECK(strstr(an_out, "over 3 decodes") != NULL);

    /* Decode only: the eight reads of 100..800 us, p50 450; asked 633216,
     * read 663552: the same 30336 bytes wasted, 4.57 %. */
    CHECK(an_run("io '%s' --phase decode", path) == 0);
    CHECK(row_numbers(an_out, "all ", v, 8) == 6);
    CHECK(v[0] == 8 && close_to(v[2], 450, 0.05) && v[5] == 800);
    CHECK(strstr(an_out, "= 4.57 %") != NULL);
    CHECK(an_run("io '%s' --phase prefill", path) == 0);
    CHECK(row_numbers(an_out, "all ", v, 8) == 6 && v[0] == 2 && v[2] == 1000);

    /* Optional columns: with only latency and read_bytes, one lane, all
     * demand. */
    const char *minimal = an_path("io-minimal.csv");
    an_write(minimal, "read_bytes,latency_ns\n4096,1000\n8192,3000\n");
    CHECK_MSG(an_run("io '%s'", minimal) == 0, "%s", an_err);
    CHECK(row_numbers(an_out, "all ", v, 8) == 6 && v[0] == 2 && close_to(v[1], 2, 1e-9));
    CHECK(strstr(an_out, "no lane column") != NULL && strstr(an_out, "no spec column") != NULL);
    /* A figure without data (the speculative class has no reads; a lane
     * busy for no time has no rate) is "-", never "nan". */
    CHECK_MSG(!strstr(an_out, "nan") && an_line(an_out, "spec ") && strstr(an_line(an_out, "spec "), "-\n"),
              "%s", an_out);
    const char *instant = an_path("io-instant.csv");
    an_write(instant, "lane,read_bytes,latency_ns\n0,4096,0\n");
    CHECK_MSG(an_run("io '%s'", instant) == 0, "%s", an_err);
    CHECK_MSG(!strstr(an_out, "nan") && strstr(an_out, "overall: - MiB/s"), "%s", an_out);
}

#define COMPUTE_HEADER "turn,phase,step,seq,layer,op,name,wall_ns,majflt\n"

/* Two decodes of an eight-node graph (ms): embd 1, norm-0 0.5, attn_q-0 2,
 * ffn_moe-0 4, norm-1 0.5, attn_q-1 2, ffn_moe-1 9 (step 29) or 4 (step
 * 30), output 1. Faults: 3 on ffn_moe-0 and 5 on ffn_moe-1 of step 29. */
static const char node_trace[] =
    "# compute_trace v1\n"
    "# model=m.gguf arch=qwen3moe n_layer=2 n_threads=4 io_threads=4 o_direct=1 overlap=0\n"
    COMPUTE_HEADER "0,1,29,0,-1,GET_ROWS,embd,1000000,0\n"
    "0,1,29,1,0,RMS_NORM,norm-0,500000,0\n"
    "0,1,29,2,0,MUL_MAT,attn_q-0,2000000,0\n"
    "0,1,29,3,0,MUL_MAT_ID,ffn_moe-0,4000000,3\n"
    "0,1,29,4,1,RMS_NORM,norm-1,500000,0\n"
    "0,1,29,5,1,MUL_MAT,attn_q-1,2000000,0\n"
    "0,1,29,6,1,MUL_MAT_ID,ffn_moe-1,9000000,5\n"
    "0,1,29,7,-1,MUL_MAT,output,1000000,0\n"
    "0,1,30,0,-1,GET_ROWS,embd,1000000,0\n"
    "0,1,30,1,0,RMS_NORM,norm-0,500000,0\n"
    "0,1,30,2,0,MUL_MAT,attn_q-0,2000000,0\n"
    "0,1,30,3,0,MUL_MAT_ID,ffn_moe-0,4000000,0\n"
    "0,1,30,4,1,RMS_NORM,norm-1,500000,0\n"
    "0,1,30,5,1,MUL_MAT,attn_q-1,2000000,0\n"
    "0,1,30,6,1,MUL_MAT_ID,ffn_moe-1,4000000,0\n"
    "0,1,30,7,-1,MUL_MAT,output,1000000,0\n";

/* Layer segments: pre 1 + 1, blk.0 3 (1 fault) + 1 (a routing node's
 * segment) + 2, blk.1 5 + 6 (2 faults), post 2 + 2 ms. */
static const char layer_trace[] = "# compute_trace v1\n" COMPUTE_HEADER
                                  "0,1,29,0,-1,LAYER,pre,1000000,0\n"
                                  "0,1,29,1,0,LAYER,blk.0,3000000,1\n"
                                  "0,1,29,2,0,LAYER,blk.0,1000000,0\n"
                                  "0,1,29,3,1,LAYER,blk.1,5000000,0\n"
                                  "0,1,29,4,1,LAYER,post,2000000,0\n"
                                  "0,1,30,0,-1,LAYER,pre,1000000,0\n"
                                  "0,1,30,1,0,LAYER,blk.0,2000000,0\n"
                                  "0,1,30,2,1,LAYER,blk.1,6000000,2\n"
                                  "0,1,30,3,1,LAYER,post,2000000,0\n";

static void test_compute(void)
{
    const char *path = an_path("ct.csv");
    an_write(path, node_trace);
    CHECK_MSG(an_run("compute '%s'", path) == 0, "%s", an_err);
    CHECK(strstr(an_out, "granularity: per graph node") != NULL);
    /* 20 + 15 = 35 ms over 2 decodes, 8 faults. */
    CHECK(strstr(an_out, "rows: 16 (phase: all) over 2 decodes; traced wall 35.000 ms = 17.500 "
                         "ms per decode; major faults 8") != NULL);
    double v[8];
    /* By op: MUL_MAT_ID 4 + 9 + 4 + 4 = 21 ms (60 %), every fault;
     * MUL_MAT 4 x 2 + 2 x 1 = 10 ms (28.57 %); RMS_NORM 2 ms (5.71 %);
     * GET_ROWS 2 ms (5.71 %). */
    CHECK(row_numbers(an_out, "MUL_MAT_ID ", v, 8) == 5);
    CHECK(v[0] == 4 && close_to(v[1], 21, 1e-6) && close_to(v[2], 60, 0.005) && v[3] == 8 &&
          close_to(v[4], 100, 0.005));
    CHECK(row_numbers(an_out, "MUL_MAT ", v, 8) == 5);
    CHECK(v[0] == 6 && close_to(v[1], 10, 1e-6) && close_to(v[2], 28.57, 0.005) && v[3] == 0);
    CHECK(row_numbers(an_out, "RMS_NORM ", v, 8) == 5 && close_to(v[2], 5.71, 0.005));
    CHECK(row_numbers(an_out, "GET_ROWS ", v, 8) == 5 && close_to(v[1], 2, 1e-6));
    /* The op table is sorted by wall time: MUL_MAT_ID comes first. */
    CHECK(an_line(an_out, "MUL_MAT_ID ") < an_line(an_out, "MUL_MAT "));
    /* By layer: none = embd + output = 4 ms (11.43 %); layer 0: 1 + 4 + 8 =
     * 13 ms (37.14 %), 3 faults (37.5 %); layer 1: 1 + 4 + 13 = 18 ms
     * (51.43 %), 5 faults (62.5 %). */
    const char *layers = an_line(an_out, "by layer");
    CHECK(row_numbers(layers, "none ", v, 8) == 5 && close_to(v[2], 11.43, 0.005));
    CHECK(row_numbers(layers, "0 ", v, 8) == 5);
    CHECK(v[0] == 6 && close_to(v[1], 13, 1e-6) && close_to(v[2], 37.14, 0.005) && v[3] == 3 &&
          close_to(v[4], 37.5, 0.005));
    CHECK(row_numbers(layers, "1 ", v, 8) == 5);
    CHECK(close_to(v[1], 18, 1e-6) && close_to(v[2], 51.43, 0.005) && close_to(v[4], 62.5, 0.005));
    /* Faults: 2 of 16 rows (12.5 %) holding 4 + 9 = 13 ms (37.14 %); 4 per
     * decode; most in layer 1 and in MUL_MAT_ID. The faulting MUL_MAT_ID
     * rows took 13 ms where two fault-free ones take 2 x 4: 5 ms lost,
     * 14.29 % of the 35. */
    CHECK(strstr(an_out, "8 major faults in 2 of 16 rows (12.50 %); those rows hold 37.14 % of "
                         "the traced wall time; 4.00 faults per decode") != NULL);
    CHECK(strstr(an_out, "most faults: layer 1 (62.50 %), op MUL_MAT_ID (100.00 %)") != NULL);
    CHECK(strstr(an_out, "estimated wall lost to faults: 5.000 ms = 14.29 %") != NULL);

    const char *layered = an_path("ctl.csv");
    an_write(layered, layer_trace);
    CHECK_MSG(an_run("compute '%s'", layered) == 0, "%s", an_err);
    CHECK(strstr(an_out, "granularity: per layer segment") != NULL);
    CHECK(strstr(an_out, "by op") == NULL); /* op is LAYER everywhere: no op table */
    /* pre 2 ms (8.70 %), blk.0 6 ms (26.09 %, 1 fault = 33.33 %), blk.1 11
     * ms (47.83 %, 2 faults), post 4 ms (17.39 %), of 23 ms. */
    layers = an_line(an_out, "by layer");
    CHECK(row_numbers(layers, "pre ", v, 8) == 5 && v[0] == 2 && close_to(v[2], 8.70, 0.005));
    CHECK(row_numbers(layers, "0 ", v, 8) == 5);
    CHECK(v[0] == 3 && close_to(v[1], 6, 1e-6) && close_to(v[2], 26.09, 0.005) &&
          close_to(v[4], 33.33, 0.005));
    CHECK(row_numbers(layers, "1 ", v, 8) == 5 && close_to(v[2], 47.83, 0.005) && v[3] == 2);
    CHECK(row_numbers(layers, "post ", v, 8) == 5 && close_to(v[2], 17.39, 0.005));
    /* Segments in model order: pre, 0, 1, post. */
    CHECK(an_line(layers, "pre ") < an_line(layers, "0 ") &&
          an_line(layers, "1 ") < an_line(layers, "post "));
    /* blk.0's faulting 3 ms against its fault-free 1 and 2 (mean 1.5):
     * 1.5 ms; blk.1's 6 against 5: 1 ms; 2.5 ms = 10.87 % of 23. */
    CHECK(strstr(an_out, "estimated wall lost to faults: 2.500 ms = 10.87 %") != NULL);

    /* A phase with no rows is an error, not an empty report. */
    CHECK(an_run("compute '%s' --phase prefill", layered) == 1);
    CHECK(an_one_line_error() && strstr(an_err, "no prefill rows"));
}

int main(void)
{
    an_setup("analyze_traces");
    test_io();
    test_compute();
    return test_finish();
}
