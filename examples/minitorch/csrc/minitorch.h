// minitorch's C API (called from Python through ctypes). Every function takes host arrays and
// returns 0 on success or an error code (a cudaError_t in the CUDA build) that
// minitorch_error_string() explains.
#pragma once

#define MINITORCH_API extern "C" __attribute__((visibility("default")))

MINITORCH_API int minitorch_device_count(int* count);
MINITORCH_API int minitorch_device_capability(int device, int* major, int* minor);
MINITORCH_API const char* minitorch_error_string(int code);
// 1 when built with CUDA kernels, 0 for the CPU implementation.
MINITORCH_API int minitorch_has_cuda(void);
// The version of this C API (1).
MINITORCH_API int minitorch_abi_version(void);

// c = a + b
MINITORCH_API int minitorch_vector_add(const float* a, const float* b, float* c, int n);
// y = alpha * x + y
MINITORCH_API int minitorch_saxpy(float alpha, const float* x, float* y, int n);
// *out = sum(x)
MINITORCH_API int minitorch_sum(const float* x, int n, float* out);
