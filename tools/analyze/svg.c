/* The SVG writer: plain hand-written SVG 1.1 a browser opens as it is, with
 * a few drawing calls and a plot frame with round-valued ticks. A file is
 * written to a temporary name beside its target and only then published,
 * by link() where the target does not exist (so nothing is ever replaced by
 * accident) or by rename() over a file this tool wrote before (recognised by
 * its marker comment). Any other existing file is left alone. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze.h"

#define SVG_MARKER "<!-- written by bmoe-analyze -->"

static char *join_path(const char *dir, const char *name)
{
    size_t length = strlen(dir) + strlen(name) + 2;
    char *path = malloc(length);
    if (path)
        snprintf(path, length, "%s/%s", dir, name);
    return path;
}

/* True when PATH starts with our marker (so it is ours to replace). */
static bool written_by_us(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    FILE *file = fopen(path, "rb");
    if (!file)
        return false;
    char head[256];
    size_t got = fread(head, 1, sizeof head - 1, file);
    fclose(file);
    head[got] = '\0';
    return strstr(head, SVG_MARKER) != NULL;
}

/* A directory that is not there is refused, not created: a mistyped path
 * would otherwise leave a directory anywhere (at the root, say). */
int svg_check_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        analyze_error("--svg %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        analyze_error("--svg %s: not a directory", dir);
        return -1;
    }
    return 0;
}

int svg_begin(svg *s, const char *dir, const char *name, int width, int height, const char *title)
{
    memset(s, 0, sizeof *s);
    if (svg_check_dir(dir) != 0)
        return -1;
    struct stat st;
    s->path = join_path(dir, name);
    size_t length = strlen(dir) + strlen(name) + 40;
    s->temp_path = malloc(length);
    if (!s->path || !s->temp_path) {
        analyze_error("out of memory");
        free(s->path);
        free(s->temp_path);
        return -1;
    }
    if (lstat(s->path, &st) == 0 && !written_by_us(s->path)) {
        analyze_error("%s exists and was not written by bmoe-analyze; not overwritten", s->path);
        goto fail;
    }
    snprintf(s->temp_path, length, "%s/.%s.tmp-%ld", dir, name, (long)getpid());
    int fd = open(s->temp_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        analyze_error("%s: %s", s->temp_path, strerror(errno));
        goto fail;
    }
    s->file = fdopen(fd, "w");
    if (!s->file) {
        analyze_error("%s: %s", s->temp_path, strerror(errno));
        close(fd);
        unlink(s->temp_path);
        goto fail;
    }
    svg_printf(s,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" SVG_MARKER "\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
               "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
               width, height, width, height, width, height);
    svg_text(s, width / 2.0, 22, "middle", 15, "%s", title);
    return 0;
fail:
    free(s->path);
    free(s->temp_path);
    s->path = s->temp_path = NULL;
    return -1;
}

int svg_end(svg *s)
{
    svg_printf(s, "</svg>\n");
    int status = 0;
    if (s->failed || fflush(s->file) != 0 || ferror(s->file)) {
        analyze_error("%s: write error: %s", s->temp_path, strerror(errno));
        status = -1;
    }
    if (fclose(s->file) != 0 && status == 0) {
        analyze_error("%s: write error: %s", s->temp_path, strerror(errno));
        status = -1;
    }
    if (status == 0) {
        struct stat st;
        if (link(s->temp_path, s->path) == 0) {
            unlink(s->temp_path);
        } else if ((errno == EEXIST || lstat(s->path, &st) == 0) && !written_by_us(s->path)) {
            /* Checked again: the target may have appeared since svg_begin. */
            analyze_error("%s exists and was not written by bmoe-analyze; not overwritten",
                          s->path);
            status = -1;
        } else if (rename(s->temp_path, s->path) != 0) {
            /* Ours to replace, or a file system without hard links. */
            analyze_error("%s: %s", s->path, strerror(errno));
            status = -1;
        }
    }
    if (status != 0)
        unlink(s->temp_path);
    free(s->path);
    free(s->temp_path);
    memset(s, 0, sizeof *s);
    return status;
}

void svg_printf(svg *s, const char *fmt, ...)
{
    va_list list;
    va_start(list, fmt);
    if (vfprintf(s->file, fmt, list) < 0)
        s->failed = true;
    va_end(list);
}

/* Text with &, < and > escaped. */
static void put_escaped(svg *s, const char *text)
{
    for (; *text; text++) {
        int status;
        switch (*text) {
        case '&':
            status = fputs("&amp;", s->file);
            break;
        case '<':
            status = fputs("&lt;", s->file);
            break;
        case '>':
            status = fputs("&gt;", s->file);
            break;
        default:
            status = fputc((unsigned char)*text, s->file);
        }
        if (status == EOF)
            s->failed = true;
    }
}

void svg_text(svg *s, double x, double y, const char *anchor, int size, const char *fmt, ...)
{
    char text[512];
    va_list list;
    va_start(list, fmt);
    vsnprintf(text, sizeof text, fmt, list);
    va_end(list);
    svg_printf(s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\">", x, y, anchor,
               size);
    put_escaped(s, text);
    svg_printf(s, "</text>\n");
}

