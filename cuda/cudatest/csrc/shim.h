// Host emulation of the CUDA C dialect hap's kernels use, so the kernel
// sources of package cuda compile with a C++20 compiler and run on the CPU:
// every block runs in turn, each thread of a block on its own std::thread,
// __syncthreads is a std::barrier, and __shared__ arrays are function
// statics (shared by the threads of the one block that runs at a time).
// Test-only: nothing of this ships.
#pragma once
#include <math.h>
#include <barrier>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 { unsigned x, y, z; };
extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
extern thread_local std::barrier<>* fake_block_barrier;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

inline void __syncthreads() { fake_block_barrier->arrive_and_wait(); }

extern std::mutex fake_atomic_mu;
inline float atomicAdd(float* p, float v) { std::lock_guard<std::mutex> g(fake_atomic_mu); float o = *p; *p = o + v; return o; }
inline double atomicAdd(double* p, double v) { std::lock_guard<std::mutex> g(fake_atomic_mu); double o = *p; *p = o + v; return o; }

// fake_run_grid runs body once per thread of a gx×bx launch.
void fake_run_grid(unsigned gx, unsigned bx, const std::function<void()>& body);

// fake_enqueue runs fn on stream s's thread after the work already queued
// there (s == 0: now). fake_bind reads a kernel's parameters and returns
// its launch, or an empty function for an unknown kernel.
void fake_enqueue(void* s, std::function<void()> fn);
std::function<void()> fake_bind(const char* name, unsigned gx, unsigned bx, void** params);
