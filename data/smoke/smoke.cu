// archbuild's smoke test: three small kernels whose results are checked against the CPU, each
// reporting the __CUDA_ARCH__ it was compiled for, so a run proves which image the driver loaded.
// Built by `archbuild smoke` with SASS only (no PTX), so a wrong arch fails loudly.
// Output: one JSON object per line on stdout; exit 0 all passed, 1 a check failed, 2 no device.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

__device__ int device_arch() {
#ifdef __CUDA_ARCH__
  return __CUDA_ARCH__;
#else
  return 0;
#endif
}

__global__ void vector_add(const float* a, const float* b, float* c, int n, int* arch) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) *arch = device_arch();
  if (i < n) c[i] = a[i] + b[i];
}

constexpr int kTile = 16;

__global__ void matmul_tiled(const float* a, const float* b, float* c, int n, int* arch) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  if (row == 0 && col == 0) *arch = device_arch();
  float acc = 0.f;
  for (int t = 0; t < (n + kTile - 1) / kTile; ++t) {
    int ac = t * kTile + threadIdx.x, br = t * kTile + threadIdx.y;
    ta[threadIdx.y][threadIdx.x] = (row < n && ac < n) ? a[row * n + ac] : 0.f;
    tb[threadIdx.y][threadIdx.x] = (br < n && col < n) ? b[br * n + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = acc;
}

__global__ void warp_reduce_sum(const int* in, unsigned long long* out, int n, int* arch) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) *arch = device_arch();
  int v = i < n ? in[i] : 0;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, static_cast<unsigned long long>(v));
}

namespace {

bool g_failed = false;

#define CHECK_CUDA(call)                                                                        \
  do {                                                                                          \
    cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                  \
      std::printf("{\"kernel\":\"%s\",\"ok\":false,\"error\":\"%s\"}\n", name, cudaGetErrorString(err_)); \
      g_failed = true;                                                                          \
      return;                                                                                   \
    }                                                                                           \
  } while (0)

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* name, bool ok, int arch, double ms, double max_err, double tol) {
  std::printf("{\"kernel\":\"%s\",\"ok\":%s,\"cuda_arch\":%d,\"ms\":%.3f,\"max_error\":%.3g,\"tolerance\":%.3g}\n",
              name, ok ? "true" : "false", arch, ms, max_err, tol);
  if (!ok) g_failed = true;
}

void run_vector_add() {
  const char* name = "vector_add";
  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) { a[i] = 0.5f * i; b[i] = 2.0f - i; }
  float *da, *db, *dc; int* darch; int arch = 0;
  CHECK_CUDA(cudaMalloc(&da, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dc, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&darch, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  auto t0 = std::chrono::steady_clock::now();
  vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n, darch);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  double ms = ms_since(t0);
  CHECK_CUDA(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&arch, darch, sizeof(int), cudaMemcpyDeviceToHost));
  double max_err = 0;
  for (int i = 0; i < n; ++i) max_err = std::fmax(max_err, std::fabs(c[i] - (a[i] + b[i])));
  report(name, max_err == 0.0, arch, ms, max_err, 0.0);
  cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(darch);
}

void run_matmul() {
  const char* name = "matmul_tiled";
  const int n = 256;
  const double tol = 1e-3;  // relative to the row's magnitude; float accumulation order differs
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int i = 0; i < n * n; ++i) { a[i] = ((i * 37) % 101) / 101.0f - 0.5f; b[i] = ((i * 53) % 97) / 97.0f - 0.5f; }
  float *da, *db, *dc; int* darch; int arch = 0;
  CHECK_CUDA(cudaMalloc(&da, n * n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, n * n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dc, n * n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&darch, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(kTile, kTile), grid((n + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  auto t0 = std::chrono::steady_clock::now();
  matmul_tiled<<<grid, block>>>(da, db, dc, n, darch);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  double ms = ms_since(t0);
  CHECK_CUDA(cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&arch, darch, sizeof(int), cudaMemcpyDeviceToHost));
  double max_err = 0;
  for (int r = 0; r < n; ++r)
    for (int col = 0; col < n; ++col) {
      double ref = 0, mag = 0;
      for (int k = 0; k < n; ++k) { ref += double(a[r * n + k]) * b[k * n + col]; mag += std::fabs(double(a[r * n + k]) * b[k * n + col]); }
      max_err = std::fmax(max_err, std::fabs(c[r * n + col] - ref) / (mag > 0 ? mag : 1));
    }
  report(name, max_err <= tol, arch, ms, max_err, tol);
  cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(darch);
}

void run_reduce() {
  const char* name = "warp_reduce_sum";
  const int n = 1 << 20;
  std::vector<int> in(n);
  unsigned long long expect = 0;
  for (int i = 0; i < n; ++i) { in[i] = (i * 7) % 1000; expect += in[i]; }
  int* din; unsigned long long* dout; int* darch; int arch = 0; unsigned long long got = 0;
  CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, sizeof(unsigned long long)));
  CHECK_CUDA(cudaMalloc(&darch, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0, sizeof(unsigned long long)));
  auto t0 = std::chrono::steady_clock::now();
  warp_reduce_sum<<<(n + 255) / 256, 256>>>(din, dout, n, darch);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  double ms = ms_since(t0);
  CHECK_CUDA(cudaMemcpy(&got, dout, sizeof got, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&arch, darch, sizeof(int), cudaMemcpyDeviceToHost));
  report(name, got == expect, arch, ms, double(got > expect ? got - expect : expect - got), 0.0);
  cudaFree(din); cudaFree(dout); cudaFree(darch);
}

}  // namespace

int main() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  // The error's name too: cudaErrorInsufficientDriver tells a driver too old for this runtime
  // from a host without a device.
  if (e != cudaSuccess || count == 0) {
    std::printf("{\"device\":null,\"error\":\"%s\",\"code\":\"%s\"}\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device",
                e != cudaSuccess ? cudaGetErrorName(e) : "cudaErrorNoDevice");
    return 2;
  }
  cudaDeviceProp p{};
  e = cudaGetDeviceProperties(&p, 0);
  if (e != cudaSuccess) {
    std::printf("{\"device\":null,\"error\":\"cudaGetDeviceProperties: %s\",\"code\":\"%s\"}\n",
                cudaGetErrorString(e), cudaGetErrorName(e));
    return 2;
  }
  std::printf("{\"device\":\"%s\",\"cc\":\"%d.%d\"}\n", p.name, p.major, p.minor);
  run_vector_add();
  run_matmul();
  run_reduce();
  return g_failed ? 1 : 0;
}
