/* A fake NVML (libnvidia-ml) and CUDA driver (libcuda) for tests, configured by environment:
 *
 *   FAKE_GPUS    GPUs in PCI bus order (NVML's order), ';'-separated, each
 *                "UUID|NAME|MAJOR|MINOR|MIB[|MIG-UUID:MIB,MIG-UUID:MIB…]"; a sixth field (even
 *                empty) means MIG mode is enabled, listing its MIG devices.
 *   FAKE_DRIVER  the driver version NVML reports ("580.65.06")
 *   FAKE_CUDA_ORDER  the CUDA ordinal → FAKE_GPUS index map of CUDA's default (fastest first)
 *                order, e.g. "1,0"; absent: PCI order
 *
 * libcuda applies CUDA_VISIBLE_DEVICES (integers in CUDA_DEVICE_ORDER's order, or GPU- UUID
 * prefixes) and CUDA_DEVICE_ORDER as the real one does, without MIG. Only the entry points
 * src/detect/ uses exist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char uuid[96], name[96];
  int major, minor;
  unsigned long long mib;
  int mig;
  int nmig;
  char mig_uuid[7][96];
  unsigned long long mig_mib[7];
} Gpu;

typedef struct {
  unsigned long long total, free, used;
} Memory;

static Gpu gpus[16];
static int ngpus = -1;
/* A handle is (gpu + 1) * 16 + (mig index + 1, or 0 for the GPU itself). */
#define HANDLE(g, m) ((void*)(long)(((g) + 1) * 16 + (m) + 1))

static void load(void) {
  if (ngpus >= 0) return;
  ngpus = 0;
  const char* env = getenv("FAKE_GPUS");
  if (!env) return;
  char* all = strdup(env);
  char* save = NULL;
  for (char* g = strtok_r(all, ";", &save); g && ngpus < 16; g = strtok_r(NULL, ";", &save)) {
    Gpu* x = &gpus[ngpus];
    memset(x, 0, sizeof *x);
    char* f[6] = {0};
    int n = 0;
    for (char* p = g; n < 6;) {
      f[n++] = p;
      char* bar = strchr(p, '|');
      if (!bar) break;
      *bar = 0;
      p = bar + 1;
    }
    if (n < 5) continue;
    snprintf(x->uuid, sizeof x->uuid, "%s", f[0]);
    snprintf(x->name, sizeof x->name, "%s", f[1]);
    x->major = atoi(f[2]);
    x->minor = atoi(f[3]);
    x->mib = strtoull(f[4], NULL, 10);
    if (n == 6) {
      x->mig = 1;
      char* s2 = NULL;
      for (char* m = strtok_r(f[5], ",", &s2); m && x->nmig < 7; m = strtok_r(NULL, ",", &s2)) {
        char* colon = strchr(m, ':');
        if (colon) *colon = 0;
        snprintf(x->mig_uuid[x->nmig], sizeof x->mig_uuid[0], "%s", m);
        x->mig_mib[x->nmig++] = colon ? strtoull(colon + 1, NULL, 10) : 0;
      }
    }
    ngpus++;
  }
  free(all);
}

static int gpu_of(void* h) { return (int)((long)h / 16) - 1; }
static int mig_of(void* h) { return (int)((long)h % 16) - 1; }

