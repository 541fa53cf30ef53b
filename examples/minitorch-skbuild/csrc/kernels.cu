// minitorch's CUDA kernels: elementwise add, saxpy, and a block reduction — small, but real
// device code, so the wheel's fatbin carries SASS/PTX exactly for the requested architectures.
#include <cuda_runtime.h>

#include <minidep/minidep.h>

#include "minitorch.h"

namespace {

constexpr int kThreads = 256;

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) c[i] = a[i] + b[i];
}

__global__ void saxpy_kernel(float alpha, const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = alpha * x[i] + y[i];
}

// Each block reduces its grid-stride share in shared memory, then adds it to *out.
__global__ void sum_kernel(const float* x, float* out, int n) {
  __shared__ float partial[kThreads];
  float acc = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += x[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

// Device buffers freed on every path.
struct DeviceBuffer {
  float* p = nullptr;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
};

#define MT_CHECK(expr)                         \
  do {                                         \
    cudaError_t e_ = (expr);                   \
    if (e_ != cudaSuccess) return (int)e_;     \
  } while (0)

int copy_in(DeviceBuffer& d, const float* host, int n) {
  MT_CHECK(cudaMalloc(&d.p, sizeof(float) * (n > 0 ? n : 1)));
  if (host && n > 0) MT_CHECK(cudaMemcpy(d.p, host, sizeof(float) * n, cudaMemcpyHostToDevice));
  return 0;
}

}  // namespace

int minitorch_device_count(int* count) {
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    *count = 0;
    return 0;
  }
  return (int)e;
}

int minitorch_device_capability(int device, int* major, int* minor) {
  MT_CHECK(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device));
  MT_CHECK(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device));
  return 0;
}

const char* minitorch_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }

int minitorch_has_cuda(void) { return 1; }

int minitorch_vector_add(const float* a, const float* b, float* c, int n) {
  if (n <= 0) return 0;
  DeviceBuffer da, db, dc;
  if (int e = copy_in(da, a, n)) return e;
  if (int e = copy_in(db, b, n)) return e;
  if (int e = copy_in(dc, nullptr, n)) return e;
  vector_add_kernel<<<minidep::blocks_for(n, kThreads), kThreads>>>(da.p, db.p, dc.p, n);
  MT_CHECK(cudaGetLastError());
  MT_CHECK(cudaMemcpy(c, dc.p, sizeof(float) * n, cudaMemcpyDeviceToHost));
  return 0;
}

int minitorch_saxpy(float alpha, const float* x, float* y, int n) {
  if (n <= 0) return 0;
  DeviceBuffer dx, dy;
  if (int e = copy_in(dx, x, n)) return e;
  if (int e = copy_in(dy, y, n)) return e;
  saxpy_kernel<<<minidep::blocks_for(n, kThreads), kThreads>>>(alpha, dx.p, dy.p, n);
  MT_CHECK(cudaGetLastError());
  MT_CHECK(cudaMemcpy(y, dy.p, sizeof(float) * n, cudaMemcpyDeviceToHost));
  return 0;
}

int minitorch_sum(const float* x, int n, float* out) {
  *out = 0.f;
  if (n <= 0) return 0;
  DeviceBuffer dx, dout;
  if (int e = copy_in(dx, x, n)) return e;
  if (int e = copy_in(dout, out, 1)) return e;
  sum_kernel<<<minidep::blocks_for(n, kThreads, 1024), kThreads>>>(dx.p, dout.p, n);
  MT_CHECK(cudaGetLastError());
  MT_CHECK(cudaMemcpy(out, dout.p, sizeof(float), cudaMemcpyDeviceToHost));
  return 0;
}
