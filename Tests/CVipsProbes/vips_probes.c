#include "vips_probes.h"

#include <string.h>
#include <vips/vips.h>

static int started(void) {
    static int result = -1;
    if (result < 0) result = VIPS_INIT("bookworm-tests") ? 1 : 0;
    return result == 0;
}

int bw_probe_thumbnail_fail_on_is_ignored(const void *data, size_t length) {
    if (!started()) return -1;
    VipsImage *thumb, *kept = NULL;
    if (vips_thumbnail_buffer((void *)data, length, &thumb, 1600, "fail_on", VIPS_FAIL_ON_ERROR, NULL) == 0) {
        kept = vips_image_copy_memory(thumb);
        g_object_unref(thumb);
    }
    vips_error_clear();
    int ignored = kept != NULL;
    if (kept) g_object_unref(kept);
    return ignored;
}

static void *save_webp(const unsigned char *pixels, int width, int height, int page_height, size_t *length) {
    VipsImage *image = vips_image_new_from_memory_copy(pixels, (size_t)width * height * 3, width, height, 3, VIPS_FORMAT_UCHAR);
    if (!image) return NULL;
    if (page_height) vips_image_set_int(image, "page-height", page_height);
    void *out = NULL;
    if (vips_webpsave_buffer(image, &out, length, "strip", TRUE, "lossless", TRUE, NULL)) out = NULL;
    g_object_unref(image);
    vips_error_clear();
    return out;
}

void *bw_probe_stripped_webp(size_t *length) {
    if (!started()) return NULL;
    unsigned char pixels[16 * 16 * 3];
    memset(pixels, 128, sizeof pixels);
    return save_webp(pixels, 16, 16, 0, length);
}

void *bw_probe_animated_webp(size_t *length) {
    if (!started()) return NULL;
    static unsigned char pixels[40 * 90 * 3];
    for (int y = 0; y < 90; y++) {
        for (int x = 0; x < 40; x++) {
            unsigned char *p = pixels + 3 * (y * 40 + x);
            p[0] = y < 30 ? 220 : 20;
            p[1] = y >= 30 && y < 60 ? 220 : 20;
            p[2] = y >= 60 ? 220 : 20;
        }
    }
    return save_webp(pixels, 40, 90, 30, length);
}

void bw_probe_free(void *pointer) {
    g_free(pointer);
}

void bw_probe_limits(int *cache_operations, size_t *cache_bytes, int *cache_files, int *threads) {
    *cache_operations = vips_cache_get_max();
    *cache_bytes = vips_cache_get_max_mem();
    *cache_files = vips_cache_get_max_files();
    *threads = vips_concurrency_get();
}
