//===- NcclTest.cpp - NCCL through dlopen ---------------------------------===//
//
// A library that is not there is an error naming it, anywhere. With a GPU
// and NCCL, a group of one rank (all one GPU can hold: NCCL refuses two
// ranks on one device) joins through a LoopbackGroup and runs its
// collectives on a stream, directly and recorded in a CUDA graph, as the
// CUDA device's steps do; `wait` returns once they are done. The collectives
// of several GPUs need the multi-GPU machines (docs/parallel.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cuda/Nccl.h"

#include "gtest/gtest.h"

#include <random>
#include <vector>

using namespace daybreak;
using namespace daybreak::cuda;

namespace {

TEST(Nccl, AMissingLibraryIsNamed) {
  StatusOr<std::unique_ptr<Nccl>> nccl =
      Nccl::open("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(nccl.ok());
  const std::string &message = nccl.error().message();
  EXPECT_EQ(message.rfind("no NCCL (/nonexistent/libnccl.so.2): ", 0), 0u)
      << message;
  EXPECT_NE(message.find("DAYBREAK_NCCL_LIBRARY"), std::string::npos)
      << message;
}

TEST(Nccl, OneRankGroupRunsItsCollectivesOnAStream) {
  StatusOr<const Driver *> loaded = Driver::get();
  if (!loaded.ok())
    GTEST_SKIP() << "no GPU here: " << loaded.error().message();
  const Driver &driver = **loaded;
  StatusOr<const Nccl *> library = Nccl::get();
  if (!library.ok())
    GTEST_SKIP() << library.error().message();
  std::printf("NCCL %d from %s\n", (*library)->version,
              (*library)->path.c_str());
  CUdevice device;
  CUcontext context;
  ASSERT_TRUE(driver.check(driver.cuDeviceGet(&device, 0), "cuDeviceGet"));
  ASSERT_TRUE(driver.check(driver.cuDevicePrimaryCtxRetain(&context, device),
                           "cuDevicePrimaryCtxRetain"));
  ASSERT_TRUE(driver.check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent"));
  CUstream stream;
  ASSERT_TRUE(driver.check(driver.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate"));

  runtime::LoopbackGroup group(1, std::chrono::seconds(30));
  StatusOr<std::unique_ptr<NcclCommunicator>> comm =
      NcclCommunicator::create(driver, group.rank(0));
  ASSERT_TRUE(comm.ok()) << comm.error().message();
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->size(), 1);

  constexpr int64_t kCount = 1 << 20;
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  std::vector<float> host(kCount), sum(kCount), gathered(kCount);
  for (float &x : host)
    x = d(rng);
  CUdeviceptr in, reduced, all;
  ASSERT_TRUE(driver.check(driver.cuMemAlloc(&in, kCount * 4), "cuMemAlloc"));
  ASSERT_TRUE(driver.check(driver.cuMemAlloc(&reduced, kCount * 4), "cuMemAlloc"));
  ASSERT_TRUE(driver.check(driver.cuMemAlloc(&all, kCount * 4), "cuMemAlloc"));
  ASSERT_TRUE(driver.check(driver.cuMemcpyHtoD(in, host.data(), kCount * 4),
                           "cuMemcpyHtoD"));

  // Directly on the stream: a group of one sums and gathers its own values.
  Status s = (*comm)->allReduceSum(in, reduced, kCount, stream);
  ASSERT_TRUE(s) << s.message();
  s = (*comm)->allGather(in, all, kCount, stream);
  ASSERT_TRUE(s) << s.message();
  s = (*comm)->wait(stream, "the test's collectives");
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(driver.check(driver.cuMemcpyDtoH(sum.data(), reduced, kCount * 4),
                           "cuMemcpyDtoH"));
  ASSERT_TRUE(driver.check(driver.cuMemcpyDtoH(gathered.data(), all, kCount * 4),
                           "cuMemcpyDtoH"));
  EXPECT_EQ(sum, host);
  EXPECT_EQ(gathered, host);

  // Recorded into a graph and replayed, as a decode step's are.
  ASSERT_TRUE(driver.check(driver.cuMemsetD8(reduced, 0, kCount * 4),
                           "cuMemsetD8"));
  ASSERT_TRUE(driver.check(
      driver.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture"));
  s = (*comm)->allReduceSum(in, reduced, kCount, stream);
  CUgraph graph = nullptr;
  Status ended =
      driver.check(driver.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(ended) << ended.message();
  CUgraphExec exec = nullptr;
  ASSERT_TRUE(driver.check(driver.cuGraphInstantiateWithFlags(&exec, graph, 0),
                           "cuGraphInstantiateWithFlags"));
  ASSERT_TRUE(driver.check(driver.cuGraphLaunch(exec, stream), "cuGraphLaunch"));
  s = (*comm)->wait(stream, "the graph's collective");
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(driver.check(driver.cuMemcpyDtoH(sum.data(), reduced, kCount * 4),
                           "cuMemcpyDtoH"));
  EXPECT_EQ(sum, host);

  driver.cuGraphExecDestroy(exec);
  driver.cuGraphDestroy(graph);
  comm->reset();
  driver.cuMemFree(in);
  driver.cuMemFree(reduced);
  driver.cuMemFree(all);
  driver.cuStreamDestroy(stream);
  driver.cuDevicePrimaryCtxRelease(device);
}

} // namespace
