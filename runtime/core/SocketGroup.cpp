//===- SocketGroup.cpp - Ranks in separate processes, over TCP ------------===//

#include "runtime/core/SocketGroup.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace daybreak;
using namespace daybreak::runtime;
using Clock = std::chrono::steady_clock;

namespace {

/// The first bytes of every connection and message ("DBRK"), and the
/// protocol's version.
constexpr uint32_t kMagic = 0x4b524244, kVersion = 1;
enum : uint32_t { kAllReduce = 1, kAllGather = 2 };

const char *kindName(uint32_t kind) {
  return kind == kAllReduce   ? "all_reduce"
         : kind == kAllGather ? "all_gather"
                              : "an unknown collective";
}

/// A rank's first message, and rank 0's answer (rank = -1).
struct Hello {
  uint32_t magic = kMagic, version = kVersion;
  int64_t rank = 0, size = 0;
};

/// Each collective's message: which, and its float count.
struct Header {
  uint32_t magic = kMagic, kind = 0;
  int64_t count = 0;
};

std::string secondsText(std::chrono::milliseconds t) {
  return std::to_string(t.count() / 1000.0).substr(0, 5) + " s";
}

/// Parses a non-negative integer; nothing if `text` is not one.
std::optional<int64_t> parseCount(const char *text) {
  if (!text || !*text)
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno || *end || value < 0)
    return std::nullopt;
  return value;
}

/// Waits until `fd` is ready for `events` or the deadline passes.
Status waitFor(int fd, short events, Clock::time_point deadline,
               const std::string &what) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0)
      return Status::error(what + ": timed out");
    pollfd p{fd, events, 0};
    int ready = ::poll(&p, 1, int(std::min<int64_t>(left.count(), 1 << 30)));
    if (ready > 0)
      return Status::success();
    if (ready < 0 && errno != EINTR)
      return Status::error(what + ": " + std::strerror(errno));
  }
}

/// Sends all `bytes`; an error naming `peer` if its connection is gone.
Status sendAll(int fd, const void *data, size_t bytes,
               Clock::time_point deadline, const std::string &peer) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    if (Status s = waitFor(fd, POLLOUT, deadline, peer); !s)
      return Status::error(peer + " did not take the data in time");
    ssize_t sent = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (sent <= 0)
      return Status::error(peer + " closed its connection (it stopped)");
    p += sent;
    bytes -= size_t(sent);
  }
  return Status::success();
}

/// Receives exactly `bytes`. `late` is the error when the deadline passes
/// first.
Status receiveAll(int fd, void *data, size_t bytes, Clock::time_point deadline,
                  const std::string &peer, const std::string &late) {
  char *p = static_cast<char *>(data);
  while (bytes > 0) {
    if (Status s = waitFor(fd, POLLIN, deadline, peer); !s)
      return Status::error(late);
    ssize_t got = ::recv(fd, p, bytes, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got <= 0)
      return Status::error(peer + " closed its connection (it stopped)");
    p += got;
    bytes -= size_t(got);
  }
  return Status::success();
}

void closeSocket(int &fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

/// The addresses of `host`:`port` (TCP).
StatusOr<addrinfo *> resolve(const std::string &host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo *found = nullptr;
  std::string service = std::to_string(port);
  if (int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found))
    return Status::error("cannot resolve MASTER_ADDR '" + host +
                         "': " + ::gai_strerror(e));
  return found;
}

void noDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

} // namespace

