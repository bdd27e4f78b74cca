/* The file helpers of src/base/file.c on their own: file_same tells one
 * file by any of its names (a symbolic link, a hard link, "./", "..", a
 * file not created yet in the same folder) and two files apart. */
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

int main(void)
{
    snprintf(folder, sizeof folder, "%s/base-file", test_tmp_dir());
    mkdir(folder, 0755);
    test_same_file();
    return test_finish();
}
