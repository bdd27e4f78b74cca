/* Failure paths: syntax errors (with their line), runtime errors, Jinja2's
 * undefined semantics, raise_exception, and every limit a render has
 * (loop iterations, call depth, stack, output size, memory, expression and
 * block nesting, value nesting), the default bounds measured in peak memory.
 * Each must fail with one clear line; none may crash or leak (the ASan
 * build checks the latter). */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chat/chat_model.h"
#include "chat_test_util.h"

static void test_syntax_errors(void)
{
    EXPECT_ERROR("line one\n{% if x %}\n{% endfor %}", NULL, "line 3: Encountered unknown tag 'endfor'");
    EXPECT_ERROR("{% if x %}\n{% endfor %}", NULL, "innermost block that needs to be closed is 'if'");
    EXPECT_ERROR("a\nb\n{{ 1 + }}", NULL, "line 3: unexpected 'end of print statement'");
    EXPECT_ERROR("{% for x in y %}\nbody\n", NULL, "Unexpected end of template");
    EXPECT_ERROR("{% for x in y %}\nbody\n", NULL, "'endfor' or 'else'");
    EXPECT_ERROR("ok\n{# never closed", NULL, "line 2: Missing end of comment tag");
    EXPECT_ERROR("{% raw %}never closed", NULL, "Missing end of raw directive");
    EXPECT_ERROR("\n\n\n{{ 'never closed }}", NULL, "line 4: unexpected char");
    EXPECT_ERROR("{{ (1 }}", NULL, "unexpected '}', expected ')'");
    EXPECT_ERROR("{{ 1) }}", NULL, "unexpected ')'");
    EXPECT_ERROR("{% unknown %}", NULL, "Encountered unknown tag 'unknown'.");
    EXPECT_ERROR("{% endif %}", NULL, "Encountered unknown tag 'endif'.");
    EXPECT_ERROR("{{ }}", NULL, "Expected an expression");
    EXPECT_ERROR("{% break %}", NULL, "'break' outside loop");
    EXPECT_ERROR("{% for i in x %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", NULL, "'continue' outside loop");
    EXPECT_ERROR("{% set true = 1 %}", NULL, "can't assign to 'const'");
    EXPECT_ERROR("{% macro m(a=1, b) %}{% endmacro %}", NULL, "non-default argument follows default argument");
    EXPECT_ERROR("{{ x is defined is defined }}", NULL, "line 1:");
    EXPECT_ERROR("{{ 'x'|no_such_filter }}", NULL, "No filter named 'no_such_filter'.");
    EXPECT_ERROR("{{ x is no_such_test }}", NULL, "No test named 'no_such_test'.");
    EXPECT_ERROR("{% include 'other.jinja' %}", NULL, "'include' tag is not supported");
    EXPECT_ERROR("{{ 99999999999999999999 }}", NULL, "integer literal too large");
    EXPECT_ERROR("{{ '\\N{BULLET}' }}", NULL, "\\N{...}");
    EXPECT_ERROR("{{ a ! b }}", NULL, "unexpected char '!'");
    /* Jinja2 compiles filters inside an if lazily: an unknown one fails only when reached. */
    EXPECT_RENDER("{% if false %}{{ x|from_json }}{% endif %}ok", NULL, "ok");
    EXPECT_ERROR("{% if true %}\n{{ x|from_json }}{% endif %}", NULL, "line 2: No filter named 'from_json'.");
    EXPECT_RENDER("{{ 'a' if true else x|from_json }}", NULL, "a");
}