StatusOr<std::optional<LaunchEnvironment>> runtime::launchEnvironment(
    const std::function<const char *(const char *)> &getter) {
  auto get = [&](const char *name) -> const char * {
    return getter ? getter(name) : std::getenv(name);
  };
  const char *rankName = "RANK", *sizeName = "WORLD_SIZE";
  if (!get(sizeName) && get("OMPI_COMM_WORLD_SIZE")) {
    rankName = "OMPI_COMM_WORLD_RANK";
    sizeName = "OMPI_COMM_WORLD_SIZE";
  }
  if (!get(sizeName))
    return std::optional<LaunchEnvironment>();
  std::optional<int64_t> size = parseCount(get(sizeName));
  if (!size || *size < 1)
    return Status::error(std::string(sizeName) + "='" + get(sizeName) +
                         "' is not a positive count of processes");
  if (*size == 1)
    return std::optional<LaunchEnvironment>();
  LaunchEnvironment env;
  env.worldSize = *size;
  std::optional<int64_t> rank = parseCount(get(rankName));
  if (!rank || *rank >= *size)
    return Status::error(std::string(rankName) + "='" +
                         (get(rankName) ? get(rankName) : "") +
                         "' is not a rank of " + sizeName + " " +
                         std::to_string(*size));
  env.rank = *rank;
  // The rank's GPU on its host: LOCAL_RANK as torchrun sets it, or Open
  // MPI's; a world on one host without either has its ranks' own.
  env.localRank = env.rank;
  for (const char *localName : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    const char *text = get(localName);
    if (!text)
      continue;
    std::optional<int64_t> local = parseCount(text);
    if (!local || *local >= *size)
      return Status::error(std::string(localName) + "='" + text +
                           "' is not a rank on this host of " + sizeName + " " +
                           std::to_string(*size));
    env.localRank = *local;
    break;
  }
  if (const char *addr = get("MASTER_ADDR"); addr && *addr)
    env.address = addr;
  const char *portName = get("DAYBREAK_PORT") ? "DAYBREAK_PORT" : "MASTER_PORT";
  std::optional<int64_t> port = parseCount(get(portName));
  if (!port || *port < 1 || *port > 65535)
    return Status::error(std::string(portName) + "='" +
                         (get(portName) ? get(portName) : "") +
                         "' is not a TCP port (rank 0 listens there; set "
                         "MASTER_PORT or DAYBREAK_PORT)");
  env.port = int(*port);
  // torchrun's agent serves its store on MASTER_PORT itself.
  const char *agentStore = get("TORCHELASTIC_USE_AGENT_STORE");
  if (std::string(portName) == "MASTER_PORT" && agentStore &&
      std::string(agentStore) == "True") {
    if (env.port == 65535)
      return Status::error("MASTER_PORT 65535 leaves no port after "
                           "torchrun's store; set DAYBREAK_PORT");
    env.port += 1;
  }
  if (const char *t = get("DAYBREAK_COLLECTIVE_TIMEOUT")) {
    char *end = nullptr;
    double seconds = std::strtod(t, &end);
    if (*end || !(seconds > 0))
      return Status::error(std::string("DAYBREAK_COLLECTIVE_TIMEOUT='") + t +
                           "' is not a positive number of seconds");
    env.timeout = std::chrono::milliseconds(int64_t(seconds * 1000));
  }
  return std::optional<LaunchEnvironment>(env);
}

