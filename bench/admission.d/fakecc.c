/* A fake compile for bench/admission: allocates and touches MB megabytes, holds them for MS
 * milliseconds, and appends "start_ns end_ns MB" to $FAKECC_LOG (the bench sums the overlaps to
 * get the peak total memory). usage: fakecc MB MS [-c SOURCE]
 * The memory is touched in transparent huge pages where the kernel allows (madvise): with 4 KiB
 * pages, faulting 150 MB in costs ~0.6 s of CPU, and eight of them on a small shared host made the
 * bench measure page-fault throughput instead of the packing. ru_maxrss counts it the same. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long mb = atol(argv[1]), ms = atol(argv[2]);
  long long start = now_ns();
  size_t n = (size_t)mb << 20;
  const size_t huge = (size_t)2 << 20;
  char* m = mmap(NULL, n + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  volatile char* p = (char*)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
  (void)madvise((void*)p, n, MADV_HUGEPAGE);  /* best effort: 4 KiB pages still work */
  for (size_t i = 0; i < n; i += 4096) p[i] = 1;
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
  const char* log = getenv("FAKECC_LOG");
  if (log) {
    char line[96];
    int len = snprintf(line, sizeof line, "%lld %lld %ld\n", start, now_ns(), mb);
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
      if (write(fd, line, (size_t)len) < 0) return 1;
      close(fd);
    }
  }
  return 0;
}
