/* bmoe-analyze error paths: usage errors exit 2, bad input exits 1 with one
 * line on stderr naming what failed (control bytes it quotes escaped), a
 * failed write of standard output exits non-zero, an SVG never replaces a
 * file the tool did not write, and randomly damaged inputs never crash it
 * (the route view's --drop replay among them). */
#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#include "analyze_run.h"

static const char route_ok[] = "# route_trace v1\n"
                               "# layer=0 expert_bytes=1048576 dense_bytes=0\n"
                               "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n"
                               "0,0,0,0,0,1,0.5,0,1048576\n"
                               "0,1,1,0,0,1,0.5,1,0\n"
                               "0,1,2,0,0,2,nan,0,1048576\n"
                               "0,1,3,0,0,1,0.5,1,0\n";
static const char csv_ok[] = "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,"
                             "mgmt_ms\n"
                             "1,9,500,10,400,100,1,5,5\n2,9,100,10,80,100,2,5,5\n"
                             "3,9,100,10,80,100,3,5,5\n4,9,110,10,80,100,4,5,5\n"
                             "5,9,90,10,80,100,5,5,5\n6,9,100,10,80,100,6,5,5\n"
                             "7,9,100,10,80,100,7,5,5\n8,9,100,10,80,100,8,5,5\n"
                             "9,9,100,10,80,100,9,5,5\n";
static const char io_ok[] = "# io_trace v1\n"
                            "turn,phase,step,layer,expert,proj,lane,spec,offset,req_bytes,"
                            "read_bytes,latency_ns\n"
                            "0,1,29,0,87,1,0,0,1526304,65536,69632,416800\n"
                            "0,1,29,0,88,1,1,1,1626304,65536,69632,216800\n";
static const char compute_ok[] = "# compute_trace v1\n"
                                 "turn,phase,step,seq,layer,op,name,wall_ns,majflt\n"
                                 "0,1,29,0,-1,GET_ROWS,embd,428500,0\n"
                                 "0,1,29,1,0,RMS_NORM,norm-0,19500,2\n";

/* Runs ARGS expecting exit STATUS with a one-line error containing NEEDLE. */
#define EXPECT_ERROR(status, needle, ...)                                                        \
    do {                                                                                          \
        int got_ = an_run(__VA_ARGS__);                                                           \
        CHECK_MSG(got_ == (status), "exit %d, wanted %d: %s", got_, (status), an_err);            \
        CHECK_MSG(an_one_line_error(), "not one error line: '%s'", an_err);                       \
        CHECK_MSG(strstr(an_err, needle) != NULL, "'%s' not in '%s'", needle, an_err);            \
        CHECK_MSG(an_out[0] == '\0', "output on a failed run: %.200s", an_out);                   \
    } while (0)

static const char *file_with(const char *name, const char *text)
{
    const char *path = an_path(name);
    an_write(path, text);
    return path;
}

static void test_usage(void)
{
    const char *route = file_with("ok.route.csv", route_ok);
    EXPECT_ERROR(2, "no view", "%s", "");
    EXPECT_ERROR(2, "unknown view 'routes'", "routes '%s'", route);
    EXPECT_ERROR(2, "needs a FILE", "route");
    EXPECT_ERROR(2, "'--bogus' is not an option", "route '%s' --bogus", route);
    EXPECT_ERROR(2, "'abc' is not a budget", "route '%s' --budget-mib abc", route);
    EXPECT_ERROR(2, "'-5' is not a budget", "route '%s' --budget-mib 1000,-5", route);
    EXPECT_ERROR(2, "'nan' is not a budget", "route '%s' --budget-mib nan", route);
    EXPECT_ERROR(2, "needs a value", "route '%s' --budget-mib", route);
    EXPECT_ERROR(2, "'sideways' is not decode", "route '%s' --phase sideways", route);
    EXPECT_ERROR(2, "'--seed' is not an option of the route view", "route '%s' --seed 3", route);
    EXPECT_ERROR(2, "'--svg' is not an option of the io view", "io '%s' --svg x", route);
    EXPECT_ERROR(2, "'--phase' is not an option of the csv view", "csv '%s' --phase decode", route);
    EXPECT_ERROR(2, "'-1' is not a non-negative integer", "csv '%s' --seed -1", route);
    EXPECT_ERROR(2, "one file at a time", "route '%s' '%s'", route, route);
    CHECK(an_run("--help") == 0 && strstr(an_out, "usage: bmoe-analyze") && !an_err[0]);
    CHECK(an_run("csv --help") == 0 && strstr(an_out, "--seed N"));
}

