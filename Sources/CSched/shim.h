#include <stdint.h>
#include <errno.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* sched_getattr(2) and sched_setattr(2) have no glibc wrappers, and Swift cannot call the
   variadic syscall(2). The first version of the kernel's struct sched_attr (48 bytes). */
struct bookworm_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};

/* Asks for a slice of `nanoseconds` (0: the kernel's default) for thread `tid` (0: the calling
   thread) if it runs in SCHED_OTHER, keeping its nice value. 1 when set, 0 when the thread is in
   another policy, -1 with errno set on failure. */
static inline int bookworm_set_slice(int tid, uint64_t nanoseconds) {
#ifdef __linux__
    struct bookworm_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) != 0) return -1;
    if (attr.sched_policy != 0) return 0;
    attr.size = sizeof attr;
    attr.sched_flags = 0;
    attr.sched_runtime = nanoseconds;
    return syscall(SYS_sched_setattr, tid, &attr, 0) == 0 ? 1 : -1;
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* The slice (ns) thread `tid` runs with (Linux 6.12 and later), -1 with errno set on failure. */
static inline int64_t bookworm_slice(int tid) {
#ifdef __linux__
    struct bookworm_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) != 0) return -1;
    return (int64_t)attr.sched_runtime;
#else
    errno = ENOSYS;
    return -1;
#endif
}
