//===- CommunicatorTest.cpp - Collectives between ranks over TCP ----------===//
//
// SocketCommunicator, the ranks of one process each in a thread here (each
// with its own sockets, as separate processes have): its sums against
// LoopbackGroup's bit for bit, gathers, ranks that disagree, stop or never
// come, and the launcher variables it reads. test/tools/launch.test runs it
// across processes, as torchrun starts them.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/SocketGroup.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace daybreak;
using namespace daybreak::runtime;

namespace {

/// A TCP port nothing listens on now (the kernel's pick for port 0).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&addr), length) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &length) != 0)
    return 0;
  ::close(fd);
  return ntohs(addr.sin_port);
}

LaunchEnvironment world(int64_t rank, int64_t size, int port,
                        std::chrono::milliseconds timeout =
                            std::chrono::seconds(20)) {
  LaunchEnvironment env;
  env.rank = rank;
  env.worldSize = size;
  env.port = port;
  env.timeout = timeout;
  return env;
}

/// Runs body(rank, communicator or its error) for every rank of a group
/// on `port`, a thread a rank (rank 0 last to start: the others wait for
/// it).
void runGroup(int64_t size, int port,
              const std::function<void(int64_t, StatusOr<std::unique_ptr<
                                                    SocketCommunicator>> &)>
                  &body,
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<std::thread> threads;
  for (int64_t r = size - 1; r >= 0; --r)
    threads.emplace_back([&, r] {
      auto comm = SocketCommunicator::connect(world(r, size, port, timeout));
      body(r, comm);
    });
  for (std::thread &t : threads)
    t.join();
}

std::vector<float> randomFloats(std::mt19937 &rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 100.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

} // namespace

TEST(LoopbackGroup, GroupCollectivesMeetTheirGroupOnly) {
  // Six ranks in groups of 2, 3 and 6 (and 1): each rank's sums are its
  // group's inputs added in rank order from 0.0f (the world's order), in
  // place too; its gather holds its group's rows in rank order. A group
  // size that does not divide the world is refused, naming both.
  constexpr int64_t kRanks = 6, kCount = 1001, kRows = 3, kWidth = 4;
  std::mt19937 rng(11);
  std::vector<std::vector<float>> inputs;
  for (int64_t r = 0; r < kRanks; ++r)
    inputs.push_back(randomFloats(rng, kCount * 2));
  for (int64_t group : {1, 2, 3, 6}) {
    LoopbackGroup world(kRanks);
    std::vector<std::vector<float>> sums(kRanks), gathers(kRanks);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        sums[r] = inputs[r];
        sums[r].resize(kCount);
        Status s = world.rank(r).groupAllReduceSum(
            sums[r].data(), sums[r].data(), kCount, group);
        EXPECT_TRUE(s) << s.message();
        gathers[r].resize(kRows * kWidth * group);
        s = world.rank(r).groupAllGather(inputs[r].data(), gathers[r].data(),
                                         kRows, kWidth, group);
        EXPECT_TRUE(s) << s.message();
      });
    for (std::thread &t : threads)
      t.join();
    for (int64_t r = 0; r < kRanks; ++r) {
      const int64_t first = r / group * group;
      for (int64_t i = 0; i < kCount; ++i) {
        float sum = 0.0f;
        for (int64_t q = first; q < first + group; ++q)
          sum += inputs[q][i];
        ASSERT_EQ(std::memcmp(&sums[r][i], &sum, 4), 0)
            << "group " << group << " rank " << r << " value " << i;
      }
      for (int64_t row = 0; row < kRows; ++row)
        for (int64_t j = 0; j < group; ++j)
          for (int64_t i = 0; i < kWidth; ++i)
            ASSERT_EQ(gathers[r][(row * group + j) * kWidth + i],
                      inputs[first + j][row * kWidth + i])
                << "group " << group << " rank " << r;
    }
  }
  LoopbackGroup world(kRanks);
  float x = 1.0f;
  Status s = world.rank(0).groupAllReduceSum(&x, &x, 1, 4);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "all_reduce over groups of 4 ranks in a world of 6 "
                         "(a group size must divide the world)");
}

