/* The CSV reader: a whole file read into memory and cut in place into
 * cells. Lines starting with '#' are comments (the preamble before the
 * header, trailers such as "# summary" after it); the first other non-blank
 * line is the header, and every later one is a row with exactly as many
 * fields as the header. No quoting: the contract's files have none. Cells
 * stay text until a view asks for a column by name, so a column the view
 * does not read is never judged. Also tells the contract's file kinds apart. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "base/file.h"

/* Regular files only, opened without blocking (file_open_regular): a FIFO
 * would hang the read and a device such as /dev/zero would be read up to
 * the size limit before being refused. */
static int read_whole(const char *path, char **data_out, size_t *size_out)
{
    bmoe_error err = {0};
    uint64_t file_size;
    int fd = file_open_regular(path, &file_size, &err);
    if (fd < 0) {
        analyze_error("%s", err.message);
        return -1;
    }
    if (file_size > TABLE_MAX_BYTES) {
        analyze_error("%s: larger than %zu MiB, refused", path, TABLE_MAX_BYTES >> 20);
        close(fd);
        return -1;
    }
    /* The size read may differ from the size seen (a file still being
     * written): read until the end, never past the limit. */
    size_t capacity = (size_t)file_size + 1, size = 0;
    char *data = malloc(capacity + 1);
    int status = data ? 0 : -1;
    if (!data)
        analyze_error("%s: out of memory", path);
    while (status == 0) {
        if (size == capacity) {
            if (capacity >= TABLE_MAX_BYTES) {
                analyze_error("%s: larger than %zu MiB, refused", path, TABLE_MAX_BYTES >> 20);
                status = -1;
                break;
            }
            capacity = capacity * 2 < TABLE_MAX_BYTES ? capacity * 2 : TABLE_MAX_BYTES;
            char *grown = realloc(data, capacity + 1);
            if (!grown) {
                analyze_error("%s: out of memory", path);
                status = -1;
                break;
            }
            data = grown;
        }
        ssize_t got = read(fd, data + size, capacity - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            analyze_error("%s: read error: %s", path, strerror(errno));
            status = -1;
        }
        if (got <= 0)
            break;
        size += (size_t)got;
    }
    close(fd);
    if (status != 0) {
        free(data);
        return -1;
    }
    data[size] = '\0';
    *data_out = data;
    *size_out = size;
    return 0;
}

static char *trim(char *text)
{
    while (*text == ' ' || *text == '\t')
        text++;
    char *end = text + strlen(text);
    while (end > text && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    return text;
}

static int count_fields(const char *line)
{
    int fields = 1;
    for (; *line; line++)
        if (*line == ',')
            fields++;
    return fields;
}

/* Cuts LINE at its commas into cells[0 .. n). */
static void split_fields(char *line, char **cells, int n)
{
    for (int i = 0; i < n; i++) {
        char *comma = strchr(line, ',');
        if (comma)
            *comma = '\0';
        cells[i] = trim(line);
        line = comma ? comma + 1 : line + strlen(line);
    }
}

static int grow(void **array, size_t *capacity, size_t needed, size_t element)
{
    if (needed <= *capacity)
        return 0;
    size_t next = *capacity ? *capacity : 64;
    while (next < needed)
        next *= 2;
    void *grown = realloc(*array, next * element);
    if (!grown)
        return -1;
    *array = grown;
    *capacity = next;
    return 0;
}

int table_read(table *t, const char *path)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    size_t size;
    if (read_whole(path, &t->data, &size) != 0)
        return -1;
    if (memchr(t->data, '\0', size)) {
        analyze_error("%s: binary data (a NUL byte), not a CSV file", path);
        table_free(t);
        return -1;
    }
    size_t comment_capacity = 0, cell_capacity = 0, row_capacity = 0;
    char *line = t->data;
    int line_number = 0;
    while (*line) {
        line_number++;
        char *newline = strchr(line, '\n');
        if (newline)
            *newline = '\0';
        char *next = newline ? newline + 1 : line + strlen(line);
        char *text = trim(line);
        if (*text == '#') {
            text++;
            while (*text == ' ' || *text == '\t')
                text++;
            if (grow((void **)&t->comments, &comment_capacity, t->n_comments + 1,
                     sizeof *t->comments) != 0)
                goto out_of_memory;
            t->comments[t->n_comments++] =
                (table_comment){.text = text, .after_rows = t->n_rows, .line = line_number};
            if (!t->header)
                t->n_preamble = t->n_comments;
        } else if (*text) {
            int fields = count_fields(text);
            if (!t->header) {
                if (fields > TABLE_MAX_COLUMNS) {
                    analyze_error("%s:%d: %d columns in the header (at most %d)", path,
                                  line_number, fields, TABLE_MAX_COLUMNS);
                    goto fail;
                }
                t->header = malloc((size_t)fields * sizeof *t->header);
                if (!t->header)
                    goto out_of_memory;
                t->n_columns = fields;
                split_fields(text, t->header, fields);
                for (int i = 0; i < fields; i++) {
                    if (!*t->header[i]) {
                        analyze_error("%s:%d: column %d of the header has no name", path,
                                      line_number, i + 1);
                        goto fail;
                    }
                    for (int j = 0; j < i; j++)
                        if (strcmp(t->header[i], t->header[j]) == 0) {
                            analyze_error("%s:%d: column '%s' appears twice in the header", path,
                                          line_number, t->header[i]);
                            goto fail;
                        }
                }
            } else {
                if (fields != t->n_columns) {
                    analyze_error("%s:%d: %d fields, the header has %d", path, line_number,
                                  fields, t->n_columns);
                    goto fail;
                }
                size_t cells_needed = (t->n_rows + 1) * (size_t)t->n_columns;
                if (grow((void **)&t->cells, &cell_capacity, cells_needed, sizeof *t->cells) != 0 ||
                    grow((void **)&t->row_line, &row_capacity, t->n_rows + 1, sizeof *t->row_line))
                    goto out_of_memory;
                split_fields(text, t->cells + t->n_rows * (size_t)t->n_columns, fields);
                t->row_line[t->n_rows++] = line_number;
            }
        }
        line = next;
    }
    if (!t->header) {
        analyze_error("%s: no header row (the file is empty or only comments)", path);
        goto fail;
    }
    return 0;
out_of_memory:
    analyze_error("%s: out of memory", path);
fail:
    table_free(t);
    return -1;
}

