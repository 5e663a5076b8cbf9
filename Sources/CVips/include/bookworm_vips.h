#ifndef BOOKWORM_VIPS_H
#define BOOKWORM_VIPS_H

#include <stddef.h>

/* Non-variadic wrappers over libvips for photos: Swift cannot call vips' varargs functions. */

enum {
    BW_PHOTO_OK = 0,
    BW_PHOTO_UNSUPPORTED = 1, /* not a JPEG, PNG, WebP or HEIF/HEIC */
    BW_PHOTO_TOO_LARGE = 2,   /* more pixels than allowed, read from the header */
    BW_PHOTO_UNREADABLE = 3,  /* corrupt or truncated */
    BW_PHOTO_FAILED = 4,      /* libvips could not start or write */
    BW_PHOTO_TIMED_OUT = 5    /* the decode used more CPU than its deadline */
};

/* The three sizes, each as JPEG and WebP, written anew without any metadata. */
typedef struct {
    int width, height;         /* the full size's */
    void *jpeg[3];
    size_t jpeg_length[3];
    void *webp[3];
    size_t webp_length[3];
    unsigned char *thumb_rgb;  /* the smallest size's pixels, 3 bytes each, row by row */
    int thumb_width, thumb_height;
    char error[256];
} bw_photo;

/* Once per process: starts libvips with one thread per image, no operation cache, and only
   the four loaders photos need (every other loader, and libvips' untrusted ones, blocked).
   Returns 0 when libvips started. */
int bw_vips_start(void);

/* Decodes `data` (the loader chosen by its bytes), refuses more than `max_pixels` before
   decoding a pixel, applies the EXIF orientation, converts to sRGB, and writes each long
   edge of `edges` (largest first, never upscaled). Decoding stops once it has used `deadline_seconds`
   of CPU (waiting for a core does not count). */
int bw_photo_make(const void *data, size_t length, double max_pixels, double deadline_seconds,
                  const int edges[3], int jpeg_quality, int webp_quality, bw_photo *out);

void bw_photo_free(bw_photo *photo);

#endif