void svg_rect(svg *s, double x, double y, double width, double height, const char *fill)
{
    if (width <= 0 || height <= 0)
        return;
    svg_printf(s, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x, y,
               width, height, fill);
}

void svg_line(svg *s, double x1, double y1, double x2, double y2, const char *stroke,
              double stroke_width, bool dashed)
{
    svg_printf(s,
               "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
               "stroke-width=\"%.2f\"%s/>\n",
               x1, y1, x2, y2, stroke, stroke_width, dashed ? " stroke-dasharray=\"5,4\"" : "");
}

double svg_x(const svg_plot *plot, double x)
{
    double span = plot->x_max - plot->x_min;
    return plot->left + (span > 0 ? (x - plot->x_min) / span : 0.5) * plot->width;
}

double svg_y(const svg_plot *plot, double y)
{
    double span = plot->y_max - plot->y_min;
    double fraction = span > 0 ? (y - plot->y_min) / span : 0.5;
    if (fraction < 0)
        fraction = 0;
    if (fraction > 1)
        fraction = 1;
    return plot->top + plot->height * (1 - fraction);
}

void svg_polyline(svg *s, const svg_plot *plot, const double *x, const double *y, size_t n,
                  const char *stroke, bool markers)
{
    svg_printf(s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", stroke);
    for (size_t i = 0; i < n; i++)
        svg_printf(s, "%s%.2f,%.2f", i ? " " : "", svg_x(plot, x[i]), svg_y(plot, y[i]));
    svg_printf(s, "\"/>\n");
    if (markers)
        for (size_t i = 0; i < n; i++)
            svg_printf(s, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n",
                       svg_x(plot, x[i]), svg_y(plot, y[i]), stroke);
}

/* A round tick step giving about TARGET intervals over SPAN: 1, 2 or 5 x 10^k. */
static double tick_step(double span, int target)
{
    if (!(span > 0))
        return 1;
    double raw = span / target, magnitude = pow(10, floor(log10(raw)));
    double fraction = raw / magnitude;
    return magnitude * (fraction < 1.5 ? 1 : fraction < 3.5 ? 2 : fraction < 7.5 ? 5 : 10);
}

static void format_tick(char *buffer, size_t size, double value)
{
    if (fabs(value) >= 1e6)
        snprintf(buffer, size, "%.3g", value);
    else
        snprintf(buffer, size, "%g", fabs(value) < 1e-9 ? 0.0 : value);
}

void svg_axes(svg *s, const svg_plot *plot, const char *x_title, const char *y_title)
{
    double bottom = plot->top + plot->height, right = plot->left + plot->width;
    char label[64];
    double y_step = tick_step(plot->y_max - plot->y_min, 5);
    int ticks = 0; /* bounded: a step lost in a huge value's rounding cannot loop */
    for (double y = ceil(plot->y_min / y_step) * y_step;
         y <= plot->y_max + y_step * 1e-9 && ticks < 50; y += y_step, ticks++) {
        double py = svg_y(plot, y);
        svg_line(s, plot->left, py, right, py, "#e4e4e4", 1, false);
        format_tick(label, sizeof label, y);
        svg_text(s, plot->left - 6, py + 4, "end", 11, "%s", label);
    }
    if (!plot->x_labels_by_caller) {
        double x_step = tick_step(plot->x_max - plot->x_min, 8);
        ticks = 0;
        for (double x = ceil(plot->x_min / x_step) * x_step;
             x <= plot->x_max + x_step * 1e-9 && ticks < 50; x += x_step, ticks++) {
            double px = svg_x(plot, x);
            svg_line(s, px, bottom, px, bottom + 5, "#333", 1, false);
            format_tick(label, sizeof label, x);
            svg_text(s, px, bottom + 18, "middle", 11, "%s", label);
        }
    }
    svg_printf(s,
               "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
               "stroke=\"#333\"/>\n",
               plot->left, plot->top, plot->width, plot->height);
    svg_text(s, plot->left + plot->width / 2, bottom + 38, "middle", 12, "%s", x_title);
    double cy = plot->top + plot->height / 2, cx = plot->left - 48;
    svg_printf(s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
                  "transform=\"rotate(-90 %.1f %.1f)\">",
               cx, cy, cx, cy);
    put_escaped(s, y_title);
    svg_printf(s, "</text>\n");
}

void svg_legend(svg *s, double x, double y, const char *const *labels, const char *const *colors,
                int n)
{
    size_t longest = 0;
    for (int i = 0; i < n; i++)
        longest = strlen(labels[i]) > longest ? strlen(labels[i]) : longest;
    svg_printf(s,
               "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"white\" "
               "fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n",
               x - 6, y - 6, 30 + 6.5 * (double)longest, n * 18 + 8);
    for (int i = 0; i < n; i++) {
        svg_rect(s, x, y + i * 18, 12, 12, colors[i]);
        svg_text(s, x + 18, y + i * 18 + 10, "start", 12, "%s", labels[i]);
    }
}

void svg_name_for(const char *input_path, const char *suffix, char *buffer, size_t size)
{
    const char *base = strrchr(input_path, '/');
    base = base ? base + 1 : input_path;
    size_t length = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        length = (size_t)(dot - base);
    if (length == 0) {
        base = "trace";
        length = 5;
    }
    snprintf(buffer, size, "%.*s%s", (int)length, base, suffix);
}
