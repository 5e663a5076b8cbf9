#include <sys/epoll.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>

/// Asks the kernel to stamp what `fd` receives with the moment it arrived (CLOCK_REALTIME).
static inline int bench_stamp_arrivals(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

/// `recv`, and in `arrived_ns` when the kernel received the last of the bytes read (realtime
/// nanoseconds; 0 when it gave no stamp).
static inline long bench_recv_stamped(int fd, void *buffer, unsigned long length, long long *arrived_ns) {
    union { char bytes[CMSG_SPACE(sizeof(struct timespec))]; struct cmsghdr align; } control;
    struct iovec part = { buffer, length };
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    long count = recvmsg(fd, &message, 0);
    *arrived_ns = 0;
    if (count <= 0) return count;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec stamp;
            memcpy(&stamp, CMSG_DATA(header), sizeof stamp);
            *arrived_ns = (long long)stamp.tv_sec * 1000000000LL + stamp.tv_nsec;
        }
    }
    return count;
}

/// Now on the clock the arrival stamps use.
static inline long long bench_realtime_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}