static void test_bad_files(void)
{
    EXPECT_ERROR(1, "No such file", "route '%s'", an_path("missing.csv"));
    EXPECT_ERROR(1, "not a regular file (a directory)", "csv '%s'", an_dir);
    EXPECT_ERROR(1, "no header row", "csv '%s'", file_with("empty.csv", ""));
    EXPECT_ERROR(1, "no header row", "io '%s'", file_with("comments.csv", "# io_trace v1\n#\n\n"));
    const char binary[] = "step,wall_ms\n1,2\n";
    FILE *file = fopen(an_path("binary.csv"), "wb");
    if (file) {
        fwrite(binary, 1, sizeof binary, file); /* with its NUL */
        fclose(file);
    }
    EXPECT_ERROR(1, "binary data", "csv '%s'", an_path("binary.csv"));
    EXPECT_ERROR(1, "appears twice", "csv '%s'", file_with("twice.csv", "wall_ms,a,wall_ms\n1,2,3\n"));
    EXPECT_ERROR(1, "has no name", "csv '%s'", file_with("unnamed.csv", "wall_ms,,x\n1,2,3\n"));
    EXPECT_ERROR(1, "bad.csv:3: 2 fields, the header has 3",
                 "csv '%s'", file_with("bad.csv", "wall_ms,io_ms,x\n1,2,3\n4,5\n"));
    EXPECT_ERROR(1, "no token rows", "csv '%s'", file_with("header-only.csv", "step,wall_ms\n"));

    /* Wider than any contract format. */
    char *wide = malloc(5000 * 8 + 16);
    if (wide) {
        char *p = wide;
        for (int i = 0; i < 5000; i++)
            p += sprintf(p, "%sc%d", i ? "," : "", i);
        strcpy(p, "\n");
        EXPECT_ERROR(1, "5000 columns in the header", "csv '%s'", file_with("wide.csv", wide));
        free(wide);
    }
}

