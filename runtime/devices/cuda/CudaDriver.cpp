//===- CudaDriver.cpp - The CUDA driver API, loaded at run time -----------===//

#include "runtime/devices/cuda/CudaDriver.h"

#include <dlfcn.h>
#include <mutex>

using namespace daybreak;
using namespace daybreak::cuda;

std::string Driver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (!cuGetErrorName || cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (!cuGetErrorString || cuGetErrorString(result, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

Status Driver::check(CUresult result, const char *call) const {
  if (result == CUDA_SUCCESS)
    return Status::success();
  return Status::error(std::string(call) + ": " + describe(result));
}

/// Loads the driver; called once.
static StatusOr<const Driver *> load() {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return Status::error(std::string("no CUDA driver (libcuda.so.1): ") +
                         dlerror());
  auto getProcAddress = reinterpret_cast<PFN_cuGetProcAddress_v12000>(
      dlsym(library, "cuGetProcAddress_v2"));
  if (!getProcAddress)
    return Status::error("the CUDA driver is older than 12.0 (no "
                         "cuGetProcAddress_v2)");
  static Driver driver;
#define DAYBREAK_RESOLVE_ENTRY(name, type, version)                            \
  {                                                                            \
    CUdriverProcAddressQueryResult found;                                      \
    void *fn = nullptr;                                                        \
    CUresult result = getProcAddress(#name, &fn, version,                      \
                                     CU_GET_PROC_ADDRESS_DEFAULT, &found);     \
    if (result != CUDA_SUCCESS || !fn)                                         \
      return Status::error("the CUDA driver lacks " #name " (ABI " #version    \
                           ")");                                               \
    driver.name = reinterpret_cast<type>(fn);                                  \
  }
  DAYBREAK_CUDA_ENTRY_POINTS(DAYBREAK_RESOLVE_ENTRY)
#undef DAYBREAK_RESOLVE_ENTRY
  // The toolkit's stub library loads but refuses to initialise.
  Status status = driver.check(driver.cuInit(0), "cuInit");
  if (!status.ok())
    return status;
  status = driver.check(driver.cuDriverGetVersion(&driver.version),
                        "cuDriverGetVersion");
  if (!status.ok())
    return status;
  return &driver;
}

StatusOr<const Driver *> Driver::get() {
  static std::once_flag once;
  static StatusOr<const Driver *> loaded = Status::error("not loaded");
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

StatusOr<std::vector<DeviceInfo>> cuda::listDevices(const Driver &driver) {
  int count = 0;
  Status status = driver.check(driver.cuDeviceGetCount(&count),
                               "cuDeviceGetCount");
  if (!status.ok())
    return status;
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    CUdevice device;
    status = driver.check(driver.cuDeviceGet(&device, i), "cuDeviceGet");
    if (!status.ok())
      return status;
    DeviceInfo info;
    info.ordinal = i;
    char name[256] = {};
    status = driver.check(driver.cuDeviceGetName(name, sizeof(name), device),
                          "cuDeviceGetName");
    if (status.ok())
      status = driver.check(driver.cuDeviceTotalMem(&info.totalMemory, device),
                            "cuDeviceTotalMem");
    if (status.ok())
      status = driver.check(
          driver.cuDeviceGetAttribute(
              &info.computeMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
              device),
          "cuDeviceGetAttribute");
    if (status.ok())
      status = driver.check(
          driver.cuDeviceGetAttribute(
              &info.computeMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
              device),
          "cuDeviceGetAttribute");
    if (status.ok())
      status = driver.check(
          driver.cuDeviceGetAttribute(
              &info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
              device),
          "cuDeviceGetAttribute");
    if (!status.ok())
      return status;
    info.name = name;
    devices.push_back(info);
  }
  return devices;
}
