/* The file helpers of src/base/file.c on their own: file_same tells one
 * file by any of its names (a symbolic link, a hard link, "./", "..", a
 * file not created yet in the same folder) and two files apart, and a
 * file_replacement keeps the replaced file's permission bits (through a
 * symbolic link, the file it leads to keeps them and the link stays a
 * link), never a set-user-ID bit, and a new file gets the umask's mode. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "test.h"

static char folder[512];

static void path_in_folder(char *buffer, size_t size, const char *name)
{
    snprintf(buffer, size, "%s/%s", folder, name);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    FILE *file = fopen(path, "w");
    CHECK(file && fputs(text, file) >= 0 && fclose(file) == 0);
    CHECK(chmod(path, mode) == 0);
}

/* Replaces path with text through a file_replacement. */
static bool replace(const char *path, const char *text)
{
    file_replacement r;
    bmoe_error err;
    error_clear(&err);
    if (file_replacement_begin(&r, path, &err) != 0) {
        fprintf(stderr, "begin %s: %s\n", path, err.message);
        return false;
    }
    bool written = write(r.fd, text, strlen(text)) == (ssize_t)strlen(text);
    bool committed = written && file_replacement_commit(&r, &err) == 0;
    file_replacement_release(&r);
    return committed;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static void test_same_file(void)
{
    char file[600], soft[600], hard[600], dotted[700], other[600], missing[600], missing_dotted[700];
    path_in_folder(file, sizeof file, "same.txt");
    path_in_folder(soft, sizeof soft, "same.link");
    path_in_folder(hard, sizeof hard, "same.hard");
    path_in_folder(other, sizeof other, "other.txt");
    path_in_folder(missing, sizeof missing, "missing.txt");
    snprintf(dotted, sizeof dotted, "%s/./../%s/same.txt", folder, strrchr(folder, '/') + 1);
    snprintf(missing_dotted, sizeof missing_dotted, "%s/./missing.txt", folder);
    write_text(file, "one", 0644);
    write_text(other, "one", 0644);
    unlink(soft);
    unlink(hard);
    unlink(missing);
    CHECK(symlink(file, soft) == 0);
    CHECK(link(file, hard) == 0);

    CHECK(file_same(file, file));
    CHECK(file_same(file, soft));
    CHECK(file_same(soft, file));
    CHECK(file_same(file, hard));
    CHECK(file_same(hard, soft));
    CHECK(file_same(file, dotted));
    /* the same bytes in another file are another file */
    CHECK(!file_same(file, other));
    /* a file not created yet: its name in the same folder */
    CHECK(file_same(missing, missing_dotted));
    CHECK(!file_same(missing, file));
    CHECK(!file_same(file, missing));
    char missing_elsewhere[700];
    snprintf(missing_elsewhere, sizeof missing_elsewhere, "%s/missing.txt", test_tmp_dir());
    unlink(missing_elsewhere);
    CHECK(!file_same(missing, missing_elsewhere));
    /* one spelling is one file, even in a folder that does not exist */
    CHECK(file_same("no-such-folder/x.csv", "no-such-folder/x.csv"));
    unlink(soft);
    unlink(hard);
    unlink(file);
    unlink(other);
}

static void test_replacement_keeps_the_mode(void)
{
    char file[600], soft[600], fresh[600];
    path_in_folder(file, sizeof file, "private.csv");
    path_in_folder(soft, sizeof soft, "private.link");
    path_in_folder(fresh, sizeof fresh, "fresh.csv");

    write_text(file, "secret", 0600);
    CHECK(replace(file, "new rows"));
    CHECK_MSG(mode_of(file) == 0600, "a 0600 file came back %04o", (unsigned)mode_of(file));
    char *content = test_read_file(file, NULL);
    CHECK(content && strcmp(content, "new rows") == 0);
    free(content);

    /* bits the umask would take away are kept too */
    write_text(file, "shared", 0666);
    CHECK(replace(file, "rows"));
    CHECK_MSG(mode_of(file) == 0666, "a 0666 file came back %04o", (unsigned)mode_of(file));

    /* through a link: the file it leads to keeps its mode, the link stays */
    write_text(file, "secret", 0640);
    unlink(soft);
    CHECK(symlink(file, soft) == 0);
    CHECK(replace(soft, "through the link"));
    struct stat st;
    CHECK(lstat(soft, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK_MSG(mode_of(file) == 0640, "the link's target came back %04o", (unsigned)mode_of(file));
    content = test_read_file(file, NULL);
    CHECK(content && strcmp(content, "through the link") == 0);
    free(content);

    /* a set-user-ID bit is not carried onto the writer's new file */
    write_text(file, "program", 04755);
    CHECK(replace(file, "rows"));
    CHECK_MSG(mode_of(file) == 0755, "a 4755 file came back %04o", (unsigned)mode_of(file));

    /* a new file: what the umask leaves of 0666 */
    unlink(fresh);
    mode_t mask = umask(027);
    CHECK(replace(fresh, "rows"));
    umask(mask);
    CHECK_MSG(mode_of(fresh) == 0640, "a new file is %04o", (unsigned)mode_of(fresh));
    unlink(fresh);
    unlink(soft);
    unlink(file);
}

int main(void)
{
    snprintf(folder, sizeof folder, "%s/base-file", test_tmp_dir());
    mkdir(folder, 0755);
    test_same_file();
    test_replacement_keeps_the_mode();
    return test_finish();
}