static void test_runtime_errors(void)
{
    EXPECT_ERROR("a\n\n{{ 'a' + 1 }}", NULL, "line 3: can only concatenate str (not \"int\") to str");
    EXPECT_ERROR("{{ 1 < 'a' }}", NULL, "'<' not supported between instances of 'int' and 'str'");
    EXPECT_ERROR("{{ 10 / 0 }}", NULL, "division by zero");
    EXPECT_ERROR("{{ 10 // 0 }}", NULL, "integer division or modulo by zero");
    EXPECT_ERROR("{{ 'a'() }}", NULL, "'str' object is not callable");
    EXPECT_ERROR("{% for i in 5 %}{% endfor %}", NULL, "'int' object is not iterable");
    EXPECT_ERROR("{% set a, b = [1] %}", NULL, "not enough values to unpack (expected 2, got 1)");
    EXPECT_ERROR("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, "macro 'm' takes not more than 1 argument(s)");
    EXPECT_ERROR("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", NULL, "macro 'm' takes no keyword argument 'b'");
    EXPECT_ERROR("{% set x = {} %}{% set x.y = 1 %}", NULL, "cannot assign attribute on non-namespace object");
    EXPECT_ERROR("{{ range(100001)|length }}", NULL, "Range too big");
    EXPECT_ERROR("{{ {[1]: 2} }}", NULL, "unhashable type: 'list'");
    EXPECT_ERROR("{{ x|tojson }}", "{}", "Object of type Undefined is not JSON serializable");
    /* A NUL in a context string is refused, not cut (as the string would be). */
    EXPECT_ERROR("{{ s|length }}", "{\"s\": \"ab\\u0000cd\"}", "a string holds a NUL (\\u0000) at byte 9");
    EXPECT_ERROR("{{ d|list }}", "{\"d\": {\"k\\u0000x\": 1}}", "NUL");
    EXPECT_RENDER("{{ s }}", "{\"s\": \"ab\\\\u0000cd\"}", "ab\\u0000cd");
    EXPECT_ERROR("{{ namespace()|tojson }}", NULL, "Object of type Namespace is not JSON serializable");
    EXPECT_ERROR("{{ 9223372036854775807 + 1 }}", NULL, "integer overflow");
    EXPECT_ERROR("{{ ''.join([1]) }}", NULL, "sequence item 0: expected str instance, int found");
    EXPECT_ERROR("{{ '%d' % 'x' }}", NULL, "%d format: a real number is required, not str");
    EXPECT_ERROR("{{ 'a'.split('') }}", NULL, "empty separator");
    /* The context belongs to the caller: a template may not change it. */
    EXPECT_ERROR("{% set _ = l.append(2) %}", "{\"l\": [1]}", "belongs to the render's caller");
    EXPECT_RENDER("{% set l = [1] %}{% set _ = l.append(2) %}{{ l }}", NULL, "[1, 2]");
    EXPECT_ERROR("{{ d.update({}) }}", "{\"d\": {}}", "access to attribute 'update' of 'dict' object is unsafe.");
}

static void test_raise_exception(void)
{
    EXPECT_ERROR("{% if true %}\n{{ raise_exception('Bad ' ~ 'roles') }}{% endif %}", NULL, "line 2: Bad roles");
    EXPECT_ERROR("{{ raise_exception('two\nlines') }}", NULL, "line 1: two\\nlines");
    /* A terminal never sees the template's control bytes, only their names. */
    EXPECT_ERROR("{{ raise_exception('\\x1b[31mred\\x07 \\x1b]0;title\\x9c') }}", NULL,
                 "line 1: \\x1b[31mred\\x07 \\x1b]0;title\\xc2\\x9c");
    /* Nor those of a name the message quotes. */
    EXPECT_ERROR("{{ d['\\x1b[2J'].x }}", "{\"d\": {}}", "'\\x1b[2J'");
}

/* Jinja2's default Undefined: printing and iterating work, using it fails. */
static void test_undefined(void)
{
    EXPECT_RENDER("[{{ missing }}][{% for x in missing %}x{% endfor %}][{{ missing|length }}]", NULL, "[][][0]");
    EXPECT_RENDER("{{ missing is defined }} {{ missing is undefined }} {{ missing == missing }} {{ 'a' in missing }}",
                  NULL, "False True True False");
    EXPECT_RENDER("{{ missing ~ 'x' }}|{{ missing|default('d') }}|{{ d.nope }}|{{ d['nope'] }}|{{ [1][3] }}",
                  "{\"d\": {}}", "x|d|||");
    EXPECT_ERROR("{{ missing.attribute }}", NULL, "'missing' is undefined");
    EXPECT_ERROR("{{ missing[0] }}", NULL, "'missing' is undefined");
    EXPECT_ERROR("{{ missing() }}", NULL, "'missing' is undefined");
    EXPECT_ERROR("{{ missing + 1 }}", NULL, "'missing' is undefined");
    EXPECT_ERROR("{{ missing < 1 }}", NULL, "'missing' is undefined");
    EXPECT_ERROR("{{ d.nope.deeper }}", "{\"d\": {}}", "'dict object' has no attribute 'nope'");
    EXPECT_ERROR("{{ (d.nope)|int }}", "{\"d\": {}}", "'dict object' has no attribute 'nope'");
    EXPECT_ERROR("{% macro m(a) %}{{ a + 1 }}{% endmacro %}{{ m() }}", NULL, "parameter 'a' was not provided");
    EXPECT_ERROR("{{ ('x' if false) + 'y' }}", NULL, "evaluated to false and no else section was defined");
    EXPECT_ERROR("{% for x in [1] %}{{ loop.previtem + 1 }}{% endfor %}", NULL, "there is no previous item");
}

static void test_limits(void)
{
    chat_render_options options = chat_render_default_options();
    options.max_loop_iterations = 1000;
    EXPECT_ERROR_WITH(&options, "{% for i in range(100000) %}{% endfor %}", NULL, "more than 1000 loop iterations");
    /* Ranges are capped, but nesting them is not: the total iteration count is. */
    options.max_loop_iterations = 200000;
    EXPECT_ERROR_WITH(&options,
                      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL,
                      "more than 200000 loop iterations");
    EXPECT_ERROR_WITH(&options, "{% for i in range(100000) if i < 0 %}{% endfor %}{% for i in range(100000) %}{% endfor %}{% for i in [1] %}{% endfor %}",
                      NULL, "loop iterations");

    /* Infinite recursion stops at the call depth. */
    EXPECT_ERROR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "maximum call depth of 100 exceeded");
    EXPECT_ERROR("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", NULL, "maximum call depth");
    EXPECT_ERROR("{% macro f() %}{% call f() %}{{ caller() }}{% endcall %}{% endmacro %}{{ f() }}", NULL,
                 "maximum call depth");

    /* And at the stack bound, whichever comes first. */
    options = chat_render_default_options();
    options.max_call_depth = 100000;
    options.max_stack_bytes = 64 * 1024;
    EXPECT_ERROR_WITH(&options, "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL,
                      "template nests too deeply");

    options = chat_render_default_options();
    options.max_output_bytes = 1000;
    EXPECT_ERROR_WITH(&options, "{% for i in range(1000) %}0123456789{% endfor %}", NULL,
                      "output longer than the limit of 1000 bytes");
    EXPECT_ERROR_WITH(&options, "{% macro m() %}{% for i in range(1000) %}0123456789{% endfor %}{% endmacro %}{% set x = m() %}",
                      NULL, "output longer than the limit of 1000 bytes");
    EXPECT_RENDER_WITH(&options, "{% for i in range(100) %}0123456789{% endfor %}", NULL,
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789");

    options = chat_render_default_options();
    options.max_work_bytes = 1 << 20;
    EXPECT_ERROR_WITH(&options,
                      "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      NULL, "work limit of 1048576 bytes");
    EXPECT_ERROR_WITH(&options, "{{ ('x' * 100000000)|length }}", NULL, "work limit");
    EXPECT_ERROR_WITH(&options, "{{ ([1] * 100000000)|length }}", NULL, "work limit");
    /* Scanning costs work without allocating: it counts too. */
    EXPECT_ERROR_WITH(&options,
                      "{% set s = 'x' * 100000 %}{% for i in range(100000) %}{% if 'y' in s %}{% endif %}{% endfor %}",
                      NULL, "work limit");
    EXPECT_ERROR_WITH(&options,
                      "{% set l = range(50000)|list %}{% set m = range(50000)|list %}"
                      "{% for i in range(100000) %}{% if l == m %}{% endif %}{% endfor %}",
                      NULL, "work limit");
    EXPECT_ERROR_WITH(&options, "{% set s = 'é' * 100000 %}{% for i in range(100000) %}{{ s|length }}{% endfor %}", NULL,
                      "work limit");
    /* Searching is linear; what is not (from the right) is charged as quadratic. */
    EXPECT_RENDER("{{ ('a' * 100000 ~ 'b') in ('a' * 200000) }}", NULL, "False");
    EXPECT_ERROR("{{ ('a' * 200000).rfind('a' * 100000 ~ 'b') }}", NULL, "work limit");
    /* A width too big to print is refused, not shrunk. */
    EXPECT_ERROR("{{ '%99999999999999999999999d' % 1 }}", NULL, "work limit");
    EXPECT_ERROR("{{ '%*d' % (9223372036854775807, 1) }}", NULL, "work limit");
    EXPECT_ERROR("{{ '{:>100000000}'.format(1) }}", NULL, "work limit");
    /* Quadratic growth runs out of the budget too, long before time does. */
    EXPECT_ERROR_WITH(&options,
                      "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'abcdefghij' %}{% endfor %}",
                      NULL, "work limit");
}

/* What a run in a child process reports: its message and how much its peak
 * memory grew (the child's own, so that earlier tests do not hide it). */
typedef struct {
    long peak_growth_kib;
    char message[BMOE_ERROR_MAX];
} child_report;

static long peak_kib(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

/* Renders source with the default options. */
static void render_with_defaults(const char *source, child_report *report)
{
    char *out;
    bmoe_error err = {0};
    if (chat_test_render(source, NULL, NULL, &out, &err) == 0)
        snprintf(report->message, sizeof report->message, "rendered %zu bytes", strlen(out));
    else
        snprintf(report->message, sizeof report->message, "%s", err.message);
    free(out);
}

/* Decides the think control of a model whose template is source, as every
 * model load does. */
static void decide_think_control(const char *source, child_report *report)
{
    bmoe_error err = {0};
    chat_template *template_ = chat_template_parse(source, strlen(source), &err);
    chat_model model = {template_, source, strlen(source), "", "", true, false, false};
    enum bmoe_think_control control = chat_think_control_decide(&model, 1795996800);
    snprintf(report->message, sizeof report->message, "think control %d", (int)control);
    chat_template_destroy(template_);
}

static child_report run_in_child(void (*run)(const char *, child_report *), const char *source)
{
    child_report report = {-1, "the child did not report"};
    int pipe_ends[2];
    if (pipe(pipe_ends) != 0)
        return report;
    pid_t pid = fork();
    if (pid == 0) {
        close(pipe_ends[0]);
        child_report mine = {0, ""};
        long before = peak_kib();
        run(source, &mine);
        mine.peak_growth_kib = peak_kib() - before;
        ssize_t written = write(pipe_ends[1], &mine, sizeof mine);
        _exit(written == (ssize_t)sizeof mine ? 0 : 1);
    }
    close(pipe_ends[1]);
    if (pid > 0 && read(pipe_ends[0], &report, sizeof report) != (ssize_t)sizeof report)
        report.peak_growth_kib = -1;
    close(pipe_ends[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return report;
}

/* Small templates that cost seconds and most of a gigabyte under a budget of
 * 1 GiB, or ran for seconds uncharged, now stop at the default budget of
 * work (64 MiB), which also bounds the memory they reach. */
static void test_default_bounds(void)
{
    static const char *const hostile[] = {
        /* string doubling */
        "{% set s = namespace(v='x') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v }}",
        /* a self-calling macro */
        "{% macro f(n) %}{{ f(n - 1) ~ f(n - 1) if n > 0 else 'x' }}{% endmacro %}{{ f(40)|length }}",
        /* one huge padding, one huge repetition */
        "{{ ''|center(10**9)|length }}",
        "{{ ('x' * 500000000)|length }}",
        /* evaluation that allocates nothing: 4.8 million iterations of arithmetic */
        ("{% for i in range(2000) %}{% for j in range(2400) %}{% if i * j + i - j * 2 > i and i * 3 < 5 or "
         "j % 7 == 3 and (i + j + i + j + i + j) > 4 %}{% endif %}{% endfor %}{% endfor %}"),
        /* hashing a long key again and again */
        "{% set s = 'x' * 1000000 %}{% for i in range(3000) %}{{ {s: 1}|length }}{% endfor %}",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        child_report report = run_in_child(render_with_defaults, hostile[i]);
        CHECK_MSG(strstr(report.message, "exceeds its work limit of 67108864 bytes"), "template %zu: %s", i,
                  report.message);
        CHECK_MSG(report.peak_growth_kib >= 0 && report.peak_growth_kib < 192 * 1024,
                  "template %zu: peak memory grew by %ld KiB", i, report.peak_growth_kib);
    }
    /* A model load decides its think control by rendering its template three
     * times: a template like these costs it little. */
    child_report report = run_in_child(decide_think_control, hostile[0]);
    CHECK_MSG(strcmp(report.message, "think control 0") == 0, "%s", report.message);
    CHECK_MSG(report.peak_growth_kib >= 0 && report.peak_growth_kib < 32 * 1024, "peak memory grew by %ld KiB",
              report.peak_growth_kib);
}

static void test_nesting(void)
{
    char source[4096];
    /* Brackets nested past the parser's bound. */
    size_t length = 0;
    length += (size_t)snprintf(source + length, sizeof source - length, "{{ ");
    for (int i = 0; i < 150; i++)
        source[length++] = '(';
    source[length++] = '1';
    for (int i = 0; i < 150; i++)
        source[length++] = ')';
    snprintf(source + length, sizeof source - length, " }}");
    EXPECT_ERROR(source, NULL, "expression nested too deeply");
    /* A long flat chain makes a deep tree without any bracket. */
    length = (size_t)snprintf(source, sizeof source, "{{ 1");
    for (int i = 0; i < 300; i++)
        length += (size_t)snprintf(source + length, sizeof source - length, " + 1");
    snprintf(source + length, sizeof source - length, " }}");
    EXPECT_ERROR(source, NULL, "expression nested too deeply");
    length = 0;
    for (int i = 0; i < 150; i++)
        length += (size_t)snprintf(source + length, sizeof source - length, "{%% if true %%}");
    EXPECT_ERROR(source, NULL, "nested too deeply");
    length = (size_t)snprintf(source, sizeof source, "{{ ");
    for (int i = 0; i < 150; i++)
        length += (size_t)snprintf(source + length, sizeof source - length, "not ");
    snprintf(source + length, sizeof source - length, "1 }}");
    EXPECT_ERROR(source, NULL, "nested too deeply");

    /* Values nested deeper than any walk allows: printing and tojson fail, freeing does not. */
    const char *deep = "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}";
    char template_[512];
    snprintf(template_, sizeof template_, "%s{{ ns.x }}", deep);
    EXPECT_ERROR(template_, NULL, "value nested too deeply");
    snprintf(template_, sizeof template_, "%s{{ ns.x|tojson }}", deep);
    EXPECT_ERROR(template_, NULL, "value nested too deeply");
    snprintf(template_, sizeof template_, "%s{{ ns.x == ns.x }}", deep);
    EXPECT_ERROR(template_, NULL, "value nested too deeply");
    EXPECT_RENDER("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}done",
                  NULL, "done");
    /* Reference cycles are freed when the render ends (ASan's leak check watches). */
    EXPECT_RENDER("{% set ns = namespace() %}{% set ns.self = ns %}{% set l = [ns] %}{% set _ = l.append(l) %}cycle", NULL,
                  "cycle");
    EXPECT_ERROR("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}", NULL, "value nested too deeply");
}

int main(void)
{
    test_syntax_errors();
    test_runtime_errors();
    test_raise_exception();
    test_undefined();
    test_limits();
    test_default_bounds();
    test_nesting();
    return test_finish();
}
