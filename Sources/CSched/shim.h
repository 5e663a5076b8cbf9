#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Asks for a slice of `nanoseconds` for thread `tid` if it runs in SCHED_OTHER, keeping its
   nice value; 0 when done or not in SCHED_OTHER, else -1 with errno set. */
static inline int bookworm_set_slice(int tid, uint64_t nanoseconds) {
    struct bookworm_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) != 0) return -1;
    if (attr.sched_policy != 0) return 0;
    attr.size = sizeof attr;
    attr.sched_flags = 0;
    attr.sched_runtime = nanoseconds;
    return (int)syscall(SYS_sched_setattr, tid, &attr, 0);
}