StatusOr<std::unique_ptr<SocketCommunicator>>
SocketCommunicator::connect(const LaunchEnvironment &env) {
  std::unique_ptr<SocketCommunicator> comm(
      new SocketCommunicator(env.rank, env.worldSize, env.timeout));
  const Clock::time_point deadline = Clock::now() + env.timeout;
  const std::string where = env.address + ":" + std::to_string(env.port);
  comm->sockets.assign(env.rank == 0 ? env.worldSize : 1, -1);
  if (env.rank == 0) {
    StatusOr<addrinfo *> found = resolve(env.address, env.port, true);
    if (!found.ok())
      return found.error();
    int listener = -1;
    std::string why = "no address";
    for (addrinfo *a = *found; a && listener < 0; a = a->ai_next) {
      listener = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (listener < 0)
        continue;
      int one = 1;
      ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(listener, a->ai_addr, a->ai_addrlen) == 0 &&
          ::listen(listener, int(env.worldSize)) == 0)
        break;
      why = std::strerror(errno);
      closeSocket(listener);
    }
    ::freeaddrinfo(*found);
    if (listener < 0)
      return Status::error("rank 0 cannot listen on " + where + ": " + why);
    // Every other rank, in any order; each says which it is.
    int64_t joined = 1;
    Status status = Status::success();
    while (status && joined < env.worldSize) {
      if (!waitFor(listener, POLLIN, deadline, "rank 0")) {
        std::string missing;
        for (int64_t r = 1; r < env.worldSize; ++r)
          if (comm->sockets[r] < 0)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        status = Status::error("rank 0: rank(s) " + missing +
                               " did not connect to " + where + " within " +
                               secondsText(env.timeout));
        break;
      }
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0)
        continue;
      noDelay(fd);
      // A connection that is not a rank's (silent, or another protocol)
      // is dropped after a few seconds, not at the group's deadline.
      Hello hello;
      if (!receiveAll(
              fd, &hello, sizeof(hello),
              std::min(deadline, Clock::now() + std::chrono::seconds(5)),
              "a rank", "a rank connected but did not say which") ||
          hello.magic != kMagic || hello.version != kVersion) {
        ::close(fd); // not one of ours
        continue;
      }
      if (hello.size != env.worldSize || hello.rank < 1 ||
          hello.rank >= env.worldSize || comm->sockets[hello.rank] >= 0) {
        status = Status::error(
            "rank 0: a process joined as rank " + std::to_string(hello.rank) +
            " of " + std::to_string(hello.size) + ", in a group of " +
            std::to_string(env.worldSize) +
            (hello.rank >= 1 && hello.rank < env.worldSize
                 ? " that already has that rank"
                 : ""));
        ::close(fd);
        break;
      }
      comm->sockets[hello.rank] = fd;
      ++joined;
    }
    closeSocket(listener);
    // The group is whole: tell every rank (an early failure closes them).
    Hello welcome;
    welcome.rank = -1;
    welcome.size = env.worldSize;
    for (int64_t r = 1; status && r < env.worldSize; ++r)
      status = sendAll(comm->sockets[r], &welcome, sizeof(welcome), deadline,
                       "rank " + std::to_string(r));
    if (!status)
      return comm->fail(status);
    return comm;
  }
  // Rank 0 may not listen yet: retry until the deadline.
  std::string why;
  int fd = -1;
  while (fd < 0) {
    StatusOr<addrinfo *> found = resolve(env.address, env.port, false);
    if (!found.ok())
      return found.error();
    for (addrinfo *a = *found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        why = std::strerror(errno);
        closeSocket(fd);
      }
    }
    ::freeaddrinfo(*found);
    if (fd >= 0)
      break;
    if (Clock::now() >= deadline)
      return Status::error("rank " + std::to_string(env.rank) +
                           ": cannot reach rank 0 at " + where + " within " +
                           secondsText(env.timeout) + " (" + why + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  noDelay(fd);
  comm->sockets[0] = fd;
  Hello hello;
  hello.rank = env.rank;
  hello.size = env.worldSize;
  Hello welcome;
  Status status = sendAll(fd, &hello, sizeof(hello), deadline, "rank 0");
  if (status)
    status = receiveAll(fd, &welcome, sizeof(welcome), deadline, "rank 0",
                        "rank 0 did not see every rank within " +
                            secondsText(env.timeout));
  if (status && (welcome.magic != kMagic || welcome.size != env.worldSize))
    status = Status::error("rank 0 at " + where + " answered as another group");
  if (!status)
    return comm->fail(status.withContext("rank " + std::to_string(env.rank)));
  return comm;
}

SocketCommunicator::~SocketCommunicator() {
  for (int &fd : sockets)
    closeSocket(fd);
}

Status SocketCommunicator::fail(Status error) {
  if (!broken)
    broken = error;
  for (int &fd : sockets)
    closeSocket(fd);
  return *broken;
}