TEST(SocketCommunicator, SumsAndGathersAsTheLoopbackGroup) {
  // Four ranks, sums of values whose order matters in fp32 (and a sum in
  // place), then a gather: the same bits as the in-process group's.
  constexpr int64_t kRanks = 4, kCount = 10007, kRows = 3, kWidth = 5;
  std::mt19937 rng(7);
  std::vector<std::vector<float>> inputs, gatherInputs;
  for (int64_t r = 0; r < kRanks; ++r) {
    inputs.push_back(randomFloats(rng, kCount));
    gatherInputs.push_back(randomFloats(rng, kRows * kWidth));
  }
  std::vector<std::vector<float>> loopSum(kRanks), loopGather(kRanks);
  {
    LoopbackGroup group(kRanks);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        loopSum[r].resize(kCount);
        loopGather[r].resize(kRanks * kRows * kWidth);
        EXPECT_TRUE(group.rank(r).allReduceSum(inputs[r].data(),
                                               loopSum[r].data(), kCount));
        EXPECT_TRUE(group.rank(r).allGather(gatherInputs[r].data(),
                                            loopGather[r].data(), kRows,
                                            kWidth));
      });
    for (std::thread &t : threads)
      t.join();
  }
  std::vector<std::vector<float>> sums(kRanks), gathers(kRanks);
  runGroup(kRanks, freePort(), [&](int64_t r, auto &comm) {
    ASSERT_TRUE(comm.ok()) << comm.error().message();
    EXPECT_EQ((*comm)->rank(), r);
    EXPECT_EQ((*comm)->size(), kRanks);
    sums[r] = inputs[r];
    // In place (in == out), as the CPU device may call it.
    Status s = (*comm)->allReduceSum(sums[r].data(), sums[r].data(), kCount);
    EXPECT_TRUE(s) << s.message();
    gathers[r].resize(kRanks * kRows * kWidth);
    s = (*comm)->allGather(gatherInputs[r].data(), gathers[r].data(), kRows,
                           kWidth);
    EXPECT_TRUE(s) << s.message();
  });
  for (int64_t r = 0; r < kRanks; ++r) {
    EXPECT_EQ(0, std::memcmp(sums[r].data(), loopSum[0].data(), kCount * 4))
        << "rank " << r;
    EXPECT_EQ(gathers[r], loopGather[0]) << "rank " << r;
  }
  // The gather's layout: row i holds every rank's row i in rank order.
  EXPECT_EQ(gathers[1][(2 * kRanks + 3) * kWidth + 4],
            gatherInputs[3][2 * kWidth + 4]);
}

TEST(SocketCommunicator, RanksThatDisagreeAreTold) {
  // Rank 1 reaches an all_gather where the others reach an all_reduce.
  std::map<int64_t, std::string> errors;
  std::mutex mutex;
  runGroup(3, freePort(), [&](int64_t r, auto &comm) {
    ASSERT_TRUE(comm.ok()) << comm.error().message();
    std::vector<float> in(8, 1.0f), out(24);
    Status s = r == 1 ? (*comm)->allGather(in.data(), out.data(), 1, 8)
                      : (*comm)->allReduceSum(in.data(), out.data(), 8);
    std::lock_guard<std::mutex> lock(mutex);
    errors[r] = s ? "" : s.message();
  });
  EXPECT_EQ(errors[0], "all_reduce: ranks disagree: rank 0 reached all_reduce "
                       "of 8 floats, rank 1 all_gather of 8");
  EXPECT_EQ(errors[1], "all_gather: rank 0 closed its connection (it stopped)");
  EXPECT_EQ(errors[2], "all_reduce: rank 0 closed its connection (it stopped)");
}