/* ---- NVML ---------------------------------------------------------------------------------- */
int nvmlInit_v2(void) {
  ngpus = -1; /* the environment may have changed since the last test */
  load(); return ngpus > 0 ? 0 : 9; /* NVML_ERROR_DRIVER_NOT_LOADED */ }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char* buf, unsigned len) {
  snprintf(buf, len, "%s", getenv("FAKE_DRIVER") ? getenv("FAKE_DRIVER") : "580.65.06");
  return 0;
}
int nvmlSystemGetCudaDriverVersion_v2(int* v) { *v = 13000; return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) { load(); *n = (unsigned)ngpus; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) {
  if ((int)i >= ngpus) return 2;
  *h = HANDLE(i, -1);
  return 0;
}
int nvmlDeviceGetName(void* h, char* buf, unsigned len) { snprintf(buf, len, "%s", gpus[gpu_of(h)].name); return 0; }
int nvmlDeviceGetCudaComputeCapability(void* h, int* major, int* minor) {
  *major = gpus[gpu_of(h)].major;
  *minor = gpus[gpu_of(h)].minor;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* h, Memory* m) {
  const Gpu* g = &gpus[gpu_of(h)];
  int mi = mig_of(h);
  m->total = (mi < 0 ? g->mib : g->mig_mib[mi]) * 1024ull * 1024ull;
  m->free = m->total;
  m->used = 0;
  return 0;
}
int nvmlDeviceGetUUID(void* h, char* buf, unsigned len) {
  const Gpu* g = &gpus[gpu_of(h)];
  int mi = mig_of(h);
  snprintf(buf, len, "%s", mi < 0 ? g->uuid : g->mig_uuid[mi]);
  return 0;
}
int nvmlDeviceGetMigMode(void* h, unsigned* current, unsigned* pending) {
  const Gpu* g = &gpus[gpu_of(h)];
  if (!g->mig && getenv("FAKE_NO_MIG_SUPPORT")) return 3; /* NVML_ERROR_NOT_SUPPORTED */
  *current = *pending = (unsigned)g->mig;
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(void* h, unsigned* n) { *n = gpus[gpu_of(h)].mig ? 7 : 0; return 0; }
int nvmlDeviceGetMigDeviceHandleByIndex(void* h, unsigned i, void** out) {
  const Gpu* g = &gpus[gpu_of(h)];
  if ((int)i >= g->nmig) return 6; /* NVML_ERROR_NOT_FOUND */
  *out = HANDLE(gpu_of(h), (int)i);
  return 0;
}

/* ---- the CUDA driver API ------------------------------------------------------------------- */
static int visible[16];
static int nvisible = -1;

static void cuda_order(int* order) {
  for (int i = 0; i < ngpus; ++i) order[i] = i;
  const char* o = getenv("FAKE_CUDA_ORDER");
  const char* dev_order = getenv("CUDA_DEVICE_ORDER");
  if (!o || (dev_order && strcmp(dev_order, "PCI_BUS_ID") == 0)) return;
  int n = 0;
  for (const char* p = o; *p && n < ngpus;) {
    order[n++] = atoi(p);
    const char* c = strchr(p, ',');
    if (!c) break;
    p = c + 1;
  }
}

int cuInit(unsigned flags) {
  (void)flags;
  ngpus = -1;
  load();
  if (ngpus <= 0) return 100; /* CUDA_ERROR_NO_DEVICE */
  int order[16];
  cuda_order(order);
  const char* mask = getenv("CUDA_VISIBLE_DEVICES");
  nvisible = 0;
  if (!mask) {
    for (int i = 0; i < ngpus; ++i) visible[nvisible++] = order[i];
    return 0;
  }
  char* all = strdup(mask);
  char* save = NULL;
  for (char* e = strtok_r(all, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
    int found = -1;
    if (strncmp(e, "GPU-", 4) == 0) {
      for (int i = 0; i < ngpus; ++i)
        if (strncmp(gpus[i].uuid, e, strlen(e)) == 0) found = i;
    } else {
      char* end = NULL;
      long v = strtol(e, &end, 10);
      if (end != e && *end == 0 && v >= 0 && v < ngpus) found = order[v];
    }
    if (found < 0) break; /* CUDA stops at the first entry it cannot use */
    visible[nvisible++] = found;
  }
  free(all);
  return 0;
}
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int cuDeviceGetCount(int* n) { *n = nvisible < 0 ? 0 : nvisible; return 0; }
int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal >= nvisible) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal;
  return 0;
}
int cuDeviceGetName(char* buf, int len, int dev) { snprintf(buf, (size_t)len, "%s", gpus[visible[dev]].name); return 0; }
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  if (attr == 75) *v = gpus[visible[dev]].major;
  else if (attr == 76) *v = gpus[visible[dev]].minor;
  else return 1;
  return 0;
}
int cuDeviceTotalMem_v2(size_t* bytes, int dev) { *bytes = gpus[visible[dev]].mib * 1024ull * 1024ull; return 0; }
int cuDeviceGetUuid_v2(unsigned char* uuid, int dev) {
  /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" back to its 16 bytes. */
  const char* s = gpus[visible[dev]].uuid + 4;
  int n = 0;
  for (; *s && n < 16; ++s) {
    if (*s == '-') continue;
    unsigned b = 0;
    if (sscanf(s, "%2x", &b) != 1) break;
    uuid[n++] = (unsigned char)b;
    ++s;
  }
  while (n < 16) uuid[n++] = 0;
  return 0;
}