Status SocketCommunicator::collective(
    uint32_t kind, const float *in, int64_t count, float *result,
    int64_t resultCount,
    const std::function<void(const std::vector<const float *> &)> &combine) {
  if (broken)
    return *broken;
  const std::string what = kindName(kind);
  const Clock::time_point deadline = Clock::now() + waitLimit;
  auto late = [&](int64_t r) {
    return "rank " + std::to_string(r) + " did not reach it within " +
           secondsText(waitLimit);
  };
  if (index != 0) {
    Header header{kMagic, kind, count};
    Status s = sendAll(sockets[0], &header, sizeof(header), deadline, "rank 0");
    if (s)
      s = sendAll(sockets[0], in, size_t(count) * 4, deadline, "rank 0");
    Header answer;
    if (s)
      s = receiveAll(sockets[0], &answer, sizeof(answer), deadline, "rank 0",
                     late(0));
    if (s && (answer.magic != kMagic || answer.kind != kind ||
              answer.count != resultCount))
      s = Status::error("rank 0 answered " + std::string(kindName(answer.kind)) +
                        " of " + std::to_string(answer.count) + " floats");
    if (s)
      s = receiveAll(sockets[0], result, size_t(resultCount) * 4, deadline,
                     "rank 0", late(0));
    return s ? s : fail(s.withContext(what));
  }
  // Rank 0: every rank's input in rank order, then the result to each.
  received.resize(ranks);
  inputs.assign(ranks, in);
  for (int64_t r = 1; r < ranks; ++r) {
    const std::string peer = "rank " + std::to_string(r);
    Header header;
    Status s = receiveAll(sockets[r], &header, sizeof(header), deadline, peer,
                          late(r));
    if (s && (header.magic != kMagic || header.kind != kind ||
              header.count != count))
      s = Status::error(
          "ranks disagree: rank 0 reached " + what + " of " +
          std::to_string(count) + " floats, rank " + std::to_string(r) + " " +
          kindName(header.kind) + " of " + std::to_string(header.count));
    if (s) {
      received[r].resize(size_t(count));
      s = receiveAll(sockets[r], received[r].data(), size_t(count) * 4,
                     deadline, peer, late(r));
    }
    if (!s)
      return fail(s.withContext(what));
    inputs[r] = received[r].data();
  }
  combine(inputs);
  Header answer{kMagic, kind, resultCount};
  for (int64_t r = 1; r < ranks; ++r) {
    const std::string peer = "rank " + std::to_string(r);
    Status s =
        sendAll(sockets[r], &answer, sizeof(answer), deadline, peer);
    if (s)
      s = sendAll(sockets[r], result, size_t(resultCount) * 4, deadline, peer);
    if (!s)
      return fail(s.withContext(what));
  }
  return Status::success();
}

Status SocketCommunicator::allReduceSum(const float *in, float *out,
                                        int64_t count) {
  // As LoopbackGroup: zero, then each rank's input in rank order (into
  // `sum`: `in` may be `out`).
  return collective(kAllReduce, in, count, out, count,
                    [&](const std::vector<const float *> &all) {
                      sum.assign(size_t(count), 0.0f);
                      for (const float *part : all)
                        for (int64_t i = 0; i < count; ++i)
                          sum[i] += part[i];
                      std::copy(sum.begin(), sum.end(), out);
                    });
}

Status SocketCommunicator::allGather(const float *in, float *out, int64_t rows,
                                     int64_t width) {
  int64_t n = ranks;
  return collective(kAllGather, in, rows * width, out, rows * width * n,
                    [&](const std::vector<const float *> &all) {
                      for (int64_t r = 0; r < n; ++r)
                        for (int64_t row = 0; row < rows; ++row)
                          std::copy_n(all[r] + row * width, width,
                                      out + (row * n + r) * width);
                    });
}
