// minivision's CUDA op (a stand-in for torchvision's nms): the overlap of box pairs. It includes
// minitorch's installed headers, so it can only be compiled against an installed minitorch.
#include <cuda_runtime.h>

#include <minitorch/minitorch.h>
#include <minitorch/version.h>

#ifndef MINITORCH_VERSION
#error "minitorch/version.h defines no MINITORCH_VERSION"
#endif

// Boxes are (x1, y1, x2, y2); iou[i] = overlap of a[i] and b[i].
__global__ void box_iou_kernel(const float* a, const float* b, float* iou, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* p = a + 4 * i;
  const float* q = b + 4 * i;
  float w = fminf(p[2], q[2]) - fmaxf(p[0], q[0]);
  float h = fminf(p[3], q[3]) - fmaxf(p[1], q[1]);
  float inter = (w > 0 && h > 0) ? w * h : 0.f;
  float uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
  iou[i] = uni > 0 ? inter / uni : 0.f;
}

MINITORCH_API const char* minivision_built_against(void) { return MINITORCH_VERSION; }

MINITORCH_API int minivision_box_iou(const float* a, const float* b, float* iou, int n) {
  float *da = nullptr, *db = nullptr, *dout = nullptr;
  size_t bytes = sizeof(float) * 4 * static_cast<size_t>(n);
  cudaError_t e = cudaMalloc(&da, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&db, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dout, sizeof(float) * n);
  if (e == cudaSuccess) e = cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    box_iou_kernel<<<(n + 127) / 128, 128>>>(da, db, dout, n);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(iou, dout, sizeof(float) * n, cudaMemcpyDeviceToHost);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  return static_cast<int>(e);
}

MINITORCH_API const char* minivision_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
