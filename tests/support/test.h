/* Minimal test harness shared by every test program: CHECK records a failure
 * with file and line and goes on; test_finish prints "N passed, N failed" and
 * returns the exit status. Tests that need ../shared find it through
 * test_shared_path, which fails loudly (never skips) when it is missing. */
#ifndef BMOE_TESTS_TEST_H
#define BMOE_TESTS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 1 in a build with AddressSanitizer: a test that repeats one computation
 * many ways (threads, batch splits) may run fewer of the ways there, since
 * the sanitizer finds memory errors, not numeric ones, and multiplies the
 * time of each; the Release build runs them all. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif

static int test_passed_count;
static int test_failed_count;

#define CHECK(condition)                                                          \
    do {                                                                          \
        if (condition) {                                                          \
            test_passed_count++;                                                  \
        } else {                                                                  \
            test_failed_count++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
        }                                                                         \
    } while (0)

#define CHECK_MSG(condition, ...)                                                 \
    do {                                                                          \
        if (condition) {                                                          \
            test_passed_count++;                                                  \
        } else {                                                                  \
            test_failed_count++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* Ends the test program: prints the summary line and returns the exit code. */
static inline int test_finish(void)
{
    printf("%d passed, %d failed\n", test_passed_count, test_failed_count);
    return test_failed_count == 0 && test_passed_count > 0 ? 0 : 1;
}

/* The shared/ folder: $BMOE_SHARED_DIR, else the path CMake compiled in.
 * Exits with a failure when it is not there: a missing oracle is a failed
 * test, never a silent pass. */
static inline const char *test_shared_dir(void)
{
    const char *dir = getenv("BMOE_SHARED_DIR");
#ifdef BMOE_SHARED_DIR_DEFAULT
    if (!dir || !*dir)
        dir = BMOE_SHARED_DIR_DEFAULT;
#endif
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "FATAL: shared/ folder not found (%s); set BMOE_SHARED_DIR\n",
                dir ? dir : "(unset)");
        printf("0 passed, 1 failed\n");
        exit(1);
    }
    return dir;
}

/* Joins shared/ and a relative path into buffer; exits loudly if the file is missing. */
static inline const char *test_shared_path(char *buffer, size_t size, const char *relative)
{
    snprintf(buffer, size, "%s/%s", test_shared_dir(), relative);
    struct stat st;
    if (stat(buffer, &st) != 0) {
        fprintf(stderr, "FATAL: required shared file missing: %s\n", buffer);
        printf("0 passed, 1 failed\n");
        exit(1);
    }
    return buffer;
}

/* Reads a whole file into one malloc'd buffer with a NUL after its bytes (a
 * text file comes back as a C string); *size, when given, gets the byte
 * count. NULL when the file cannot be opened or read. */
static inline void *test_read_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    long length = -1;
    if (fseek(file, 0, SEEK_END) == 0)
        length = ftell(file);
    char *data = NULL;
    if (length >= 0 && fseek(file, 0, SEEK_SET) == 0)
        data = malloc((size_t)length + 1);
    if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
        free(data);
        data = NULL;
    }
    fclose(file);
    if (data) {
        data[length] = '\0';
        if (size)
            *size = (size_t)length;
    }
    return data;
}

/* A scratch directory for generated files: $BMOE_TEST_TMPDIR or the build's. */
static inline const char *test_tmp_dir(void)
{
    const char *dir = getenv("BMOE_TEST_TMPDIR");
#ifdef BMOE_TEST_TMPDIR_DEFAULT
    if (!dir || !*dir)
        dir = BMOE_TEST_TMPDIR_DEFAULT;
#endif
    if (!dir || !*dir)
        dir = "/tmp";
    mkdir(dir, 0755);
    return dir;
}

#endif