void table_free(table *t)
{
    free(t->data);
    free(t->comments);
    free(t->header);
    free(t->cells);
    free(t->row_line);
    const char *path = t->path;
    memset(t, 0, sizeof *t);
    t->path = path;
}

int table_column(const table *t, const char *name)
{
    for (int i = 0; i < t->n_columns; i++)
        if (strcmp(t->header[i], name) == 0)
            return i;
    return -1;
}

int table_number(const table *t, size_t row, int column, double *out)
{
    const char *text = table_cell(t, row, column);
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (!*text || *end || !isfinite(value)) {
        analyze_error("%s:%d: column '%s': '%.40s' is not a finite number", t->path,
                      t->row_line[row], t->header[column], text);
        return -1;
    }
    *out = value;
    return 0;
}

int table_integer(const table *t, size_t row, int column, int64_t min, int64_t max, int64_t *out)
{
    const char *text = table_cell(t, row, column);
    char *end;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (!*text || *end || errno == ERANGE || value < min || value > max) {
        analyze_error("%s:%d: column '%s': '%.40s' is not an integer in [%lld, %lld]", t->path,
                      t->row_line[row], t->header[column], text, (long long)min, (long long)max);
        return -1;
    }
    *out = value;
    return 0;
}

const char *comment_value(const char *text, const char *key, char *buffer, size_t size)
{
    size_t key_length = strlen(key);
    const char *p = text;
    while (*p) {
        while (*p && isspace((unsigned char)*p))
            p++;
        const char *word = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if ((size_t)(p - word) > key_length && strncmp(word, key, key_length) == 0 &&
            word[key_length] == '=') {
            size_t length = (size_t)(p - word) - key_length - 1;
            if (length >= size)
                length = size - 1;
            memcpy(buffer, word + key_length + 1, length);
            buffer[length] = '\0';
            return buffer;
        }
    }
    return NULL;
}

const char *table_meta(const table *t, const char *key, char *buffer, size_t size)
{
    for (size_t i = 0; i < t->n_preamble; i++)
        if (comment_value(t->comments[i].text, key, buffer, size))
            return buffer;
    return NULL;
}

static const struct {
    enum table_kind kind;
    const char *name;         /* with its article, for messages */
    const char *magic;        /* first preamble line */
    const char *required[3];  /* columns a file without the preamble must have */
    const char *command;
} kinds[] = {
    {KIND_METRICS, "a per-token metrics CSV", "bmoe_metrics", {"wall_ms"}, "csv"},
    {KIND_ROUTE, "a route trace", "route_trace", {"layer", "expert"}, "route"},
    {KIND_IO, "an io trace", "io_trace", {"latency_ns"}, "io"},
    {KIND_COMPUTE, "a compute trace", "compute_trace", {"wall_ns", "op"}, "compute"},
};

static bool has_columns(const table *t, int index)
{
    for (int i = 0; i < 3 && kinds[index].required[i]; i++)
        if (table_column(t, kinds[index].required[i]) < 0)
            return false;
    return true;
}

/* The kind named by the preamble's first line ("route_trace v1"), if any. */
static enum table_kind magic_kind(const table *t)
{
    if (t->n_preamble == 0)
        return KIND_UNKNOWN;
    const char *text = t->comments[0].text;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t length = strlen(kinds[i].magic);
        if (strncmp(text, kinds[i].magic, length) == 0 &&
            (text[length] == '\0' || isspace((unsigned char)text[length])))
            return kinds[i].kind;
    }
    return KIND_UNKNOWN;
}

enum table_kind table_kind_of(const table *t)
{
    enum table_kind kind = magic_kind(t);
    if (kind != KIND_UNKNOWN)
        return kind;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (has_columns(t, (int)i))
            return kinds[i].kind;
    return KIND_UNKNOWN;
}

int table_expect_kind(const table *t, enum table_kind kind)
{
    int index = 0;
    while (kinds[index].kind != kind)
        index++;
    enum table_kind found = table_kind_of(t);
    if (found != kind && found != KIND_UNKNOWN) {
        int other = 0;
        while (kinds[other].kind != found)
            other++;
        analyze_error("%s: %s, not %s (try 'bmoe-analyze %s')", t->path, kinds[other].name,
                      kinds[index].name, kinds[other].command);
        return -1;
    }
    for (int i = 0; i < 3 && kinds[index].required[i]; i++)
        if (table_column(t, kinds[index].required[i]) < 0) {
            analyze_error("%s: no '%s' column in the header, so not %s", t->path,
                          kinds[index].required[i], kinds[index].name);
            return -1;
        }
    return 0;
}