TEST(SocketCommunicator, ARankThatStopsIsReportedByEveryOther) {
  // Rank 2 leaves after the first collective (its process ended): rank 0
  // names it and closes the group, so rank 1 fails too instead of waiting;
  // later calls fail at once with the same error.
  std::map<int64_t, std::string> errors;
  std::mutex mutex;
  runGroup(3, freePort(), [&](int64_t r, auto &comm) {
    ASSERT_TRUE(comm.ok()) << comm.error().message();
    std::vector<float> x(4, float(r));
    ASSERT_TRUE((*comm)->allReduceSum(x.data(), x.data(), 4));
    EXPECT_EQ(x[0], 3.0f);
    if (r == 2) {
      comm->reset();
      return;
    }
    Status s = (*comm)->allReduceSum(x.data(), x.data(), 4);
    Status again = (*comm)->allReduceSum(x.data(), x.data(), 4);
    EXPECT_EQ(again.message(), s.message());
    std::lock_guard<std::mutex> lock(mutex);
    errors[r] = s ? "" : s.message();
  });
  EXPECT_EQ(errors[0], "all_reduce: rank 2 closed its connection (it stopped)");
  EXPECT_EQ(errors[1], "all_reduce: rank 0 closed its connection (it stopped)");
}

TEST(SocketCommunicator, ARankThatNeverComesTimesOut) {
  // Rank 1 of 2 never starts: rank 0 stops waiting after the timeout.
  auto start = std::chrono::steady_clock::now();
  auto comm = SocketCommunicator::connect(
      world(0, 2, freePort(), std::chrono::milliseconds(300)));
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.error().message().find("rank(s) 1 did not connect"),
            std::string::npos)
      << comm.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // A rank whose rank 0 never listens.
  comm = SocketCommunicator::connect(
      world(1, 2, freePort(), std::chrono::milliseconds(300)));
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.error().message().find("rank 1: cannot reach rank 0"),
            std::string::npos)
      << comm.error().message();
  // A rank that joins but never reaches the collective.
  std::string error;
  runGroup(
      2, freePort(),
      [&](int64_t r, auto &c) {
        ASSERT_TRUE(c.ok()) << c.error().message();
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(900));
          return;
        }
        float x = 1.0f;
        Status s = (*c)->allReduceSum(&x, &x, 1);
        error = s ? "" : s.message();
      },
      std::chrono::milliseconds(300));
  EXPECT_EQ(error, "all_reduce: rank 1 did not reach it within 0.300 s");
}

