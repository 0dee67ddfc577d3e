/* LTTng-UST at a sustained rate: fires the peer's bench:ev3 (int, int, long) at RATE
 * events/s for SECONDS, paced against CLOCK_MONOTONIC in steps of 1000 events, like
 * crates/tp/examples/sustained.rs. Built by bench/recorder-sustained.sh against
 * ../shared/peers/lttng-ust/tp.h; prints the rate it reached. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tp.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  double rate = argc > 1 ? atof(argv[1]) : 1e6, secs = argc > 2 ? atof(argv[2]) : 2;
  long total = (long)(rate * secs), fired = 0;
  double t0 = now();
  while (fired < total) {
    double due = t0 + fired / rate;
    while (now() < due) {}
    long end = fired + 1000 < total ? fired + 1000 : total;
    for (long i = fired; i < end; i++) lttng_ust_tracepoint(bench, ev3, (int)i, 7, i * 3);
    fired = end;
  }
  double took = now() - t0;
  printf("lttng-ust sustained %.0f events/s for %.2f s: fired %ld\n", total / took, took, total);
  return 0;
}