static void test_bad_numbers(void)
{
    static const char route_header[] =
        "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";
    char text[1024];
    snprintf(text, sizeof text, "%s0,1,1,0,0,abc,0.5,0,100\n", route_header);
    EXPECT_ERROR(1, "r1.csv:2: column 'expert': 'abc' is not an integer", "route '%s'",
                 file_with("r1.csv", text));
    snprintf(text, sizeof text, "%s0,1,1,-3,0,4,0.5,0,100\n", route_header);
    EXPECT_ERROR(1, "column 'layer': '-3'", "route '%s'", file_with("r2.csv", text));
    snprintf(text, sizeof text, "%s0,1,1,99999999999,0,4,0.5,0,100\n", route_header);
    EXPECT_ERROR(1, "column 'layer'", "route '%s'", file_with("r3.csv", text));
    snprintf(text, sizeof text, "%s0,7,1,0,0,4,0.5,0,100\n", route_header);
    EXPECT_ERROR(1, "column 'phase'", "route '%s'", file_with("r4.csv", text));
    snprintf(text, sizeof text, "%s0,1,1,0,0,4,0.5,0,\n", route_header);
    EXPECT_ERROR(1, "column 'expert_bytes': ''", "route '%s'", file_with("r5.csv", text));
    /* Rows fine, but no size for layer 0 anywhere. */
    snprintf(text, sizeof text, "%s0,1,1,0,0,4,0.5,1,0\n", route_header);
    EXPECT_ERROR(1, "layer 0 has no expert_bytes", "route '%s'", file_with("r6.csv", text));
    snprintf(text, sizeof text, "# layer=0 expert_bytes=12x\n%s0,1,1,0,0,4,0.5,1,0\n", route_header);
    EXPECT_ERROR(1, "bad '# layer=' line", "route '%s'", file_with("r7.csv", text));
    snprintf(text, sizeof text, "# layer=0\n%s0,1,1,0,0,4,0.5,1,0\n", route_header);
    EXPECT_ERROR(1, "without expert_bytes", "route '%s'", file_with("r8.csv", text));
    snprintf(text, sizeof text, "# layer=0 expert_bytes=5\n# layer=0 expert_bytes=6\n%s0,1,1,0,0,4,"
                                "0.5,1,0\n",
             route_header);
    EXPECT_ERROR(1, "disagree", "route '%s'", file_with("r9.csv", text));
    snprintf(text, sizeof text, "%s0,0,1,0,0,4,0.5,0,100\n", route_header);
    EXPECT_ERROR(1, "no decode rows", "route '%s'", file_with("r10.csv", text));

    EXPECT_ERROR(1, "c1.csv:3: column 'wall_ms': '1.5x' is not a finite number", "csv '%s'",
                 file_with("c1.csv", "step,wall_ms\n1,100\n2,1.5x\n"));
    EXPECT_ERROR(1, "'nan' is not a finite number", "csv '%s'",
                 file_with("c2.csv", "step,wall_ms\n1,nan\n"));
    EXPECT_ERROR(1, "'inf' is not a finite number", "csv '%s'",
                 file_with("c3.csv", "step,wall_ms\n1,inf\n"));
    EXPECT_ERROR(1, "column 'wall_ms' is negative", "csv '%s'",
                 file_with("c4.csv", "step,wall_ms\n1,-4\n"));
    EXPECT_ERROR(1, "wall_ms is 0", "csv '%s'", file_with("c5.csv", "step,wall_ms\n1,0\n"));
    EXPECT_ERROR(1, "column 'step'", "csv '%s'", file_with("c6.csv", "step,wall_ms\n1.5,10\n"));
    EXPECT_ERROR(1, "negative latency_ns", "io '%s'",
                 file_with("i1.csv", "read_bytes,latency_ns\n4096,-1\n"));
    EXPECT_ERROR(1, "column 'lane'", "io '%s'",
                 file_with("i2.csv", "lane,read_bytes,latency_ns\n100000,4096,10\n"));
    EXPECT_ERROR(1, "neither a read_bytes nor a req_bytes", "io '%s'",
                 file_with("i3.csv", "lane,latency_ns\n0,10\n"));
    EXPECT_ERROR(1, "negative wall_ns", "compute '%s'",
                 file_with("p1.csv", "op,wall_ns\nMUL_MAT,-5\n"));
    EXPECT_ERROR(1, "column 'majflt'", "compute '%s'",
                 file_with("p2.csv", "op,wall_ns,majflt\nMUL_MAT,5,x\n"));
}

/* stderr holds no byte a terminal would act on: printable ASCII and newlines. */
static bool stderr_printable(void)
{
    for (const char *c = an_err; *c; c++)
        if (*c != '\n' && (*c < 0x20 || *c >= 0x7f))
            return false;
    return true;
}

/* Escape sequences and bells in a cell, a column name or an argument are
 * quoted as text. */
static void test_control_bytes(void)
{
    EXPECT_ERROR(1, "column 'wall_ms': '\\x1b[31m\\x07' is not a finite number", "csv '%s'",
                 file_with("e1.csv", "step,wall_ms\n1,\x1b[31m\a\n"));
    CHECK_MSG(stderr_printable(), "raw bytes: %s", an_err);
    EXPECT_ERROR(1, "column '\\x1b]0;x\\x07' appears twice", "route '%s'",
                 file_with("e2.csv", "\x1b]0;x\a,\x1b]0;x\a\n1,2\n"));
    CHECK_MSG(stderr_printable(), "raw bytes: %s", an_err);
    EXPECT_ERROR(2, "'--\\x1b[2J' is not an option", "csv '%s' '--\x1b[2J'", an_path("e1.csv"));
    CHECK_MSG(stderr_printable(), "raw bytes: %s", an_err);
    EXPECT_ERROR(1, "e\\x1b[1m.csv", "csv '%s'", an_path("e\x1b[1m.csv"));
    CHECK_MSG(stderr_printable(), "raw bytes: %s", an_err);
}

