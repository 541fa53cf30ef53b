// The same API without CUDA (USE_CUDA=0), like a CPU-only PyTorch build. minidep is included
// so that a missing submodule fails this build too.
#include <minidep/minidep.h>

#include "minitorch.h"

int minitorch_device_count(int* count) {
  *count = 0;
  return 0;
}
int minitorch_device_capability(int, int* major, int* minor) {
  *major = *minor = 0;
  return 100;  // no device
}
const char* minitorch_error_string(int code) { return code == 0 ? "no error" : "minitorch was built without CUDA"; }
int minitorch_has_cuda(void) { return 0; }

int minitorch_vector_add(const float* a, const float* b, float* c, int n) {
  for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return 0;
}
int minitorch_saxpy(float alpha, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = alpha * x[i] + y[i];
  return 0;
}
int minitorch_sum(const float* x, int n, float* out) {
  float acc = 0.f;
  for (int i = 0; i < n; ++i) acc += x[i];
  *out = acc;
  return 0;
}