TEST(SocketCommunicator, ReadsTheLauncherVariables) {
  auto from = [](std::map<std::string, std::string> vars) {
    return [vars](const char *name) -> const char * {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  // None, or a world of one: not launched.
  auto env = launchEnvironment(from({}));
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->has_value());
  env = launchEnvironment(from({{"WORLD_SIZE", "1"}, {"RANK", "0"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->has_value());
  // As a script or torch.distributed sets them.
  env = launchEnvironment(from({{"WORLD_SIZE", "4"},
                                {"RANK", "3"},
                                {"MASTER_ADDR", "10.0.0.1"},
                                {"MASTER_PORT", "29500"},
                                {"DAYBREAK_COLLECTIVE_TIMEOUT", "2.5"}}));
  ASSERT_TRUE(env.ok()) << env.error().message();
  ASSERT_TRUE(env->has_value());
  EXPECT_EQ((*env)->rank, 3);
  EXPECT_EQ((*env)->worldSize, 4);
  EXPECT_EQ((*env)->address, "10.0.0.1");
  EXPECT_EQ((*env)->port, 29500);
  EXPECT_EQ((*env)->timeout.count(), 2500);
  // torchrun: its agent's store holds MASTER_PORT, so the next one.
  env = launchEnvironment(from({{"WORLD_SIZE", "2"},
                                {"RANK", "1"},
                                {"MASTER_PORT", "29500"},
                                {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->port, 29501);
  EXPECT_EQ((*env)->address, "127.0.0.1");
  env = launchEnvironment(from({{"WORLD_SIZE", "2"},
                                {"RANK", "1"},
                                {"MASTER_PORT", "29500"},
                                {"DAYBREAK_PORT", "4000"},
                                {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->port, 4000);
  // Open MPI's mpirun.
  env = launchEnvironment(from({{"OMPI_COMM_WORLD_SIZE", "8"},
                                {"OMPI_COMM_WORLD_RANK", "5"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                {"MASTER_PORT", "7000"}}));
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->rank, 5);
  EXPECT_EQ((*env)->worldSize, 8);
  EXPECT_EQ((*env)->localRank, 1);
  // The GPU: LOCAL_RANK as torchrun sets it; without it, the rank's own.
  env = launchEnvironment(from({{"WORLD_SIZE", "16"},
                                {"RANK", "11"},
                                {"LOCAL_RANK", "3"},
                                {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->localRank, 3);
  env = launchEnvironment(
      from({{"WORLD_SIZE", "4"}, {"RANK", "2"}, {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->localRank, 2);
  env = launchEnvironment(from({{"WORLD_SIZE", "4"},
                                {"RANK", "2"},
                                {"LOCAL_RANK", "x"},
                                {"MASTER_PORT", "29500"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().message(),
            "LOCAL_RANK='x' is not a rank on this host of WORLD_SIZE 4");
  // Malformed values name the variable.
  env = launchEnvironment(
      from({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_PORT", "1"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().message(), "RANK='2' is not a rank of WORLD_SIZE 2");
  env = launchEnvironment(from({{"WORLD_SIZE", "two"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().message(),
            "WORLD_SIZE='two' is not a positive count of processes");
  env = launchEnvironment(from({{"WORLD_SIZE", "2"}, {"RANK", "0"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().message(),
            "MASTER_PORT='' is not a TCP port (rank 0 listens there; set "
            "MASTER_PORT or DAYBREAK_PORT)");
  env = launchEnvironment(from({{"WORLD_SIZE", "2"},
                                {"RANK", "0"},
                                {"MASTER_PORT", "80"},
                                {"DAYBREAK_COLLECTIVE_TIMEOUT", "-1"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().message(),
            "DAYBREAK_COLLECTIVE_TIMEOUT='-1' is not a positive number of "
            "seconds");
}

TEST(SocketCommunicator, BroadcastsBytesBitForBit) {
  // NCCL's unique id: 128 arbitrary bytes (NaN patterns, negative zeros,
  // denormals among them as floats) from rank 0 to every rank, over TCP
  // and in process; and the group's timeout, which NCCL's waits keep.
  constexpr int64_t kRanks = 3;
  constexpr size_t kBytes = 130; // not a whole number of floats
  std::mt19937 rng(5);
  std::vector<uint8_t> id(kBytes);
  for (uint8_t &b : id)
    b = uint8_t(rng());
  // Float patterns that arithmetic would change.
  const uint32_t special[] = {0x7fa00001u, 0xffc00002u, 0x80000000u,
                              0x00000001u};
  std::memcpy(id.data(), special, sizeof(special));
  std::vector<std::vector<uint8_t>> got(kRanks);
  runGroup(kRanks, freePort(), [&](int64_t r, auto &comm) {
    ASSERT_TRUE(comm.ok()) << comm.error().message();
    EXPECT_EQ((*comm)->timeout(), std::chrono::seconds(20));
    got[r] = r == 0 ? id : std::vector<uint8_t>(kBytes, 0xab);
    Status s = (*comm)->broadcastBytes(got[r].data(), kBytes, 0);
    EXPECT_TRUE(s) << s.message();
  });
  for (int64_t r = 0; r < kRanks; ++r)
    EXPECT_EQ(got[r], id) << "rank " << r;

  LoopbackGroup group(kRanks, std::chrono::seconds(7));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      EXPECT_EQ(group.rank(r).timeout(), std::chrono::seconds(7));
      // From the last rank this time.
      got[r] = r == kRanks - 1 ? id : std::vector<uint8_t>(kBytes, 0);
      EXPECT_TRUE(
          group.rank(r).broadcastBytes(got[r].data(), kBytes, kRanks - 1));
    });
  for (std::thread &t : threads)
    t.join();
  for (int64_t r = 0; r < kRanks; ++r)
    EXPECT_EQ(got[r], id) << "rank " << r;
  Status outside = group.rank(0).broadcastBytes(got[0].data(), kBytes, 3);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.message(), "broadcast from rank 3 of 3");
}