static void test_wrong_kind(void)
{
    const char *route = file_with("k.route.csv", route_ok);
    const char *csv = file_with("k.csv", csv_ok);
    const char *io = file_with("k.io.csv", io_ok);
    const char *compute = file_with("k.ct.csv", compute_ok);
    EXPECT_ERROR(1, "a route trace, not a per-token metrics CSV (try 'bmoe-analyze route')",
                 "csv '%s'", route);
    EXPECT_ERROR(1, "a per-token metrics CSV, not a route trace (try 'bmoe-analyze csv')",
                 "route '%s'", csv);
    EXPECT_ERROR(1, "an io trace", "compute '%s'", io);
    EXPECT_ERROR(1, "a compute trace, not an io trace", "io '%s'", compute);
    EXPECT_ERROR(1, "no 'layer' column in the header, so not a route trace", "route '%s'",
                 file_with("k.other.csv", "a,b\n1,2\n"));
    /* A preamble that says one kind wins over columns. */
    EXPECT_ERROR(1, "a route trace", "csv '%s'",
                 file_with("k.mixed.csv", "# route_trace v1\nwall_ms\n5\n"));
    /* Every good file passes its own view. */
    CHECK(an_run("route '%s'", route) == 0);
    CHECK(an_run("csv '%s'", csv) == 0);
    CHECK(an_run("io '%s'", io) == 0);
    CHECK(an_run("compute '%s'", compute) == 0);
}

static void test_write_errors(void)
{
    const char *route = file_with("w.route.csv", route_ok);
    const char *csv = file_with("w.csv", csv_ok);
    const char *io = file_with("w.io.csv", io_ok);
    const char *compute = file_with("w.ct.csv", compute_ok);
    const char *runs[][2] = {{"route", route}, {"csv", csv}, {"io", io}, {"compute", compute}};
    for (int i = 0; i < 4; i++) {
        int status = an_run_redirected("> /dev/full", "%s '%s'", runs[i][0], runs[i][1]);
        CHECK_MSG(status == 1, "%s to /dev/full: exit %d", runs[i][0], status);
        CHECK_MSG(strstr(an_err, "write error on standard output") != NULL, "%s", an_err);
    }
    CHECK(an_run_redirected("> /dev/full", "--help") == 1);
}

static int count_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    int count = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp-"))
            count++;
    closedir(d);
    return count;
}

static void test_svg_never_overwrites(void)
{
    const char *csv = file_with("s.csv", csv_ok);
    const char *dir = an_path("svg");
    mkdir(dir, 0755);
    /* A file of someone else's where the plot would go. */
    const char *theirs = an_path("svg/s-tokens.svg");
    an_write(theirs, "<svg>not ours</svg>\n");
    CHECK(an_run("csv '%s' --svg '%s'", csv, dir) == 1);
    CHECK(an_one_line_error() && strstr(an_err, "was not written by bmoe-analyze"));
    char *text = test_read_file(theirs, NULL);
    CHECK(text && strcmp(text, "<svg>not ours</svg>\n") == 0);
    free(text);
    CHECK(count_temporaries(dir) == 0);
    /* A symlink in its place is not followed or replaced either. */
    unlink(theirs);
    const char *elsewhere = an_path("elsewhere.txt");
    an_write(elsewhere, "keep\n");
    CHECK(symlink(elsewhere, theirs) == 0);
    CHECK(an_run("csv '%s' --svg '%s'", csv, dir) == 1);
    text = test_read_file(elsewhere, NULL);
    CHECK(text && strcmp(text, "keep\n") == 0);
    free(text);
    unlink(theirs);
    /* Its own files it replaces. */
    CHECK(an_run("csv '%s' --svg '%s'", csv, dir) == 0);
    CHECK(an_run("csv '%s' --svg '%s'", csv, dir) == 0);
    CHECK(count_temporaries(dir) == 0);
    /* --svg naming a regular file. */
    EXPECT_ERROR(1, "not a directory", "csv '%s' --svg '%s'", csv, elsewhere);
}

/* Inputs that are not regular files are refused before any read, in every
 * view: a FIFO without a writer would block forever (the alarm turns such a
 * hang into a failure), /dev/zero would be read up to the size limit. */
