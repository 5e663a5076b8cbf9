#ifndef BOOKWORM_VIPS_PROBES_H
#define BOOKWORM_VIPS_PROBES_H

#include <stddef.h>

/* libvips as the tests need it beside the product's shim: pictures it cannot make from the
   command line, and probes of the libvips bugs the product works around. */

/* Whether vips_thumbnail_buffer still ignores its own fail_on (libvips/libvips#5195): 1 when a
   truncated `data` thumbnails without an error. */
int bw_probe_thumbnail_fail_on_is_ignored(const void *data, size_t length);

/* A WebP of a 16 x 16 image with no metadata at all, saved with strip (free with bw_probe_free). */
void *bw_probe_stripped_webp(size_t *length);

/* An animated WebP of three 40 x 30 frames: red, then green, then blue (free with bw_probe_free). */
void *bw_probe_animated_webp(size_t *length);

void bw_probe_free(void *pointer);

/* libvips' process-wide limits as they stand: its operation cache (entries, bytes, open files)
   and the threads each image's pipeline may use. */
void bw_probe_limits(int *cache_operations, size_t *cache_bytes, int *cache_files, int *threads);

#endif
