/* The telemetry files of tm_files.h. */
#include "tm_files.h"

#include <string.h>

int tm_files_open(tm_files *files, const tm_file_paths *paths, const char **flag, bmoe_error *error)
{
    memset(files, 0, sizeof *files);
    *flag = NULL;
    if (paths->csv) {
        if (tm_csv_open(&files->csv, paths->csv, error) != 0) {
            *flag = "--csv";
            goto failed;
        }
        files->csv_on = true;
    }
    if (paths->route_trace) {
        if (tm_route_trace_open(&files->route, paths->route_trace, error) != 0) {
            *flag = "--route-trace";
            goto failed;
        }
        files->route_on = true;
    }
    if (paths->io_trace) {
        if (tm_io_trace_open(&files->io, paths->io_trace, error) != 0) {
            *flag = "--io-trace";
            goto failed;
        }
        files->io_on = true;
    }
    if (paths->compute_trace) {
        if (tm_compute_trace_open(&files->nodes, paths->compute_trace, error) != 0) {
            *flag = "--compute-trace";
            goto failed;
        }
        files->nodes_on = true;
    }
    if (paths->compute_trace_layers) {
        if (tm_compute_trace_open(&files->layers, paths->compute_trace_layers, error) != 0) {
            *flag = "--compute-trace-layers";
            goto failed;
        }
        files->layers_on = true;
    }
    return 0;
failed:
    tm_files_discard(files);
    return -1;
}

unsigned tm_files_drop_streamed_traces(tm_files *files)
{
    unsigned dropped = 0;
    if (files->route_on) {
        tm_route_trace_discard(&files->route);
        files->route_on = false;
        dropped |= 1u;
    }
    if (files->io_on) {
        tm_io_trace_discard(&files->io);
        files->io_on = false;
        dropped |= 2u;
    }
    return dropped;
}

/* Both compute traces from one callback. */
static void on_trace_both(void *user, const bmoe_trace_event *event)
{
    tm_files *files = user;
    tm_compute_trace_on_event(&files->nodes, event);
    tm_compute_trace_on_event(&files->layers, event);
}

void tm_files_context_params(tm_files *files, bmoe_context_params *params)
{
    if (files->route_on) {
        params->route_callback = tm_route_trace_on_route;
        params->route_user = &files->route;
    }
    if (files->io_on) {
        params->io_callback = tm_io_trace_on_read;
        params->io_user = &files->io;
    }
    params->trace_ops = files->nodes_on;
    if (files->nodes_on && files->layers_on) {
        params->trace_callback = on_trace_both;
        params->trace_user = files;
    } else if (files->nodes_on || files->layers_on) {
        params->trace_callback = tm_compute_trace_on_event;
        params->trace_user = files->nodes_on ? &files->nodes : &files->layers;
    }
}

void tm_files_fill_config(const tm_files *files, tm_config *config)
{
    config->route_trace = files->route_on;
    config->io_trace = files->io_on;
    config->compute_trace = files->nodes_on;
    config->compute_trace_layers = files->layers_on;
}

void tm_files_begin(tm_files *files, const tm_config *config, const tm_layout *layout)
{
    if (files->begun)
        return;
    files->begun = true;
    if (files->csv_on)
        tm_csv_begin(&files->csv, config);
    if (files->route_on)
        tm_route_trace_begin(&files->route, config, layout);
    if (files->io_on)
        tm_io_trace_begin(&files->io, config);
    if (files->nodes_on)
        tm_compute_trace_begin(&files->nodes, config, false);
    if (files->layers_on)
        tm_compute_trace_begin(&files->layers, config, true);
}

void tm_files_stamp(tm_files *files, int32_t turn, int32_t phase, int32_t step)
{
    tm_stamp stamp = {turn, phase, step};
    if (files->route_on)
        files->route.stamp = stamp;
    if (files->io_on)
        files->io.stamp = stamp;
    if (files->nodes_on)
        tm_compute_trace_set_stamp(&files->nodes, &stamp);
    if (files->layers_on)
        tm_compute_trace_set_stamp(&files->layers, &stamp);
}

void tm_files_after_eval(tm_files *files)
{
    if (files->route_on)
        tm_route_trace_flush(&files->route);
    if (files->io_on)
        tm_io_trace_flush(&files->io);
    if (files->nodes_on)
        tm_compute_trace_flush(&files->nodes);
    if (files->layers_on)
        tm_compute_trace_flush(&files->layers);
}

/* Keeps the first failure. */
static void note_failure(int status, const char *which, const char **flag, bmoe_error *kept, const bmoe_error *now)
{
    if (status != 0 && !*flag) {
        *flag = which;
        *kept = *now;
    }
}

int tm_files_commit(tm_files *files, const char **flag, bmoe_error *error)
{
    *flag = NULL;
    bmoe_error now = {0};
    if (files->csv_on)
        note_failure(tm_csv_commit(&files->csv, &now), "--csv", flag, error, &now);
    if (files->route_on)
        note_failure(tm_route_trace_commit(&files->route, &now), "--route-trace", flag, error, &now);
    if (files->io_on)
        note_failure(tm_io_trace_commit(&files->io, &now), "--io-trace", flag, error, &now);
    if (files->nodes_on)
        note_failure(tm_compute_trace_commit(&files->nodes, &now), "--compute-trace", flag, error, &now);
    if (files->layers_on)
        note_failure(tm_compute_trace_commit(&files->layers, &now), "--compute-trace-layers", flag, error, &now);
    files->csv_on = files->route_on = files->io_on = files->nodes_on = files->layers_on = false;
    return *flag ? -1 : 0;
}

void tm_files_discard(tm_files *files)
{
    if (files->csv_on)
        tm_csv_discard(&files->csv);
    if (files->route_on)
        tm_route_trace_discard(&files->route);
    if (files->io_on)
        tm_io_trace_discard(&files->io);
    if (files->nodes_on)
        tm_compute_trace_discard(&files->nodes);
    if (files->layers_on)
        tm_compute_trace_discard(&files->layers);
    files->csv_on = files->route_on = files->io_on = files->nodes_on = files->layers_on = false;
}
