/* How bmoe-cli ends on a signal without leaving a temporary output file
 * behind. SIGINT, SIGTERM and SIGHUP only record that the run must stop:
 * the contexts' abort callback returns it (the evaluation ends at its next
 * micro-batch, layer or token), a session hears it through a pipe, and a
 * blocked write to standard output is interrupted (the handlers do not ask
 * for restarted calls); the job then unwinds through its error path, which
 * discards every output it opened, and the process ends by the same signal.
 * In a conversation SIGINT only interrupts: it writes a byte to a pipe
 * the conversation reads (the answer stops, the chat goes on).
 * SIGPIPE and SIGXFSZ are ignored, so that a closed standard output or a
 * file-size limit is a failed write, reported in one line, not a death
 * that leaves debris. The library keeps no such state: this is the one
 * place that does, for the process. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cli.h"

/* The handler reads and writes these: lock-free, so signal-safe. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop signal is set from a signal handler");

static const int cli_stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

static atomic_int cli_stop_received;           /* the first stop signal, 0: none */
static atomic_int cli_stop_pipe_write = -1;    /* -1 until a session asks */
static atomic_int cli_interrupt_pipe_write = -1; /* -1 until a conversation asks: then SIGINT interrupts */

static void cli_on_stop(int signal_number)
{
    int saved = errno;
    int interrupt = signal_number == SIGINT ? atomic_load(&cli_interrupt_pipe_write) : -1;
    if (interrupt >= 0) {
        char byte = 1;
        ssize_t ignored = write(interrupt, &byte, 1);
        (void)ignored;
        errno = saved;
        return;
    }
    int none = 0;
    atomic_compare_exchange_strong(&cli_stop_received, &none, signal_number);
    int fd = atomic_load(&cli_stop_pipe_write);
    if (fd >= 0) {
        char byte = 1;
        ssize_t ignored = write(fd, &byte, 1); /* full: a byte is already waiting */
        (void)ignored;
    }
    errno = saved;
}

void cli_signals_install(void)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    struct sigaction action;
    action.sa_handler = cli_on_stop;
    action.sa_flags = 0; /* no SA_RESTART: a write blocked on a full pipe returns */
    sigemptyset(&action.sa_mask);
    size_t count = sizeof cli_stop_signals / sizeof cli_stop_signals[0];
    for (size_t i = 0; i < count; i++)
        sigaddset(&action.sa_mask, cli_stop_signals[i]);
    for (size_t i = 0; i < count; i++) {
        struct sigaction previous;
        /* a signal the caller ignores (nohup, a background job) stays ignored */
        if (sigaction(cli_stop_signals[i], NULL, &previous) == 0 && previous.sa_handler == SIG_IGN)
            continue;
        sigaction(cli_stop_signals[i], &action, NULL);
    }
}

bool cli_stop_requested(void *user)
{
    (void)user;
    return atomic_load(&cli_stop_received) != 0;
}

int cli_stop_descriptor(void)
{
    int ends[2];
    if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) {
        /* a session that cannot hear a stop must still die of one */
        for (size_t i = 0; i < sizeof cli_stop_signals / sizeof cli_stop_signals[0]; i++) {
            struct sigaction current;
            if (sigaction(cli_stop_signals[i], NULL, &current) == 0 && current.sa_handler == cli_on_stop)
                signal(cli_stop_signals[i], SIG_DFL);
        }
        return -1;
    }
    atomic_store(&cli_stop_pipe_write, ends[1]);
    /* a signal that came before the pipe existed */
    if (cli_stop_requested(NULL)) {
        char byte = 1;
        ssize_t ignored = write(ends[1], &byte, 1);
        (void)ignored;
    }
    return ends[0];
}

int cli_interrupt_descriptor(void)
{
    int ends[2];
    if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1; /* SIGINT then stops the run, as everywhere else */
    atomic_store(&cli_interrupt_pipe_write, ends[1]);
    return ends[0];
}

int cli_signals_exit(int status)
{
    int signal_number = atomic_load(&cli_stop_received);
    if (signal_number == 0)
        return status;
    fprintf(stderr, "bmoe-cli: stopped by %s\n", signal_number == SIGINT    ? "SIGINT"
                                                 : signal_number == SIGTERM ? "SIGTERM"
                                                                            : "SIGHUP");
    /* end as the signal would have ended the process, now that nothing is left behind */
    signal(signal_number, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal_number);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(signal_number);
    return 128 + signal_number;
}