static void test_not_regular_files(void)
{
    const char *fifo = an_path("input.fifo");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    const char *views[] = {"route", "io", "compute", "csv"};
    alarm(60);
    for (int i = 0; i < 4; i++)
        EXPECT_ERROR(1, "not a regular file (a FIFO)", "%s '%s'", views[i], fifo);
    alarm(0);
    EXPECT_ERROR(1, "/dev/zero: not a regular file (a character device)", "csv /dev/zero");
    unlink(fifo);
}

/* --svg names a directory that exists, in both views that plot: a missing
 * one is refused before any report, and not created. */
static void test_svg_missing_dir(void)
{
    const char *route = file_with("m.route.csv", route_ok);
    const char *csv = file_with("m.csv", csv_ok);
    const char *missing = an_path("no-such-dir");
    struct stat st;
    EXPECT_ERROR(1, "--svg", "csv '%s' --svg '%s'", csv, missing);
    CHECK_MSG(strstr(an_err, "No such file or directory"), "%s", an_err);
    CHECK(stat(missing, &st) != 0);
    EXPECT_ERROR(1, "--svg", "route '%s' --svg '%s'", route, missing);
    CHECK_MSG(strstr(an_err, "No such file or directory"), "%s", an_err);
    CHECK(stat(missing, &st) != 0);
}

/* Damaged copies of good files: whatever the damage, the tool exits 0 or
 * 1, never by a signal, and a failure is one line. */
static void test_damaged_inputs(void)
{
    static const char alphabet[] = "0123456789,,,\n\n#-. =eanx";
    const char *sources[][2] = {{"route", route_ok}, {"csv", csv_ok}, {"io", io_ok},
                                {"compute", compute_ok}};
    uint64_t state = 2024;
    int crashes = 0, messy = 0;
    mkdir(an_path("damaged-svg"), 0755);
    for (int round = 0; round < 240; round++) {
        const char *view = sources[round % 4][0], *source = sources[round % 4][1];
        char text[4096];
        size_t length = strlen(source);
        memcpy(text, source, length + 1);
        int edits = 1 + (int)((state = state * 6364136223846793005ull + 1442695040888963407ull) >>
                              60);
        for (int e = 0; e < edits; e++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(state >> 33) % (length ? length : 1);
            char c = alphabet[(state >> 20) % (sizeof alphabet - 1)];
            if ((state >> 10) % 3 == 0 && length > 1) { /* delete */
                memmove(text + at, text + at + 1, length - at);
                length--;
            } else if ((state >> 10) % 3 == 1 && length + 1 < sizeof text) { /* insert */
                memmove(text + at + 1, text + at, length - at + 1);
                text[at] = c;
                length++;
            } else {
                text[at] = c;
            }
        }
        const char *path = file_with("damaged.csv", text);
        bool plots = strcmp(view, "route") == 0 || strcmp(view, "csv") == 0;
        /* Every other route round replays --drop too, which reads the
         * weight column and groups the routings. */
        const char *extra = strcmp(view, "route") == 0 && round % 8 == 4 ? "--drop 0.5,1" : "";
        int status = plots ? an_run("%s '%s' --svg '%s' %s", view, path, an_path("damaged-svg"),
                                    extra)
                           : an_run("%s '%s'", view, path);
        if (status != 0 && status != 1) {
            crashes++;
            fprintf(stderr, "exit %d on damaged %s input:\n%s\n", status, view, text);
        } else if (status == 1 && !an_one_line_error()) {
            messy++;
            fprintf(stderr, "not one error line: %s\n", an_err);
        }
    }
    CHECK_MSG(crashes == 0, "%d crashes", crashes);
    CHECK_MSG(messy == 0, "%d failures without a one-line error", messy);
}

int main(void)
{
    an_setup("analyze_errors");
    test_usage();
    test_bad_files();
    test_bad_numbers();
    test_control_bytes();
    test_wrong_kind();
    test_write_errors();
    test_svg_never_overwrites();
    test_not_regular_files();
    test_svg_missing_dir();
    test_damaged_inputs();
    return test_finish();
}
