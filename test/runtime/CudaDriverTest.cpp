//===- CudaDriverTest.cpp - The CUDA driver through dlopen ----------------===//
//
// Runtime-only tests (no MLIR or LLVM in this binary, so it runs on a GPU
// machine as built here). Without a driver they skip, saying why; with one
// they load a PTX module, launch it and check the result, and check that a
// failing call reports the CUDA error by name.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cuda/CudaDriver.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <vector>

using namespace daybreak;
using namespace daybreak::cuda;

namespace {

// out[i] = in[i] + 1 for i < n; hand-written PTX for any sm_70+ device.
const char *kAddOnePtx = R"ptx(
.version 7.0
.target sm_70
.address_size 64
.visible .entry add_one(.param .u64 p_in, .param .u64 p_out, .param .u32 p_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  ld.param.u32 %r1, [p_n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.u32 %rd5, %r5, 4;
  add.s64 %rd6, %rd3, %rd5;
  add.s64 %rd7, %rd4, %rd5;
  ld.global.f32 %f1, [%rd6];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd7], %f2;
DONE:
  ret;
}
)ptx";

/// The driver, or a skip that says why there is none.
#define GET_DRIVER_OR_SKIP(var)                                                \
  StatusOr<const Driver *> loaded = Driver::get();                            \
  if (!loaded.ok())                                                            \
    GTEST_SKIP() << "no GPU here: " << loaded.error().message();               \
  const Driver &var = **loaded;

TEST(CudaDriver, ListsDevices) {
  GET_DRIVER_OR_SKIP(driver);
  auto devices = listDevices(driver);
  ASSERT_TRUE(devices.ok()) << devices.error().message();
  ASSERT_FALSE(devices->empty());
  for (const DeviceInfo &d : *devices) {
    std::printf("cuda:%d %s sm_%d%d, %zu MiB, %d SMs (driver %d)\n", d.ordinal,
                d.name.c_str(), d.computeMajor, d.computeMinor,
                d.totalMemory >> 20, d.multiprocessors, driver.version);
    EXPECT_GT(d.totalMemory, 0u);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

TEST(CudaDriver, LoadsPtxAndLaunches) {
  GET_DRIVER_OR_SKIP(driver);
  CUdevice device;
  ASSERT_TRUE(driver.check(driver.cuDeviceGet(&device, 0), "cuDeviceGet").ok());
  CUcontext context;
  ASSERT_TRUE(driver
                  .check(driver.cuDevicePrimaryCtxRetain(&context, device),
                         "cuDevicePrimaryCtxRetain")
                  .ok());
  ASSERT_TRUE(
      driver.check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent").ok());
  CUmodule module;
  Status status = driver.check(
      driver.cuModuleLoadDataEx(&module, kAddOnePtx, 0, nullptr, nullptr),
      "cuModuleLoadDataEx");
  ASSERT_TRUE(status.ok()) << status.message();
  CUfunction function;
  ASSERT_TRUE(driver
                  .check(driver.cuModuleGetFunction(&function, module, "add_one"),
                         "cuModuleGetFunction")
                  .ok());
  const unsigned n = 100003; // not a multiple of the block
  std::vector<float> host(n), result(n);
  for (unsigned i = 0; i < n; ++i)
    host[i] = 0.25f * i;
  CUdeviceptr in, out;
  ASSERT_TRUE(driver.check(driver.cuMemAlloc(&in, n * 4), "cuMemAlloc").ok());
  ASSERT_TRUE(driver.check(driver.cuMemAlloc(&out, n * 4), "cuMemAlloc").ok());
  ASSERT_TRUE(driver.check(driver.cuMemcpyHtoD(in, host.data(), n * 4),
                           "cuMemcpyHtoD")
                  .ok());
  unsigned count = n;
  void *params[] = {&in, &out, &count};
  status = driver.check(driver.cuLaunchKernel(function, (n + 255) / 256, 1, 1,
                                              256, 1, 1, 0, nullptr, params,
                                              nullptr),
                        "cuLaunchKernel");
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(driver.check(driver.cuMemcpyDtoH(result.data(), out, n * 4),
                           "cuMemcpyDtoH")
                  .ok());
  for (unsigned i = 0; i < n; ++i)
    ASSERT_EQ(result[i], 0.25f * i + 1.0f) << i; // exact in fp32
  EXPECT_TRUE(driver.check(driver.cuMemFree(in), "cuMemFree").ok());
  EXPECT_TRUE(driver.check(driver.cuMemFree(out), "cuMemFree").ok());
  EXPECT_TRUE(driver.check(driver.cuModuleUnload(module), "cuModuleUnload").ok());
  driver.cuDevicePrimaryCtxRelease(device);
}

TEST(CudaDriver, ReportsErrorsByName) {
  GET_DRIVER_OR_SKIP(driver);
  CUdevice device;
  CUcontext context;
  ASSERT_TRUE(driver.check(driver.cuDeviceGet(&device, 0), "cuDeviceGet").ok());
  ASSERT_TRUE(driver
                  .check(driver.cuDevicePrimaryCtxRetain(&context, device),
                         "cuDevicePrimaryCtxRetain")
                  .ok());
  driver.cuCtxSetCurrent(context);
  CUmodule module;
  Status status = driver.check(
      driver.cuModuleLoadDataEx(&module, ".version 7.0\n.target sm_70\nnot ptx",
                                0, nullptr, nullptr),
      "cuModuleLoadDataEx");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cuModuleLoadDataEx: CUDA_ERROR_"),
            std::string::npos)
      << status.message();
  std::printf("invalid PTX: %s\n", status.message().c_str());
  driver.cuDevicePrimaryCtxRelease(device);
}

} // namespace
