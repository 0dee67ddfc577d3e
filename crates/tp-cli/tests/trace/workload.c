/* The workload of tests/trace.rs, built with gcc by the test; the binary is named tpwork so
 * that both tracers can filter on comm. Modes:
 *   getppid N   N getppid() calls
 *   sizes       write(2) to /dev/null with known sizes: i * 37 % 5000 bytes for i < 300
 *   usdt N      N firings of USDT probe tpwork:greet with (i, "hello-<i%3>")
 *   calls N     N calls of timed_call(i), which spins a little
 *   hot MS      spin in hot_spin() for MS milliseconds
 * With TPWORK_WAIT set, it first waits for a line on stdin. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long timed_call(unsigned long i) {
    for (unsigned long k = 0; k < 2000 + (i % 7) * 1000; k++) sink += k;
    return sink;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__attribute__((noinline)) void hot_spin(double ms) {
    double end = now_ms() + ms;
    while (now_ms() < end)
        for (int k = 0; k < 10000; k++) sink += k;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (getenv("TPWORK_WAIT")) {
        char line[16];
        if (!fgets(line, sizeof line, stdin)) return 3;
    }
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (!strcmp(argv[1], "getppid")) {
        for (long i = 0; i < n; i++) syscall(SYS_getppid);
    } else if (!strcmp(argv[1], "sizes")) {
        static char buf[5000];
        int fd = open("/dev/null", O_WRONLY);
        for (int i = 0; i < 300; i++)
            if (write(fd, buf, i * 37 % 5000) < 0) return 4;
        close(fd);
    } else if (!strcmp(argv[1], "usdt")) {
        char name[16];
        for (long i = 0; i < n; i++) {
            snprintf(name, sizeof name, "hello-%ld", i % 3);
            DTRACE_PROBE2(tpwork, greet, i, name);
        }
    } else if (!strcmp(argv[1], "calls")) {
        for (long i = 0; i < n; i++) timed_call(i);
    } else if (!strcmp(argv[1], "hot")) {
        hot_spin((double)n);
    } else {
        return 2;
    }
    return 0;
}
