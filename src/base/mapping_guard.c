#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "mapping_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "pages.h"

/* Mappings guarded at once: a model maps one per shard file. */
#define MAPPING_GUARD_SLOTS 256

typedef struct guarded_mapping {
    atomic_int taken;
    atomic_uintptr_t begin;
    atomic_uintptr_t end; /* 0: nothing guarded here */
    atomic_int fd;
    atomic_bool faulted;
} guarded_mapping;

static guarded_mapping guards[MAPPING_GUARD_SLOTS];
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static bool installed;
static struct sigaction replaced_action;
static uintptr_t page_size;

/* Maps zero pages over the guarded mapping holding address, from the file's
 * end (or from address when the file does not say), and marks it faulted.
 * False when address is in no guarded mapping or the mapping failed. */
static bool absorb(uintptr_t address)
{
    for (int i = 0; i < MAPPING_GUARD_SLOTS; i++) {
        guarded_mapping *guard = &guards[i];
        /* begin read twice around end: a slot removed and taken again in
         * between is seen whole or not at all */
        uintptr_t begin = atomic_load(&guard->begin);
        uintptr_t end = atomic_load(&guard->end);
        if (atomic_load(&guard->begin) != begin || address < begin || address >= end)
            continue;
        uintptr_t from = address & ~(page_size - 1);
        struct stat st;
        if (fstat(atomic_load(&guard->fd), &st) == 0 && st.st_size >= 0) {
            /* everything past the file's last page faults from now on: one
             * signal per cut, however the readers walk the mapping */
            uint64_t kept = ((uint64_t)st.st_size + page_size - 1) & ~(uint64_t)(page_size - 1);
            if (kept < from - begin)
                from = begin + (uintptr_t)kept;
        }
        void *zeros = mmap((void *)from, end - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                           -1, 0);
        if (zeros == MAP_FAILED)
            return false;
        atomic_store(&guard->faulted, true);
        return true;
    }
    return false;
}

/* What the replaced handler would have done. For the default action (and
 * an ignored fault, which the kernel does not ignore either) the default
 * comes back: a fault then repeats when this returns and ends the process as
 * it would have; a sent signal is sent again. */
static void pass_on(int signal_number, siginfo_t *info, void *context)
{
    if (replaced_action.sa_flags & SA_SIGINFO) {
        replaced_action.sa_sigaction(signal_number, info, context);
        return;
    }
    bool sent = info->si_code <= 0;
    if (replaced_action.sa_handler != SIG_DFL && replaced_action.sa_handler != SIG_IGN) {
        replaced_action.sa_handler(signal_number);
        return;
    }
    if (sent && replaced_action.sa_handler == SIG_IGN)
        return;
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal_number, &default_action, NULL);
    if (sent)
        raise(signal_number);
}

static void on_bus_error(int signal_number, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    bool absorbed = info->si_code == BUS_ADRERR && absorb((uintptr_t)info->si_addr);
    errno = saved_errno;
    if (!absorbed)
        pass_on(signal_number, info, context);
}

static void install(void)
{
    page_size = page_bytes();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    installed = sigaction(SIGBUS, &action, &replaced_action) == 0;
}

int mapping_guard_add(const void *base, size_t size, int fd)
{
    pthread_once(&install_once, install);
    if (!installed || size == 0)
        return -1;
    for (int i = 0; i < MAPPING_GUARD_SLOTS; i++) {
        guarded_mapping *guard = &guards[i];
        int free_slot = 0;
        if (!atomic_compare_exchange_strong(&guard->taken, &free_slot, 1))
            continue;
        atomic_store(&guard->fd, fd);
        atomic_store(&guard->faulted, false);
        atomic_store(&guard->begin, (uintptr_t)base);
        atomic_store(&guard->end, (uintptr_t)base + size);
        return i;
    }
    return -1;
}

void mapping_guard_remove(int guard)
{
    if (guard < 0 || guard >= MAPPING_GUARD_SLOTS)
        return;
    atomic_store(&guards[guard].end, 0);
    atomic_store(&guards[guard].begin, 0);
    atomic_store(&guards[guard].taken, 0);
}

bool mapping_guard_faulted(int guard)
{
    return guard >= 0 && guard < MAPPING_GUARD_SLOTS && atomic_load_explicit(&guards[guard].faulted, memory_order_relaxed);
}
